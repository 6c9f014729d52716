"""JSON API for holds: reserve, look, release."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from core import clients
from core.api import api, json_body, signed_in
from holds import selectors, services
from sale import addresses, entry
from shop.addresses import address_json


@api({"POST"}, login=True)
def reserve(request: HttpRequest, slug: str) -> JsonResponse:
    body = json_body(request)
    result = entry.reserve_through_django(
        entry.ReserveRequest(
            slug=slug,
            buyer_id=signed_in(request),
            client_ip=clients.client_ip(request),
            quantity=body.get("quantity"),
            idempotency_key=request.headers.get("Idempotency-Key"),
            unit=body.get("unit"),
            admission_token=request.headers.get("X-Admission-Token"),
            variant=body.get("variant"),
            presale_code=body.get("presale_code"),
            discount_code=body.get("discount_code"),
        )
    )
    body = selectors.hold_json(result.hold, units=result.units, new=result.created)
    return JsonResponse(body, status=201 if result.created else 200)


@api({"GET", "DELETE"}, login=True)
def hold(request: HttpRequest, hold_id: str) -> JsonResponse:
    found = selectors.hold_of_buyer(hold_id=hold_id, buyer_id=signed_in(request))
    if request.method == "DELETE":
        services.release(hold_id=found.pk, buyer_id=signed_in(request))
        found.refresh_from_db()
    return JsonResponse(selectors.hold_json(found))


@api({"POST"}, login=True)
def more_time(request: HttpRequest, hold_id: str) -> JsonResponse:
    """ "I need more time": 200 with the hold and its later expires_at."""
    found = selectors.hold_of_buyer(hold_id=hold_id, buyer_id=signed_in(request))
    return JsonResponse(selectors.hold_json(services.more_time(hold=found, buyer_id=signed_in(request))))


@api({"PUT"}, login=True)
def variant(request: HttpRequest, hold_id: str) -> JsonResponse:
    """Another variant (size) for a held hold: 200 with the hold as it now is."""
    found = selectors.hold_of_buyer(hold_id=hold_id, buyer_id=signed_in(request))
    changed = services.change_variant(
        hold=found, buyer_id=signed_in(request), name=json_body(request).get("variant")
    )
    return JsonResponse(selectors.hold_json(changed))


@api({"PUT"}, login=True)
def address(request: HttpRequest, hold_id: str) -> JsonResponse:
    """The shipping address of a hold whose product ships: 200 with it as kept."""
    kept = addresses.give_address(hold_id=hold_id, buyer_id=signed_in(request), data=json_body(request))
    return JsonResponse(address_json(kept))
