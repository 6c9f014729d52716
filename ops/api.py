"""Ops API: the invariant for staff who may watch the sale (ops.access), the kill switch for
holders of shop.pause_drop, refunds for holders of checkout.refund_order."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from ninja import Router

from catalogue import selectors
from checkout import refunds
from checkout import selectors as orders
from checkout.answers import Refund, RefundBody
from core.api import Header, Id, json_body, operation
from core.errors import Forbidden, InvalidInput
from holds.answers import Invariant
from holds.counts import invariant, invariant_by_variant
from ops import access, switch
from ops.answers import PauseBody, Paused, Resumed

router = Router()


def _require(request: HttpRequest, permission: str | None) -> None:
    """Staff holding `permission`; None: staff who may watch the sale (ops.access)."""
    user = request.user
    if not user.is_staff:
        raise Forbidden("Staff only.")
    if permission is None and not access.may_watch(user):
        raise Forbidden("You need the permission to view drops (group Merchants or On-call).")
    if permission and not user.has_perm(permission):
        raise Forbidden(PERMISSION_WORDS.get(permission, f"You need the permission {permission}."))


PERMISSION_WORDS = {
    "shop.pause_drop": "You need the permission to pause drops (group On-call).",
    "checkout.refund_order": "You need the permission to refund orders (Can refund orders).",
}


@operation(
    router,
    "GET",
    "/ops/drops/{slug:slug}/invariant",
    "available + held + sold + refunded + exchange = quantity, from one snapshot (staff)",
    {200: ("The numbers", Invariant), 403: "Staff only", 404: "No such drop"},
    login=True,
    url_name="api-ops-invariant",
)
def drop_invariant(request: HttpRequest, slug: str) -> JsonResponse:
    _require(request, None)
    drop = selectors.drop_for_claim(slug=slug)  # staff see a rehearsal's copy too
    numbers = invariant(drop_id=drop.pk).answer(variants=invariant_by_variant(drop_id=drop.pk))
    return JsonResponse(numbers.dump())


@operation(
    router,
    "POST",
    "/ops/drops/{slug:slug}/pause",
    "Kill switch: no claim succeeds after this returns (needs shop.pause_drop)",
    {
        200: ("drained false: claims begun before the pause were still running when it returned", Paused),
        403: "Needs shop.pause_drop, or csrf_failed",
        404: "No such drop",
        422: "invalid: no reason, or one too long",
    },
    login=True,
    body=PauseBody,
    url_name="api-ops-pause",
)
def pause(request: HttpRequest, slug: str) -> JsonResponse:
    _require(request, "shop.pause_drop")
    drop = selectors.drop_for_claim(slug=slug)  # staff see a rehearsal's copy too
    reason = json_body(request).get("reason")
    if not isinstance(reason, str):
        raise InvalidInput('Send {"reason": "why the sale is paused"}.')
    result = switch.pause_drop(drop=drop, actor_id=request.user.pk, reason=reason)
    # drained false: claims that began before the pause were still running when it returned.
    return JsonResponse(Paused(state=result.state, changed=result.changed, drained=result.drained).dump())


@operation(
    router,
    "POST",
    "/ops/drops/{slug:slug}/resume",
    "Resume a paused drop (needs shop.pause_drop); the body and its reason are optional",
    {
        200: ("The drop's state", Resumed),
        403: "Needs shop.pause_drop, or csrf_failed",
        404: "No such drop",
        422: "invalid: the body is not a JSON object",
    },
    login=True,
    url_name="api-ops-resume",
)
def resume(request: HttpRequest, slug: str) -> JsonResponse:
    _require(request, "shop.pause_drop")
    drop = selectors.drop_for_claim(slug=slug)  # staff see a rehearsal's copy too
    reason = json_body(request).get("reason", "")
    result = switch.resume_drop(
        drop=drop, actor_id=request.user.pk, reason=reason if isinstance(reason, str) else ""
    )
    return JsonResponse(Resumed(state=result.state, changed=result.changed).dump())


@operation(
    router,
    "POST",
    "/ops/orders/{id}/refund",
    "Refund an order, whole or some units, optionally back on sale (needs checkout.refund_order)",
    {
        201: ("The refund, as the provider answered it", Refund),
        200: ("The same Idempotency-Key again: the refund it made", Refund),
        403: "Needs checkout.refund_order, or csrf_failed",
        404: "No such order",
        409: "not_refundable (not paid, refunded already) or capture_pending (try again shortly)",
        422: "invalid (quantity, amount_minor, restock, reason), or idempotency_key_reused",
    },
    login=True,
    body=RefundBody,
    headers=(Header("Idempotency-Key", {"type": "string", "minLength": 1, "maxLength": 64}),),
    url_name="api-ops-refund",
)
def refund(request: HttpRequest, id: Id) -> JsonResponse:
    """Refund an order, whole or some units: 201 with the refund as the provider answered it (its
    state `requested` if the provider did not answer yet: a task keeps trying); 200 for the same
    Idempotency-Key again."""
    _require(request, "checkout.refund_order")
    body = json_body(request)
    unknown = set(body) - {"quantity", "amount_minor", "restock", "reason"}
    if unknown:
        raise InvalidInput(f"Unknown fields: {', '.join(sorted(unknown))}.")
    asked = refunds.request_refund(
        order_id=int(id) if id.isascii() and id.isdigit() and len(id) < 19 else 0,
        quantity=body.get("quantity"),
        amount_minor=body.get("amount_minor"),
        restock=body.get("restock", False),
        reason=body.get("reason", ""),
        by=request.user.pk,
        request_key=request.headers.get("Idempotency-Key", ""),
    )
    found = refunds.send_now_or_later(asked.refund) if asked.created else asked.refund
    return JsonResponse(orders.refund_json(found), status=201 if asked.created else 200)
