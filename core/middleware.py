"""Middleware of the whole site."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed

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
