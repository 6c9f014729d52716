"""What the drop page shows a buyer: the drop, their place in line or their hold, the seats."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from admission import services as admission
from catalogue import selectors as catalogue
from catalogue.selectors import DropView, VariantView
from holds import selectors as holds
from holds.models import Hold
from inventory.selectors import Seat, seat_map
from shop.models import DropState, InventoryMode

# Up to this many units the page draws every seat to pick from; beyond it, a list of the free ones.
SEAT_GRID_MAX = 300


@dataclass(frozen=True)
class DropPage:
    view: DropView
    hold: Hold | None  # the buyer's running hold of this drop: shown instead of Reserve
    hold_units: list[str]
    in_line: bool
    admission_token: str | None
    seats: list[Seat]

    @property
    def seat_grid(self) -> bool:
        return 0 < len(self.seats) <= SEAT_GRID_MAX

    @property
    def free_seats(self) -> list[str]:
        return [seat.label for seat in self.seats if seat.free]

    @property
    def seat_groups(self) -> list[SeatGroup]:
        """A drop in sizes: its seats size by size, each with the size's price and what is left
        ([] for a drop of one size, whose seats are one group)."""
        if not self.view.choosing:
            return []
        return [
            SeatGroup(size, [seat for seat in self.seats if seat.variant == size.variant.name])
            for size in self.view.variants
        ]


@dataclass(frozen=True)
class SeatGroup:
    size: VariantView
    seats: list[Seat]

    @property
    def free(self) -> list[str]:
        return [seat.label for seat in self.seats if seat.free]


def drop_page(*, slug: str, buyer_id: int | None) -> DropPage:
    """NotFound for an unknown slug; a buyer of None is a visitor who is not logged in."""
    view = catalogue.drop_view(slug=slug, buyer_id=buyer_id)
    drop = view.drop
    hold = holds.active_hold(drop_id=drop.pk, buyer_id=buyer_id) if buyer_id is not None else None
    admission_token = None
    in_line = False
    if drop.waiting_room and view.state != DropState.ENDED and buyer_id is not None and hold is None:
        # An admitted buyer buys right here (with a fresh token); everyone else joins the line,
        # or goes back to the place they have.
        with contextlib.suppress(admission.NotInQueue):
            place = admission.place(drop=drop, buyer_id=buyer_id)
            in_line = True
            if view.state == DropState.LIVE:
                admission_token = place.token
    # The seats only for a buyer who sees the Reserve form: the crowd's other views skip the query.
    may_reserve = (
        buyer_id is not None
        and hold is None
        and view.on_sale
        and (admission_token is not None or not drop.waiting_room)
    )
    seats = seat_map(drop_id=drop.pk) if may_reserve and drop.inventory_mode == InventoryMode.UNITS else []
    return DropPage(
        view=view,
        hold=hold,
        hold_units=holds.hold_units(hold) if hold is not None else [],
        in_line=in_line,
        admission_token=admission_token,
        seats=seats,
    )
