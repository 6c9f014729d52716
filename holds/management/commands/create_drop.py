"""Create a drop with its product and stock rows: `manage.py create_drop --slug S --quantity N`.

Here rather than in the catalogue (which makes the drop) because it can make the drop's presale
codes too, and those are the holds layer's (holds/presale.py)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from catalogue import services
from core.errors import InvalidInput
from holds import presale
from shop.models import DEFAULT_JOIN_WORK_BITS, DEFAULT_LINE_CLOSE_SECONDS, InventoryMode

PRESALE_CODES_MAX = presale.GENERATE_MAX


class Command(BaseCommand):
    help = "Create a drop (and its product, if the SKU is new) with its stock rows."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--slug", required=True)
        parser.add_argument(
            "--quantity", type=int, default=None, help="units on sale (default: the variants' sum)"
        )
        parser.add_argument(
            "--variant",
            action="append",
            default=[],
            metavar="NAME:QUANTITY[:PRICE_MINOR]",
            help="a variant with its own stock (and price), once per variant: --variant M:40 --variant L:60",
        )
        parser.add_argument("--mode", choices=InventoryMode.values, default=InventoryMode.BUCKETS)
        parser.add_argument("--buckets", type=int, default=1)
        parser.add_argument("--hold-seconds", type=int, default=480)
        parser.add_argument(
            "--offer-seconds",
            type=int,
            default=90,
            help="waiting room: seconds a returned unit is kept for a ticket",
        )
        parser.add_argument("--per-buyer-limit", type=int, default=2)
        parser.add_argument("--starts-in", type=int, default=None, help="seconds from now (default 60)")
        parser.add_argument("--duration", type=int, default=3600, help="seconds the sale lasts")
        parser.add_argument(
            "--ends-in", type=int, default=None, help="seconds from now (instead of --duration)"
        )
        parser.add_argument(
            "--presale-in",
            type=int,
            default=None,
            metavar="SECONDS",
            help="a presale window of this many seconds before the start (codes and the list only)",
        )
        parser.add_argument(
            "--presale-codes",
            type=int,
            default=0,
            metavar="N",
            help="make N single-use presale codes (printed in the JSON line as presale_codes)",
        )
        room = parser.add_mutually_exclusive_group()
        room.add_argument("--waiting-room", dest="waiting_room", action="store_true")
        room.add_argument("--no-waiting-room", dest="waiting_room", action="store_false")
        parser.set_defaults(waiting_room=None)
        parser.add_argument(
            "--raffle",
            action="store_true",
            help="a raffle: entries through the waiting room until the close, then drawn (implies "
            "--waiting-room; the winners pay within --offer-seconds)",
        )
        parser.add_argument(
            "--entries-close-in",
            type=int,
            default=None,
            help="raffle: seconds from now until entries close and the draw (the drop's start)",
        )
        parser.add_argument(
            "--admission-percent", type=int, default=150, help="each wave admits this %% of the units left"
        )
        parser.add_argument("--wave-seconds", type=int, default=5, help="seconds between admission waves")
        parser.add_argument(
            "--join-work-bits",
            type=int,
            default=DEFAULT_JOIN_WORK_BITS,
            help=f"waiting room: proof-of-work bits per join (default {DEFAULT_JOIN_WORK_BITS}, ~1 s in a "
            "browser; 0 turns it off, as load tests do)",
        )
        parser.add_argument(
            "--line-close-seconds",
            type=int,
            default=DEFAULT_LINE_CLOSE_SECONDS,
            help=f"waiting room: the line closes this many seconds before the start, drawn by the start "
            f"(default {DEFAULT_LINE_CLOSE_SECONDS}); later joiners queue behind it in arrival order",
        )
        parser.add_argument(
            "--draw-round-wait-seconds",
            type=int,
            default=0,
            help="waiting room: if the drand round cannot be read, the draw waits up to this long after "
            "the start for it; at the limit it is drawn on the seed alone and says so (default 0)",
        )
        parser.add_argument(
            "--exchange-for",
            type=int,
            default=None,
            metavar="SECONDS",
            help="waiting room: a face-value exchange open this long after the end (none by default)",
        )
        parser.add_argument(
            "--exchange-fee-minor", type=int, default=0, help="kept from the seller's refund per unit resold"
        )
        parser.add_argument(
            "--redis-gate", action="store_true", help="answer most 'sold out's from a Redis count first"
        )
        parser.add_argument("--price-minor", type=int, default=4900)
        parser.add_argument("--currency", default="EUR")
        parser.add_argument(
            "--tax-rate", default="0", help="a new product's tax rate in percent, e.g. 19 or 7.7 (default 0)"
        )
        parser.add_argument(
            "--ships", action="store_true", help="a new product is sent: buyers give an address"
        )
        parser.add_argument(
            "--ship-zone",
            action="append",
            default=[],
            metavar="NAME:COUNTRIES:FEE_MINOR[:unit][:TAX_RATE]",
            help="with --ships: a zone the new product ships to and its fee, per order unless "
            "'unit', taxed like the product unless a rate is given; once per zone: "
            "--ship-zone Germany:DE:490 --ship-zone EU:AT,FR,NL:990:unit:19 (none: everywhere, free)",
        )
        parser.add_argument("--sku", default=None, help="defaults to the slug, upper-cased")
        parser.add_argument("--product-name", default=None, help="defaults to the title")
        parser.add_argument("--title", default="")
        parser.add_argument("--labels", default=None, help="units mode: comma-separated labels")

    def handle(self, *args: object, **opts: Any) -> None:  # argparse's values
        now = timezone.now()
        starts_at = now + timedelta(seconds=_start_in(opts))
        ends_in = opts["ends_in"]
        ends_at = (
            now + timedelta(seconds=int(ends_in))
            if ends_in is not None
            else starts_at + timedelta(seconds=int(opts["duration"]))
        )
        slug = str(opts["slug"])
        title = str(opts["title"])
        labels = str(opts["labels"]).split(",") if opts["labels"] else None
        presale_in = opts["presale_in"]
        codes = int(opts["presale_codes"])
        try:
            if presale_in is not None and int(presale_in) < 1:
                raise InvalidInput("--presale-in is the presale's length in seconds: at least 1.")
            exchange_for = None if opts["exchange_for"] is None else int(opts["exchange_for"])
            if exchange_for is not None and exchange_for < 1:
                raise InvalidInput("--exchange-for is how long the exchange stays open: at least 1 second.")
            if codes and presale_in is None:
                raise InvalidInput("--presale-codes needs a presale: give --presale-in SECONDS too.")
            if not 0 <= codes <= PRESALE_CODES_MAX:
                raise InvalidInput(f"--presale-codes makes 1 to {PRESALE_CODES_MAX} codes.")
            variants = [services.variant_from(str(text)) for text in opts["variant"]]
            quantity = opts["quantity"]
            if quantity is None:
                if not variants:
                    raise InvalidInput("Give --quantity, or the variants with --variant NAME:QUANTITY.")
                quantity = sum(v.quantity for v in variants)
            tax_rate = services.tax_rate_from(str(opts["tax_rate"]))
            zones = [services.zone_from(str(text)) for text in opts["ship_zone"]]
            drop = services.create_drop(
                slug=slug,
                quantity=int(quantity),
                variants=variants,
                starts_at=starts_at,
                ends_at=ends_at,
                product_sku=str(opts["sku"] or slug.upper())[:64],
                product_name=str(opts["product_name"] or title or slug.replace("-", " ").title()),
                price_minor=int(opts["price_minor"]),
                currency=str(opts["currency"]),
                tax_rate=tax_rate,
                ships=bool(opts["ships"]),
                shipping_zones=zones,
                title=title,
                inventory_mode=str(opts["mode"]),
                bucket_count=int(opts["buckets"]),
                hold_seconds=int(opts["hold_seconds"]),
                offer_seconds=int(opts["offer_seconds"]),
                per_buyer_limit=int(opts["per_buyer_limit"]),
                waiting_room=bool(opts["raffle"] if opts["waiting_room"] is None else opts["waiting_room"]),
                raffle=bool(opts["raffle"]),
                admission_wave_seconds=int(opts["wave_seconds"]),
                admission_percent=int(opts["admission_percent"]),
                join_work_bits=int(opts["join_work_bits"]),
                line_close_seconds=int(opts["line_close_seconds"]),
                draw_round_wait_seconds=int(opts["draw_round_wait_seconds"]),
                redis_gate=bool(opts["redis_gate"]),
                unit_labels=labels,
                presale_starts_at=None
                if presale_in is None
                else starts_at - timedelta(seconds=int(presale_in)),
                exchange_closes_at=None
                if exchange_for is None
                else ends_at + timedelta(seconds=exchange_for),
                exchange_fee_minor=int(opts["exchange_fee_minor"]),
            )
        except InvalidInput as error:
            raise CommandError(f"drop not created: {error.detail}") from None
        made: list[str] = []
        if codes:
            made = [code.code for code in presale.generate_codes(drop=drop, count=codes, max_uses=1)]
        self.stdout.write(
            json.dumps(
                {
                    "slug": drop.slug,
                    "quantity": drop.quantity,
                    "mode": drop.inventory_mode,
                    "buckets": drop.bucket_count,
                    "starts_at": drop.starts_at.isoformat(),
                    "ends_at": drop.ends_at.isoformat(),
                    "waiting_room": drop.waiting_room,
                    "format": drop.format.value,
                    "join_work_bits": drop.join_work_bits,
                    "line_close_seconds": drop.line_close_seconds,
                    "draw_round_wait_seconds": drop.draw_round_wait_seconds,
                    "admission_percent": drop.admission_percent,
                    "wave_seconds": drop.admission_wave_seconds,
                    "redis_gate": drop.redis_gate,
                    "presale_starts_at": drop.presale_starts_at.isoformat()
                    if drop.presale_starts_at
                    else None,
                    "presale_codes": made,
                    "exchange_closes_at": drop.exchange_closes_at.isoformat()
                    if drop.exchange_closes_at
                    else None,
                    "exchange_fee_minor": drop.exchange_fee_minor,
                    "variants": [
                        {"name": v.name, "quantity": v.quantity, "price_minor": v.price_minor}
                        for v in drop.variants.all()
                    ],
                }
            )
        )


def _start_in(opts: dict[str, Any]) -> int:
    """Seconds until the start: --starts-in, or for a raffle --entries-close-in (its entries close at
    the start, where the draw runs). Refused before anything is written."""
    close_in, starts_in = opts["entries_close_in"], opts["starts_in"]
    if close_in is None:
        return 60 if starts_in is None else int(starts_in)
    if not opts["raffle"]:
        raise CommandError("--entries-close-in is for a raffle; add --raffle (or use --starts-in).")
    if starts_in is not None:
        raise CommandError("A raffle starts when its entries close: give --entries-close-in or --starts-in.")
    if int(close_in) < 1:
        raise CommandError(f"--entries-close-in must be at least 1 second (got {close_in}).")
    return int(close_in)
