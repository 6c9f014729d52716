"""The reserve sequence, written once for both doors into it.

`steps` is the sequence: the cheapest refusals first (the drop row: paused, not started or
ended; admission: a signature, no query), the rate limit (one Redis call), the request's own
checks (unit, key, quantity), then the claim. It only says what to do next; a door does it:
`reserve` here on Django's own path (the drop page's form, and what the lane leaves to Django:
a drop with a Redis gate, another Authorization scheme), and the claim lane (sale/lane.py)
with the rate limit awaited and the claim batched. A database "sold out" for everyone is
published (`sold_out_for_all`), so the edge answers the next buyers without Django.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from django.utils.translation import gettext_lazy

from admission import limits
from admission import services as admission
from admission import state as snapshots
from catalogue import selectors as catalogue
from core.errors import InvalidInput, SoldOut, VariantSoldOut
from core.text import storable
from holds import services
from holds.gate import GateSoldOut
from holds.services import Ask, Reservation
from inventory import services as stock
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
    variant: object = None  # a variant's name; None: the drop's only one
    presale_code: object = None  # spent in the drop's presale window (holds.presale)
    discount_code: object = None  # spent on the new hold (holds.discounts); refused: nothing held


@dataclass(frozen=True)
class Limit:
    """Next: take a token from the buyer's and the address's reserve buckets (admission.limits)."""

    ip: str
    buyer_id: int
    scope: str = "reserve"


@dataclass(frozen=True)
class Claim:
    """Last: claim for this checked request (a chosen unit, or None)."""

    ask: Ask
    unit: str | None


def steps(drop: Drop, request: ReserveRequest) -> Generator[Limit | Claim, None, None]:
    """The reserve sequence for one request: raises the refusal the buyer should hear, or yields
    what the door must do next, in order."""
    check_open_and_admitted(drop, buyer_id=request.buyer_id, token=request.admission_token)
    yield Limit(ip=request.client_ip, buyer_id=request.buyer_id)
    unit = unit_of(request.unit)
    named = request.variant
    if named is None and unit is not None:  # a seat of a drop in sizes is numbered in its size: "M-3"
        named = stock.numbered_variant(unit, [v.name for v in drop.variants.all()])
    variant = catalogue.variant_of(drop, named)
    key = request.idempotency_key
    ask = services.ask(
        drop=drop,
        variant=variant,
        buyer_id=request.buyer_id,
        quantity=request.quantity,
        idempotency_key=key,
        presale_code=request.presale_code,
        discount_code=request.discount_code,
    )
    yield Claim(ask, unit)


def reserve_through_django(request: ReserveRequest) -> Reservation:
    """Hold units for the buyer through Django's path, or raise the refusal (FloodgateError)."""
    drop = catalogue.drop_for_claim(slug=request.slug)
    for step in steps(drop, request):
        if isinstance(step, Limit):
            limits.check(scope=step.scope, ip=step.ip, buyer_id=step.buyer_id)
            continue
        try:
            return services.reserve(
                drop=drop,
                variant=step.ask.variant,
                buyer_id=step.ask.buyer_id,
                quantity=step.ask.quantity,
                idempotency_key=step.ask.key,
                unit=step.unit,
                presale_code=step.ask.presale_code,
                discount_code=step.ask.discount_code,
            )
        except SoldOut as error:
            if sold_out_for_all(error):
                snapshots.note_sold_out(drop)  # the edge answers the next ones
            raise
    raise AssertionError("the reserve steps end with a claim")


def sold_out_for_all(answer: object) -> bool:
    """A refusal that means nothing is left for anyone, as the database said it: worth publishing.
    Not "only 2 left" (someone asking for fewer may still get them), nor one variant gone while
    others are left, nor the Redis gate's count (the tick publishes what the database says within
    a second)."""
    if not isinstance(answer, SoldOut) or isinstance(answer, GateSoldOut | VariantSoldOut):
        return False
    return not answer.extra.get("remaining")


def check_open_and_admitted(drop: Drop, *, buyer_id: int, token: str | None) -> None:
    """The first refusals of both doors, from the drop row and a signature: paused, not started or
    ended first (before the start nobody is admitted, so a buyer in line hears when it opens, 425),
    then the waiting room's admission. The presale window lets a claim on to its transaction, which
    spends its code or finds the buyer on the list (the lane leaves those claims to Django)."""
    services.refuse_if_closed(drop, presale_ok=True)
    admission.check_admitted(drop=drop, buyer_id=buyer_id, token=token)


UNIT_LABEL_MAX = 40  # inventory.models.Unit.label


def unit_of(unit: object) -> str | None:
    """The chosen unit's label from a request body (the page's form, the API, the lane).

    A label is a short string PostgreSQL can compare: NUL or a lone surrogate would fail
    in the claim statement (a 500), so they are refused here, before anything is written.
    """
    if unit is not None and (not isinstance(unit, str) or len(unit) > UNIT_LABEL_MAX or not storable(unit)):
        raise InvalidInput(gettext_lazy("unit must be a unit label such as 'B14'."))
    return unit
