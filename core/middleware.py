"""Middleware of the whole site."""

from __future__ import annotations

import re
from collections.abc import Callable

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.utils.translation import gettext_lazy

from core.api import error_response
from core.errors import NotFound

# TRACE echoes the request back (cookies included, to a script that can read it): no page here
# needs it, nor TRACK (IIS's TRACE) or CONNECT (a proxy's). The API's own wrapper answers its
# paths (JSON, with each view's Allow).
REFUSED = frozenset({"TRACE", "TRACK", "CONNECT"})
PAGE_METHODS = ["GET", "HEAD", "POST"]


class RefuseTrace:
    """405 for TRACE, TRACK and CONNECT on every page (views without a method check took them)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method in REFUSED and not request.path.startswith("/api/"):
            return HttpResponseNotAllowed(PAGE_METHODS)
        return self.get_response(request)


# No address of the shop holds a control character. In a path they reached views' lookups, and
# PostgreSQL refuses NUL in text (GET /checkout/stripe/%00 was a 500); admin pages redirected.
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
NO_SUCH_PAGE = gettext_lazy("Nothing here.")


class RefuseControlCharacters:
    """404 for a path with NUL or another control character, before any view: the shop's 404 page,
    or under /api/ the API's JSON one."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if CONTROL.search(request.path):
            if request.path.startswith("/api/"):
                return error_response(NotFound(NO_SUCH_PAGE))
            raise Http404(NO_SUCH_PAGE)
        return self.get_response(request)
