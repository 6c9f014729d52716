"""The waiting-room page: a POST puts the buyer in line, then the page follows the line live."""

from __future__ import annotations

import random
import uuid
from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext
from django.views.decorators.http import require_http_methods

from admission import api, drawing, limits, services, state
from catalogue import selectors as catalogue
from core.api import signed_in
from core.errors import Busy, FloodgateError, NotFound, RateLimited
from shop.models import Drop, DropState


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def queue(request: HttpRequest, slug: str) -> HttpResponse:
    try:
        drop = catalogue.drop_for_buyer(slug=slug, buyer_id=signed_in(request))
    except NotFound as error:
        raise Http404(str(error.detail)) from None
    if not drop.waiting_room:
        return redirect(drop)
    if request.method == "POST":
        return join(request, drop)
    # A GET only looks: a link, a prefetch or a cross-site page cannot put anyone in line.
    try:
        place = services.place(drop=drop, buyer_id=signed_in(request))
    except services.NotInQueue:
        queue = drawing.queue_for(drop)
        context = {
            "drop": drop,
            "closes_at": drawing.closes_at(drop),  # said before the buyer joins: later joins queue behind
            "line_closed": queue.entries_closed_at is not None,
            "closed": drop.state == DropState.ENDED,
            "sold_out": state.current(drop).queue_state == "sold_out",
            "seed_sha256": queue.seed_sha256,  # committed before this buyer joins
            "beacon": drawing.beacon_of(queue),
        }
        return render(request, "admission/join.html", context)
    context = {
        "drop": drop,
        # The sizes with what is left of each: the turn form offers them as the drop page does.
        "view": catalogue.drop_view(slug=slug, buyer_id=signed_in(request)),
        "place": place,
        "snapshot": place.snapshot,
        "data": place.as_json(),
        "idempotency_key": uuid.uuid4().hex,  # one per page view: a double click returns the same hold
        "quantities": range(1, drop.per_buyer_limit + 1),
        "beacon": drawing.beacon_of(place.queue),
        "closes_at": drawing.closes_at(drop),
    }
    response = render(request, "admission/queue.html", context)
    # The page's polls (GET /api/drops/<slug>/queue) carry this cookie: the edge answers them.
    api.remember(response, slug=drop.slug, ticket=api.queue_ticket(request, place))
    return response


def join(request: HttpRequest, drop: Drop) -> HttpResponse:
    """POST (CSRF-checked by the middleware): limited like the API's join, then back to the page.

    Joining is idempotent: a second click, tab or device keeps the ticket.
    """
    try:
        limits.check_buyer(request, scope="queue")
        services.join(
            drop=drop,
            buyer_id=signed_in(request),
            proof=request.POST.get("proof"),
            challenge=request.POST.get("challenge"),
        )
    except (Busy, RateLimited) as error:
        # The page joins again by itself after Retry-After (and a spread, so a refused crowd does not
        # come back in step), with the same proof; a button does it at once or without JavaScript.
        wait = (error.retry_after or 1) * (1 + random.random())
        context = {
            "drop": drop,
            "detail": error.detail,
            "retry_at": timezone.now() + timedelta(seconds=wait),
            "proof": str(request.POST.get("proof", ""))[:64],
            "challenge": str(request.POST.get("challenge", ""))[:128],
        }
        response = render(request, "admission/busy.html", context, status=error.status)
        response["Retry-After"] = str(error.retry_after)
        return response
    except FloodgateError as error:
        messages.error(request, error.detail)
        return redirect(drop)
    return redirect("drop-queue", slug=drop.slug)


@require_http_methods(["GET", "HEAD"])
def verify(request: HttpRequest, slug: str) -> HttpResponse:
    """The page that checks the draw in the buyer's browser (static/js/verify.js) from the public JSON."""
    try:
        drop = catalogue.drop_for_buyer(slug=slug, buyer_id=request.user.pk)
    except NotFound as error:
        raise Http404(str(error.detail)) from None
    if not drop.waiting_room:
        raise Http404(gettext("This drop has no waiting room."))
    mine = services.own_ticket(drop=drop, buyer_id=request.user.pk) if request.user.is_authenticated else None
    context = {
        "drop": drop,
        "beacon": drawing.beacon_of(drawing.queue_for(drop)),
        "entry": mine.pk if mine else None,
        "number": mine.number if mine else None,
    }
    return render(request, "admission/verify.html", context)
