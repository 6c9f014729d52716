"""What the sale's tests share: a line of buyers drawn before the start, and the offer a ticket holds."""

from __future__ import annotations

from admission import services as line
from admission.models import Ticket
from shop.models import Drop


def in_line(drop_id: int, buyers: list[int]) -> dict[int, int]:
    """Every buyer joins before the draw; the draw numbers them. {number: buyer}."""
    drop = current(drop_id)
    for buyer in buyers:
        line.join(drop=drop, buyer_id=buyer)
    line.run_wave(drop, force=True)
    return dict(Ticket.objects.filter(drop_id=drop_id).values_list("number", "buyer_id"))


def current(drop_id: int) -> Drop:
    """The drop as a request reads it (each claim sees its current settings)."""
    return Drop.objects.select_related("product").get(pk=drop_id)


def offer_of(drop_id: int, number: int) -> line.Offer | None:
    return line.offer_of(Ticket.objects.get(drop_id=drop_id, number=number))
