"""Fulfilment: a paid order handed to a carrier, its tracking number, and the buyer told once.

Only a confirmed order with a shipping address can ship, decided under the order's row lock, so a
refund or cancel racing the marking is never shipped over. Its e-mail goes through the outbox in
the same transaction, keyed by the tracking number: marking it again with the same number sends
nothing, a corrected number sends the correction. A merchant ships many at once from a CSV of
order numbers and tracking numbers; a bad row is reported by its line and changes nothing.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import F
from django.db.models.functions import Coalesce, Now
from django.utils.translation import gettext_lazy as _

from checkout import outbox
from checkout.carriers import CARRIERS
from checkout.models import Order, OrderState
from core import formatting
from core.errors import FloodgateError, InvalidInput, NotFound, fill
from core.spreadsheets import spreadsheet_safe
from core.text import storable

MAX_UPLOAD_BYTES = 2 * 1024 * 1024  # ~50,000 rows: more than a drop sells
TRACKING_NUMBER = re.compile(r"[A-Z0-9][A-Z0-9-]{3,39}")


class CannotShip(FloodgateError):
    code, status = "cannot_ship", 409


def clean_tracking_number(raw: str) -> str:
    """The number as carriers print it, spaces and case aside; InvalidInput when it cannot be one."""
    number = "".join(raw.split()).upper() if storable(raw) else ""
    if not TRACKING_NUMBER.fullmatch(number):
        raise InvalidInput(
            _("A tracking number is 4 to 40 letters, digits or dashes, as the carrier printed it.")
        )
    return number


def clean_carrier(raw: str) -> str:
    code = raw.strip().lower().replace(" ", "_")
    if code not in CARRIERS:
        raise InvalidInput(fill(_("The carrier is one of: %(codes)s."), codes=", ".join(CARRIERS)))
    return code


def mark_shipped(*, order_id: int, carrier: str, tracking_number: str) -> str:
    """Record the shipment and tell the buyer: "shipped", "corrected" (a new number, told again) or
    "unchanged" (the same again: nothing sent). CannotShip / NotFound / InvalidInput change nothing."""
    carrier, number = clean_carrier(carrier), clean_tracking_number(tracking_number)
    with transaction.atomic():
        # The row lock orders this after a refund or cancel of the same order, and them after it.
        order = (
            Order.objects.select_for_update(of=("self",)).select_related("drop").filter(pk=order_id).first()
        )
        if order is None:
            raise NotFound(fill(_("There is no order %(number)s."), number=order_id))
        if (order.carrier, order.tracking_number) == (carrier, number):
            return "unchanged"
        if order.shipping_address_id is None:
            raise CannotShip(fill(_("Order %(number)s has no shipping address."), number=order_id))
        if order.state != OrderState.CONFIRMED:
            raise CannotShip(
                fill(
                    _("Order %(number)s is %(state)s: only a confirmed order ships."),
                    number=order_id,
                    state=order.get_state_display(),
                )
            )
        was_shipped = order.shipped_at is not None
        Order.objects.filter(pk=order.pk).update(
            carrier=carrier,
            tracking_number=number,
            shipped_at=Coalesce(F("shipped_at"), Now()),  # a correction keeps the day it left
            updated_at=Now(),
        )
        order.refresh_from_db()
        outbox.announce_shipment(order)
    return "corrected" if was_shipped else "shipped"


@dataclass
class Upload:
    """What a tracking upload did: the orders marked per line, the lines refused and why."""

    shipped: list[int] = field(default_factory=list)
    unchanged: list[int] = field(default_factory=list)
    refused: list[tuple[int, str]] = field(default_factory=list)


def ship_from_csv(data: bytes) -> Upload:
    """Apply a CSV of `order,carrier,tracking_number` (a header line first), row by row: each good
    row is its own transaction, a bad one is reported with its line number and changes nothing."""
    if len(data) > MAX_UPLOAD_BYTES:
        raise InvalidInput(_("The file is larger than 2 MB; split it."))
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InvalidInput(
            _("The file is not UTF-8 text; save it from the spreadsheet as CSV UTF-8.")
        ) from None
    rows = csv.reader(io.StringIO(text, newline=""))
    header = [cell.strip().lower() for cell in next(rows, [])]
    if header[:3] != ["order", "carrier", "tracking_number"]:
        raise InvalidInput(_('The first line must be the header "order,carrier,tracking_number".'))
    done = Upload()
    for row in rows:
        line = rows.line_num
        if not any(cell.strip() for cell in row):
            continue  # a blank line a spreadsheet left
        if len(row) < 3:
            done.refused.append((line, str(_("a row needs an order, a carrier and a tracking number"))))
            continue
        number = row[0].strip().lstrip("#")
        if not (number.isascii() and number.isdigit() and len(number) < 19):
            done.refused.append((line, str(fill(_("%(value)r is not an order number"), value=row[0][:40]))))
            continue
        try:
            result = mark_shipped(order_id=int(number), carrier=row[1], tracking_number=row[2])
        except FloodgateError as error:
            done.refused.append((line, str(error.detail)))
            continue
        (done.unchanged if result == "unchanged" else done.shipped).append(int(number))
    return done


SHIPPING_LIST_HEADER = [
    "order",
    "name",
    "address_line1",
    "address_line2",
    "postal_code",
    "city",
    "region",
    "country",
    "phone",
    "email",
    "item",
    "variant",
    "quantity",
    # the shipping fee the buyer paid (a carrier's import ignores it; the merchant's books read it)
    "shipping_fee",
    "shipping_tax",
    "currency",
]


def shipping_list(orders: Iterable[Order]) -> str:
    """A carrier-ready CSV of the confirmed, unshipped orders among these: the address in its own
    columns (as carriers' bulk imports take it), each cell safe to open in a spreadsheet."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(SHIPPING_LIST_HEADER)
    for order in orders:
        address = order.shipping_address
        if order.state != OrderState.CONFIRMED or order.shipped_at or address is None:
            continue
        variant = order.hold.variant
        row = [
            order.pk,
            address.name,
            address.line1,
            address.line2,
            address.postal_code,
            address.city,
            address.region,
            address.country,
            address.phone,
            order.buyer.email,
            order.drop.display_title,
            variant.name if variant is not None else "",
            order.quantity - order.refunded_quantity,
            formatting.plain_amount(order.shipping_minor, order.currency),
            formatting.plain_amount(order.shipping_tax_minor, order.currency),
            order.currency,
        ]
        writer.writerow([spreadsheet_safe(cell) for cell in row])
    return out.getvalue()
