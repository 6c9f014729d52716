"""Ops API: the invariant for staff, the kill switch for holders of shop.pause_drop."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from catalogue import selectors
from core.api import api, json_body
from core.errors import Forbidden, InvalidInput
from holds.counts import invariant
from ops import switch


def _require(request: HttpRequest, permission: str | None) -> None:
    user = request.user
    if not user.is_staff:
        raise Forbidden("Staff only.")
    if permission and not user.has_perm(permission):
        raise Forbidden("You need the permission to pause drops (group On-call).")


@api({"GET"}, login=True)
def drop_invariant(request: HttpRequest, slug: str) -> JsonResponse:
    _require(request, None)
    drop = selectors.drop_for_claim(slug=slug)  # staff see a rehearsal's copy too
    return JsonResponse(invariant(drop_id=drop.pk).as_json())


@api({"POST"}, login=True)
def pause(request: HttpRequest, slug: str) -> JsonResponse:
    _require(request, "shop.pause_drop")
    drop = selectors.drop_for_claim(slug=slug)  # staff see a rehearsal's copy too
    reason = json_body(request).get("reason")
    if not isinstance(reason, str):
        raise InvalidInput('Send {"reason": "why the sale is paused"}.')
    result = switch.pause_drop(drop=drop, actor_id=request.user.pk, reason=reason)
    # drained false: claims that began before the pause were still running when it returned.
    return JsonResponse({"state": result.state, "changed": result.changed, "drained": result.drained})


@api({"POST"}, login=True)
def resume(request: HttpRequest, slug: str) -> JsonResponse:
    _require(request, "shop.pause_drop")
    drop = selectors.drop_for_claim(slug=slug)  # staff see a rehearsal's copy too
    reason = json_body(request).get("reason", "")
    result = switch.resume_drop(
        drop=drop, actor_id=request.user.pk, reason=reason if isinstance(reason, str) else ""
    )
    return JsonResponse({"state": result.state, "changed": result.changed})
