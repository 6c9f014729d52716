"""JSON API of the waiting room: join, look at your place, check the draw."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from admission import limits, services
from core.api import api
from shop import selectors as catalogue


@api({"GET", "POST"}, login=True)
def queue(request: HttpRequest, slug: str) -> JsonResponse:
    if request.method == "POST":
        limits.check_buyer(request, scope="queue")  # before the drop is looked up
    drop = catalogue.drop_for_claim(slug=slug)
    if request.method == "POST":
        place = services.join(drop=drop, buyer_id=request.user.pk)
    else:
        place = services.place(drop=drop, buyer_id=request.user.pk)
    return JsonResponse(place.as_json())


@api({"GET"})
def draw(request: HttpRequest, slug: str) -> JsonResponse:
    return JsonResponse(services.draw_entries(drop=catalogue.drop_for_claim(slug=slug)))
