"""The API's pages outside ninja: its docs page, and the answer for a path that is not a call."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext_lazy
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe

from core.api import error_response, method_not_allowed
from core.errors import NotFound, fill

# What a path that is not a call answers 404 to; anything else (TRACE...) is 405, as on the calls.
UNKNOWN_METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"}


@csrf_exempt  # no call here: nothing to protect, and a session's POST gets the same 404 as a token's
def unknown(request: HttpRequest, path: str) -> JsonResponse:
    if request.method not in UNKNOWN_METHODS:
        return method_not_allowed(UNKNOWN_METHODS)
    return error_response(
        NotFound(
            fill(gettext_lazy("/api/%(path)s is not part of the API; see /api/openapi.json."), path=path)
        )
    )


@require_safe
def docs(request: HttpRequest) -> HttpResponse:
    """The API reference for people: Swagger UI reading the published schema."""
    return render(request, "api/docs.html", {"schema_url": reverse("api-openapi")})
