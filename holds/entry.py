"""The reserve sequence through Django: the drop page's buy button and the API with a session.

The API with a bearer token takes the claim lane (holds/lane.py), the same checks before Django.

Cheapest refusals first: the drop (one cached row: paused, not started, ended), admission (a
signature, no query),
the rate limit (one Redis call); then the claim; a database "sold out" is published so
the edge answers the next buyers without Django.
"""

from __future__ import annotations

from dataclasses import dataclass

from admission import limits
from admission import services as admission
from admission import state as snapshots
from core.errors import InvalidInput, SoldOut
from core.text import storable
from holds import services
from holds.services import Reservation
from inventory.gate import GateSoldOut
from shop import selectors as catalogue
from shop.models import Drop


@dataclass(frozen=True)
class ReserveRequest:
    slug: str
    buyer_id: int
    client_ip: str
    quantity: object
    idempotency_key: str | None
    unit: object = None
    admission_token: str | None = None


def reserve(request: ReserveRequest) -> Reservation:
    """Hold units for the buyer, or raise the refusal (FloodgateError) they should hear.

    The steps, in this order, are the lane's too (holds/lane.py awaits the same ones).
    """
    drop = catalogue.drop_for_claim(slug=request.slug)
    check_open_and_admitted(drop, buyer_id=request.buyer_id, token=request.admission_token)
    limits.check(scope="reserve", ip=request.client_ip, buyer_id=request.buyer_id)
    unit = unit_of(request.unit)
    try:
        return services.reserve(
            drop=drop,
            buyer_id=request.buyer_id,
            quantity=request.quantity,
            idempotency_key=request.idempotency_key,
            unit=unit,
        )
    except GateSoldOut:
        raise  # the gate's count said so, not the database; the tick publishes within a second
    except SoldOut:
        snapshots.note_sold_out(drop)  # the edge answers the next ones
        raise


def check_open_and_admitted(drop: Drop, *, buyer_id: int, token: str | None) -> None:
    """The first refusals of both doors, from the drop row and a signature: paused, not started or
    ended first (before the start nobody is admitted, so a buyer in line hears when it opens, 425),
    then the waiting room's admission."""
    services.refuse_if_closed(drop)
    admission.check_admitted(drop=drop, buyer_id=buyer_id, token=token)


UNIT_LABEL_MAX = 40  # inventory.models.Unit.label


def unit_of(unit: object) -> str | None:
    """The chosen unit's label from a request body (the page's form, the API, the lane).

    A label is a short string PostgreSQL can compare: NUL or a lone surrogate would fail
    in the claim statement (a 500), so they are refused here, before anything is written.
    """
    if unit is not None and (not isinstance(unit, str) or len(unit) > UNIT_LABEL_MAX or not storable(unit)):
        raise InvalidInput("unit must be a unit label such as 'B14'.")
    return unit
