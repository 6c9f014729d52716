"""JSON API views for the catalogue (`/api/...`)."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from shop import selectors
from shop.api import api
from shop.errors import NotFound
from shop.openapi import schema


@api({"GET"})
def openapi(request: HttpRequest) -> JsonResponse:
    return JsonResponse(schema())


@api({"GET"})
def index(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"openapi": "/api/openapi.json", "drops": "/api/drops/<slug>"})


@api({"GET", "HEAD"})
def drop_detail(request: HttpRequest, slug: str) -> JsonResponse:
    return JsonResponse(selectors.drop_view(slug=slug).as_json())


@api({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"})
def unknown(request: HttpRequest, path: str) -> JsonResponse:
    raise NotFound(f"/api/{path} is not part of the API; see /api/openapi.json.")


@api({"GET"}, login=True)
def me(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"username": request.user.get_username()})
