"""Ops API: the invariant for staff who may watch the sale (ops.access), the kill switch for
holders of shop.pause_drop, refunds for holders of checkout.refund_order."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from catalogue import selectors
from checkout import refunds
from checkout import selectors as orders
from core.api import api, json_body
from core.errors import Forbidden, InvalidInput
from holds.counts import invariant, invariant_by_variant
from ops import access, switch
from ops.answers import Paused, Resumed


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


@api({"GET"}, login=True)
def drop_invariant(request: HttpRequest, slug: str) -> JsonResponse:
    _require(request, None)
    drop = selectors.drop_for_claim(slug=slug)  # staff see a rehearsal's copy too
    numbers = invariant(drop_id=drop.pk).answer(variants=invariant_by_variant(drop_id=drop.pk))
    return JsonResponse(numbers.dump())


@api({"POST"}, login=True)
def pause(request: HttpRequest, slug: str) -> JsonResponse:
    _require(request, "shop.pause_drop")
    drop = selectors.drop_for_claim(slug=slug)  # staff see a rehearsal's copy too
    reason = json_body(request).get("reason")
    if not isinstance(reason, str):
        raise InvalidInput('Send {"reason": "why the sale is paused"}.')
    result = switch.pause_drop(drop=drop, actor_id=request.user.pk, reason=reason)
    # drained false: claims that began before the pause were still running when it returned.
    return JsonResponse(Paused(state=result.state, changed=result.changed, drained=result.drained).dump())


@api({"POST"}, login=True)
def resume(request: HttpRequest, slug: str) -> JsonResponse:
    _require(request, "shop.pause_drop")
    drop = selectors.drop_for_claim(slug=slug)  # staff see a rehearsal's copy too
    reason = json_body(request).get("reason", "")
    result = switch.resume_drop(
        drop=drop, actor_id=request.user.pk, reason=reason if isinstance(reason, str) else ""
    )
    return JsonResponse(Resumed(state=result.state, changed=result.changed).dump())


@api({"POST"}, login=True)
def refund(request: HttpRequest, order_id: str) -> JsonResponse:
    """Refund an order, whole or some units: 201 with the refund as the provider answered it (its
    state `requested` if the provider did not answer yet: a task keeps trying); 200 for the same
    Idempotency-Key again."""
    _require(request, "checkout.refund_order")
    body = json_body(request)
    unknown = set(body) - {"quantity", "amount_minor", "restock", "reason"}
    if unknown:
        raise InvalidInput(f"Unknown fields: {', '.join(sorted(unknown))}.")
    asked = refunds.request_refund(
        order_id=int(order_id) if order_id.isascii() and order_id.isdigit() and len(order_id) < 19 else 0,
        quantity=body.get("quantity"),
        amount_minor=body.get("amount_minor"),
        restock=body.get("restock", False),
        reason=body.get("reason", ""),
        by=request.user.pk,
        request_key=request.headers.get("Idempotency-Key", ""),
    )
    found = refunds.send_now_or_later(asked.refund) if asked.created else asked.refund
    return JsonResponse(orders.refund_json(found), status=201 if asked.created else 200)
