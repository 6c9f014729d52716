"""Storefront pages: the drop list, a drop, terms, the 404 page, the icon (sign-up and login
are allauth's, see accounts/)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.views.static import serve

from catalogue import selectors as catalogue
from core.errors import NotFound
from shop import pictures
from storefront import selectors


def home(request: HttpRequest) -> HttpResponse:
    return render(request, "shop/home.html", {"groups": catalogue.storefront()})


def drop(request: HttpRequest, slug: str) -> HttpResponse:
    buyer_id = request.user.pk if request.user.is_authenticated else None
    try:
        page = selectors.drop_page(slug=slug, buyer_id=buyer_id)
    except NotFound as error:
        raise Http404(error.detail) from None
    context = {
        "page": page,
        "view": page.view,
        "drop": page.view.drop,
        # One key per page view: a double click or a resubmit returns the same hold.
        "idempotency_key": uuid.uuid4().hex,
        "quantities": range(1, page.view.drop.per_buyer_limit + 1),
    }
    return render(request, "shop/drop.html", context)


def terms(request: HttpRequest) -> HttpResponse:
    return render(request, "shop/terms.html")


def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico whatever the page links; send them to the shop's icon."""
    return redirect(static("img/favicon.svg"), permanent=True)


def media(request: HttpRequest, path: str) -> HttpResponseBase:
    """An uploaded product picture from MEDIA_ROOT (Django's file view: it refuses paths outside).
    Only the picture types an upload is kept as: any other file there is not served, inline or not."""
    if not path.lower().endswith(pictures.SERVED):
        raise Http404("Only product pictures (JPEG, PNG, WebP) are served here.")
    return serve(request, path, document_root=str(settings.MEDIA_ROOT))


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """The 404 page; says why only when the code said it in words (not a resolver's class name)."""
    message = exception.args[0] if isinstance(exception, Http404) and exception.args else None
    return render(request, "404.html", {"message": message if isinstance(message, str) else None}, status=404)


def healthz(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok", content_type="text/plain")
