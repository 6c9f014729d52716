"""Make discount codes: `manage.py discount_codes (SLUG | --all-drops) --count N (--percent P |
--amount-minor A [--currency C]) [--uses K] [--starts ISO] [--ends ISO]`, one code a line."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_datetime

from core.errors import InvalidInput
from holds import discounts
from shop.models import Drop


def _moment(value: str | None, flag: str) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = parse_datetime(value)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise CommandError(f"{flag} takes an ISO 8601 time with its offset, e.g. 2026-12-24T10:00:00+00:00")
    return parsed


class Command(BaseCommand):
    help = "Make N new discount codes for a drop (or every drop) and print them, one a line."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", nargs="?", help="the drop the codes are for (or --all-drops)")
        parser.add_argument("--all-drops", action="store_true", help="codes valid for every drop of the shop")
        parser.add_argument(
            "--count", type=int, required=True, help=f"codes to make (1 to {discounts.GENERATE_MAX})"
        )
        off = parser.add_mutually_exclusive_group(required=True)
        off.add_argument("--percent", type=int, help="percent off the line (1 to 99)")
        off.add_argument("--amount-minor", type=int, help="amount off the line, in minor units (500 = 5.00)")
        parser.add_argument("--currency", default="", help="with --all-drops and --amount-minor: e.g. EUR")
        parser.add_argument("--uses", type=int, default=1, help="holds each code discounts (default 1)")
        parser.add_argument("--starts", help="valid from (ISO 8601 with offset); default: now")
        parser.add_argument("--ends", help="valid until (ISO 8601 with offset); default: no end")

    def handle(self, *args: object, **opts: Any) -> None:  # argparse's values
        slug, everywhere = opts["slug"], bool(opts["all_drops"])
        if (slug is None) == (not everywhere):
            raise CommandError("name a drop's SLUG, or --all-drops for codes valid in every drop (not both)")
        drop = None
        if slug is not None:
            drop = Drop.objects.select_related("product").filter(slug=str(slug)).first()
            if drop is None:
                raise CommandError(f"no drop called {slug!r}")
        terms = discounts.Terms(
            percent=opts["percent"],
            amount_minor=opts["amount_minor"],
            max_uses=int(opts["uses"]),
            starts_at=_moment(opts["starts"], "--starts"),
            ends_at=_moment(opts["ends"], "--ends"),
        )
        try:
            made = discounts.generate_codes(
                drop=drop, count=int(opts["count"]), terms=terms, currency=str(opts["currency"]).upper()
            )
        except InvalidInput as error:
            raise CommandError(f"no codes made: {error.detail}") from None
        for code in made:
            self.stdout.write(code.code)
