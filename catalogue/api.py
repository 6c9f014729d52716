"""JSON API of the catalogue: the drops, a drop, and who the caller is."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from ninja import Router

from catalogue import answers, selectors
from core.api import operation

router = Router()


@operation(
    router,
    "GET",
    "/me",
    "Who the credentials belong to",
    {200: ("The user", answers.Me)},
    login=True,
    url_name="api-me",
)
def me(request: HttpRequest) -> JsonResponse:
    return JsonResponse(answers.Me(username=request.user.get_username()).dump())


@operation(
    router,
    "GET",
    "/drops",
    "Every drop: live, upcoming, sold out, then ended (most recent first); HEAD too",
    {200: ("The drops", answers.DropList)},
    url_name="api-drops",
)
def drop_list(request: HttpRequest) -> JsonResponse:
    return JsonResponse(selectors.catalogue().dump())


@operation(
    router,
    "GET",
    "/drops/{slug:slug}",
    "A drop and how much of it is left (HEAD too)",
    {200: ("The drop", answers.Drop), 404: "No such drop"},
    url_name="api-drop",
)
def drop_detail(request: HttpRequest, slug: str) -> JsonResponse:
    buyer_id = request.user.pk if request.user.is_authenticated else None
    return JsonResponse(selectors.drop_view(slug=slug, buyer_id=buyer_id).as_json())
