"""The waiting-room page: opening it puts the buyer in line, then it follows the line live."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from admission import api, limits, services
from core.errors import Busy, FloodgateError, NotFound
from shop import selectors as catalogue


@require_GET
@login_required
def queue(request: HttpRequest, slug: str) -> HttpResponse:
    try:
        drop = catalogue.drop_for_claim(slug=slug)
    except NotFound as error:
        raise Http404(error.detail) from None
    if not drop.waiting_room:
        return redirect(drop)
    if "prefetch" in request.headers.get("Sec-Purpose", request.headers.get("Purpose", "")):
        return HttpResponse(status=204)  # a browser guessing ahead must not put anyone in line
    try:
        # Limited like the API's join; joining is idempotent: a reload, a second tab or a
        # shared link keeps the ticket.
        limits.check_buyer(request, scope="queue")
        place = services.join(drop=drop, buyer_id=request.user.pk)
    except Busy as error:
        response = render(request, "admission/busy.html", {"drop": drop, "detail": error.detail}, status=503)
        response["Retry-After"] = str(error.retry_after)
        return response
    except FloodgateError as error:
        messages.error(request, error.detail)
        return redirect(drop)
    context = {
        "drop": drop,
        "place": place,
        "snapshot": place.snapshot,
        "data": place.as_json(),
        "idempotency_key": uuid.uuid4().hex,  # one per page view: a double click returns the same hold
        "quantities": range(1, drop.per_buyer_limit + 1),
    }
    response = render(request, "admission/queue.html", context)
    # The page's polls (GET /api/drops/<slug>/queue) carry this cookie: the edge answers them.
    api.remember(response, slug=drop.slug, ticket=api.queue_ticket(request, place))
    return response
