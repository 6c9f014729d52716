"""Hold reads for buyers."""

from __future__ import annotations

from holds.models import Hold
from holds.services import effective_state
from shop.errors import NotFound


def hold_of_buyer(*, hold_id: object, buyer_id: int) -> Hold:
    """The buyer's own hold; another buyer's hold is indistinguishable from none."""
    try:
        pk = int(str(hold_id))
    except ValueError:
        raise NotFound("There is no such hold.") from None
    hold = Hold.objects.select_related("drop__product").filter(pk=pk, buyer_id=buyer_id).first()
    if hold is None:
        raise NotFound("There is no such hold among yours.")
    return hold


def hold_json(hold: Hold) -> dict[str, object]:
    return {
        "id": hold.pk,
        "drop": hold.drop.slug,
        "state": effective_state(hold),
        "quantity": hold.quantity,
        "expires_at": hold.expires_at.isoformat(),
        "extended": hold.extended,
        "units": sorted(hold.units.values_list("label", flat=True)),
        "order": _order_of(hold),
    }


def export_rows(*, drop_ids: list[int]) -> list[list[object]]:
    """One row per hold of the drops, for the merchant's CSV export."""
    rows = []
    holds = (
        Hold.objects.filter(drop_id__in=list(drop_ids))
        .select_related("drop", "buyer")
        .prefetch_related("units")
        .order_by("drop_id", "created_at")
    )
    for hold in holds:
        units = " ".join(sorted(u.label for u in hold.units.all()))
        rows.append(
            [
                hold.drop.slug,
                hold.pk,
                hold.buyer.get_username(),
                hold.quantity,
                units,
                hold.state,
                hold.created_at.isoformat(),
                hold.ended_at.isoformat() if hold.ended_at else "",
            ]
        )
    return rows


def _order_of(hold: Hold) -> dict[str, object] | None:
    order = getattr(hold, "order", None)  # reverse one-to-one: absent until payment starts
    return {"id": order.pk, "state": order.state} if order is not None else None
