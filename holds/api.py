"""JSON API for holds: reserve, look, release."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from admission import limits
from admission import services as admission
from admission import state as snapshots
from admission.gate import GateSoldOut
from core.api import api, json_body
from core.errors import InvalidInput, SoldOut
from holds import selectors, services
from shop import selectors as catalogue


@api({"POST"}, login=True)
def reserve(request: HttpRequest, slug: str) -> JsonResponse:
    drop = catalogue.drop_for_claim(slug=slug)
    token = request.headers.get("X-Admission-Token")
    admission.check_admitted(drop=drop, buyer_id=request.user.pk, token=token)
    limits.check_buyer(request, scope="reserve")
    body = json_body(request)
    unit = body.get("unit")
    if unit is not None and not isinstance(unit, str):
        raise InvalidInput("unit must be a unit label such as 'B14'.")
    try:
        result = services.reserve(
            drop=drop,
            buyer_id=request.user.pk,
            quantity=body.get("quantity"),
            idempotency_key=request.headers.get("Idempotency-Key"),
            unit=unit,
        )
    except GateSoldOut:
        raise  # the gate's count said so, not the database; the tick publishes within a second
    except SoldOut:
        snapshots.note_sold_out(drop)  # the edge answers the next ones
        raise
    body = selectors.hold_json(result.hold, units=result.units, new=result.created)
    return JsonResponse(body, status=201 if result.created else 200)


@api({"GET", "DELETE"}, login=True)
def hold(request: HttpRequest, hold_id: str) -> JsonResponse:
    found = selectors.hold_of_buyer(hold_id=hold_id, buyer_id=request.user.pk)
    if request.method == "DELETE":
        services.release(hold_id=found.pk, buyer_id=request.user.pk)
        found.refresh_from_db()
    return JsonResponse(selectors.hold_json(found))
