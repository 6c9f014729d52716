"""Storefront pages: the drop list, a drop (sign-up and login are allauth's, see accounts/)."""

from __future__ import annotations

import contextlib
import uuid

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from admission import services as admission
from core.errors import NotFound
from shop import selectors
from shop.models import DropState


def home(request: HttpRequest) -> HttpResponse:
    return render(request, "shop/home.html", {"groups": selectors.storefront()})


def drop(request: HttpRequest, slug: str) -> HttpResponse:
    try:
        view = selectors.drop_view(slug=slug)
    except NotFound as error:
        raise Http404(error.detail) from None
    admission_token = None
    in_line = False
    if view.drop.waiting_room and view.state != DropState.ENDED and request.user.is_authenticated:
        # An admitted buyer buys right here (with a fresh token); everyone else joins the line,
        # or goes back to the place they have.
        with contextlib.suppress(admission.NotInQueue):
            place = admission.place(drop=view.drop, buyer_id=request.user.pk)
            in_line = True
            if view.state == DropState.LIVE:
                admission_token = place.token
    context = {
        "view": view,
        "drop": view.drop,
        "admission_token": admission_token,
        "in_line": in_line,
        # One key per page view: a double click or a resubmit returns the same hold.
        "idempotency_key": uuid.uuid4().hex,
        "quantities": range(1, view.drop.per_buyer_limit + 1),
    }
    return render(request, "shop/drop.html", context)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """The 404 page; says why only when the code said it in words (not a resolver's class name)."""
    message = exception.args[0] if isinstance(exception, Http404) and exception.args else None
    return render(request, "404.html", {"message": message if isinstance(message, str) else None}, status=404)


def healthz(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok", content_type="text/plain")
