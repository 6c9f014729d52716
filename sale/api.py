"""JSON API for holds: reserve, look, release, more time, another variant, the shipping address."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from ninja import Router

from core import clients
from core.api import Header, Id, json_body, operation, signed_in
from holds import selectors, services
from holds.answers import Hold, ReserveBody, VariantBody
from sale import addresses, entry
from shop.addresses import address_json
from shop.answers import AddressBody, ShippingAddress

router = Router()
NOT_YOURS = "Not yours or none"


@operation(
    router,
    "POST",
    "/drops/{slug:slug}/holds",
    "Reserve units: they are yours until expires_at",
    {
        201: ("Reserved", Hold),
        200: ("The same Idempotency-Key again: the hold it made", Hold),
        400: "invalid_idempotency_key: missing or malformed Idempotency-Key",
        403: "not_admitted (waiting-room drops), invalid_code (no such presale code for this drop, "
        "or not a code), or csrf_failed",
        404: "No such drop",
        409: "sold_out (with remaining), unit_taken, hold_exists (with hold), code_used (the "
        "presale code has admitted all the claims it may), or discount_code_used",
        410: "ended, or discount_code_expired",
        422: "invalid_quantity, limit_reached, invalid (body, unit), idempotency_key_reused "
        "(the key was used for another quantity, unit or discount code), invalid_discount_code "
        "or discount_code_not_for_drop (nothing is held)",
        423: "paused",
        425: "not_started (in a presale window: no presale code, and the account is not on the "
        "list), or discount_code_not_started",
        429: "rate_limited; see Retry-After",
        503: "busy: the database, Redis or this process' claim slots; see Retry-After",
    },
    login=True,
    body=ReserveBody,
    headers=(
        Header("Idempotency-Key", {"type": "string", "minLength": 1, "maxLength": 64}, required=True),
        Header("X-Admission-Token", {"type": "string"}),
    ),
    url_name="api-reserve",
)
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


@operation(
    router,
    "GET",
    "/holds/{id}",
    "One of your holds",
    {200: ("The hold", Hold), 404: NOT_YOURS},
    login=True,
    url_name="api-hold",
)
def hold(request: HttpRequest, id: Id) -> JsonResponse:
    return JsonResponse(selectors.hold_json(selectors.hold_of_buyer(hold_id=id, buyer_id=signed_in(request))))


@operation(
    router,
    "DELETE",
    "/holds/{id}",
    "Release a hold; its units go back to stock once",
    {200: ("The hold after release", Hold), 404: NOT_YOURS},
    login=True,
    url_name="api-hold",
)
def release(request: HttpRequest, id: Id) -> JsonResponse:
    found = selectors.hold_of_buyer(hold_id=id, buyer_id=signed_in(request))
    services.release(hold_id=found.pk, buyer_id=signed_in(request))
    found.refresh_from_db()
    return JsonResponse(selectors.hold_json(found))


@operation(
    router,
    "POST",
    "/holds/{id}/more-time",
    "I need more time: half the hold's first window more, at most twice, before its payment starts",
    {
        200: ("The hold, with its later expires_at", Hold),
        403: "csrf_failed",
        404: NOT_YOURS,
        409: "more_time_used: it had all it may; hold_not_active: ended, or its payment started",
    },
    login=True,
    url_name="api-hold-more-time",
)
def more_time(request: HttpRequest, id: Id) -> JsonResponse:
    """ "I need more time": 200 with the hold and its later expires_at."""
    found = selectors.hold_of_buyer(hold_id=id, buyer_id=signed_in(request))
    return JsonResponse(selectors.hold_json(services.more_time(hold=found, buyer_id=signed_in(request))))


@operation(
    router,
    "PUT",
    "/holds/{id}/variant",
    "Change a held hold to another variant (size) before its payment starts: its units given back "
    "and as many of the new one taken at once; the time left is unchanged",
    {
        200: ("The hold, of the new variant", Hold),
        404: NOT_YOURS,
        409: "variant_sold_out / sold_out: too few of it (the hold is unchanged); "
        "hold_not_active: ended, or its payment has started",
        410: "ended",
        422: "invalid_variant: no such variant (variants lists them)",
        423: "paused",
        503: "busy: the units left are being claimed, or the line is mid-wave; see Retry-After",
    },
    login=True,
    body=VariantBody,
    url_name="api-hold-variant",
)
def variant(request: HttpRequest, id: Id) -> JsonResponse:
    """Another variant (size) for a held hold: 200 with the hold as it now is."""
    found = selectors.hold_of_buyer(hold_id=id, buyer_id=signed_in(request))
    changed = services.change_variant(
        hold=found, buyer_id=signed_in(request), name=json_body(request).get("variant")
    )
    return JsonResponse(selectors.hold_json(changed))


@operation(
    router,
    "PUT",
    "/holds/{id}/address",
    "Give the shipping address of a held hold whose product ships (kept for your next drop too)",
    {
        200: ("The address as kept", ShippingAddress),
        400: "invalid_address, with fields: what is wrong, field by field; not_shipped_there: "
        "a country outside the product's shipping zones (the detail names those it ships to)",
        404: NOT_YOURS,
        409: "hold_not_active: expired or released; no_shipping: the product needs no address; "
        "address_changes_price: payment has started and this address's zone charges another fee",
    },
    login=True,
    body=AddressBody,
    url_name="api-hold-address",
)
def address(request: HttpRequest, id: Id) -> JsonResponse:
    """The shipping address of a hold whose product ships: 200 with it as kept."""
    kept = addresses.give_address(hold_id=id, buyer_id=signed_in(request), data=json_body(request))
    return JsonResponse(address_json(kept))
