"""JSON API of the catalogue: the drops, a drop, and who the caller is."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from catalogue import answers, selectors
from core.api import api


@api({"GET", "HEAD"})
def drop_list(request: HttpRequest) -> JsonResponse:
    return JsonResponse(selectors.catalogue().dump())


@api({"GET", "HEAD"})
def drop_detail(request: HttpRequest, slug: str) -> JsonResponse:
    buyer_id = request.user.pk if request.user.is_authenticated else None
    return JsonResponse(selectors.drop_view(slug=slug, buyer_id=buyer_id).as_json())


@api({"GET"}, login=True)
def me(request: HttpRequest) -> JsonResponse:
    return JsonResponse(answers.Me(username=request.user.get_username()).dump())
