"""The API's own pages: its index, its schema, its docs page, and the answer for an unknown path."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_safe

from config.openapi import schema
from config.schemas import Links
from core.api import api
from core.errors import NotFound, fill


@api({"GET"})
def openapi(request: HttpRequest) -> JsonResponse:
    return JsonResponse(schema())


@api({"GET"})
def index(request: HttpRequest) -> JsonResponse:
    links = Links(openapi="/api/openapi.json", drops="/api/drops/<slug>", catalogue="/api/drops")
    return JsonResponse(links.dump())


@api({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"})
def unknown(request: HttpRequest, path: str) -> JsonResponse:
    raise NotFound(
        fill(gettext_lazy("/api/%(path)s is not part of the API; see /api/openapi.json."), path=path)
    )


@require_safe
def docs(request: HttpRequest) -> HttpResponse:
    """The API reference for people: Swagger UI reading the published schema."""
    return render(request, "api/docs.html", {"schema_url": reverse("api-openapi")})
