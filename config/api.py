"""The JSON API under /api/: one django-ninja API gathering each package's Router.

Each call is declared once, in its package's api.py (core.api.operation): its path and method, who
may call it, its statuses with their answer models (config/schemas.py names them all), its body and
headers. Routing, auth and the OpenAPI 3.1 document at /api/openapi.json all come from there. The
test suite checks every /api/ answer it sees against that document (tests/api_schema.py).
"""

from __future__ import annotations

import copy
import functools
import json
import logging
from collections.abc import Callable
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    HttpResponseNotAllowed,
    JsonResponse,
)
from django.urls import URLPattern, path
from django.utils.translation import gettext_lazy
from django.views.decorators.csrf import csrf_exempt
from ninja import NinjaAPI, Router
from ninja.errors import AuthenticationError, ValidationError

from admission.api import router as admission
from catalogue.api import router as catalogue
from checkout.api import router as checkout
from config.schemas import Document, Links
from core.api import LOG_IN, TOO_LARGE, error_response, method_not_allowed, operation
from core.errors import (
    Busy,
    FloodgateError,
    InvalidInput,
    NotFound,
    TooLarge,
    Unauthenticated,
    database_not_now,
)
from fairness.api import router as fairness
from ops.api import router as ops
from sale.api import router as sale

log = logging.getLogger(__name__)
Schema = dict[str, Any]
PREFIX = "/api/"
DESCRIPTION = (
    # Markdown on the docs page: the example in a code span, so "<code>" is not a tag
    "Limited drops: reserve a unit, pay, confirm. Errors are "
    '`{"error": "<code>", "detail": "<what to do>"}` (see Error). Any other path under /api/ '
    "answers 404 and any other method 405 (with Allow), both with an Error body. The public "
    "contract, every answer and status, is docs/API.md in the repository."
)
# The security schemes' names in the document (ninja names them after the auth classes).
SCHEMES = {"BearerToken": "bearer", "Session": "session"}


class FloodgateAPI(NinjaAPI):
    def get_openapi_schema(self, *, path_prefix: str | None = None, path_params: Schema | None = None) -> Any:
        """ninja's document, with what the contract names its way: the security schemes `bearer` and
        `session` (a public call lists the empty requirement too: credentials optional), no
        operation for HEAD (every GET answers it), and checkout's OrderState in a hold's order."""
        # The prefix as config/urls.py mounts the API (ninja would reverse its own root url for it).
        doc = super().get_openapi_schema(path_prefix=PREFIX, path_params=path_params)
        del doc["servers"]  # empty: the document describes the server that serves it
        schemes = doc["components"].setdefault("securitySchemes", {})
        schemes.pop("Visitor", None)
        for old, new in SCHEMES.items():
            schemes[new] = schemes.pop(old)
        for item in doc["paths"].values():
            item.pop("head", None)
            for op in item.values():
                named = [name for each in op["security"] for name in each]
                op["security"] = [{} if name == "Visitor" else {SCHEMES[name]: []} for name in named]
        # holds sits below checkout, so its HoldOrder cannot name checkout's OrderState; here both are known
        schemas = doc["components"]["schemas"]
        schemas["HoldOrder"]["properties"]["state"] = {"$ref": "#/components/schemas/OrderState"}
        return doc


api = FloodgateAPI(
    title="Floodgate",
    version="1",
    description=DESCRIPTION,
    openapi_url=None,  # served by the `openapi` operation below, so the document lists it too
    docs_url=None,  # the docs page is the shop's own (/docs/api/, Swagger UI from static files)
    urls_namespace="api",
)
own = Router()


@operation(own, "GET", "/", "Where to start", {200: ("Links", Links)}, url_name="api-index")
def index(request: HttpRequest) -> JsonResponse:
    links = Links(openapi="/api/openapi.json", drops="/api/drops/<slug>", catalogue="/api/drops")
    return JsonResponse(links.dump())


@operation(
    own, "GET", "/openapi.json", "This document", {200: ("OpenAPI 3.1", Document)}, url_name="api-openapi"
)
def openapi(request: HttpRequest) -> JsonResponse:
    return JsonResponse(schema())


api.add_router("", own)
for router in (catalogue, sale, admission, checkout, fairness, ops):
    api.add_router("", router)


@functools.cache
def _document() -> Schema:
    # As served: JSON's keys (ninja keys the statuses by int) and nothing but JSON values.
    doc: Schema = json.loads(json.dumps(api.get_openapi_schema()))
    return doc


def schema() -> Schema:
    """A fresh copy each call: a caller that edits it (a test, a view) cannot change the next answer."""
    return copy.deepcopy(_document())


@api.exception_handler(Exception)
def unexpected(request: HttpRequest, error: Exception) -> HttpResponse:
    # Django's own 500 (handler500, the logging, the debug page), as for every page; not ninja's
    # plain-text traceback, which it writes in DEBUG.
    raise error


@api.exception_handler(Http404)
def no_such_thing(request: HttpRequest, error: Http404) -> HttpResponse:
    return error_response(NotFound(gettext_lazy("There is no such thing here.")))


@api.exception_handler(FloodgateError)
def floodgate_error(request: HttpRequest, error: FloodgateError) -> HttpResponse:
    return error_response(error)


@api.exception_handler(AuthenticationError)
def not_signed_in(request: HttpRequest, error: AuthenticationError) -> HttpResponse:
    return error_response(Unauthenticated(LOG_IN))


@api.exception_handler(ValidationError)
def invalid(request: HttpRequest, error: ValidationError) -> HttpResponse:
    return error_response(InvalidInput(gettext_lazy("The request is not valid.")))


@api.exception_handler(RequestDataTooBig)
def too_large(request: HttpRequest, error: RequestDataTooBig) -> HttpResponse:
    # past DATA_UPLOAD_MAX_MEMORY_SIZE: Django's own answer would be an HTML 400
    return error_response(TooLarge(TOO_LARGE))


@api.exception_handler(DatabaseError)
def database_busy(request: HttpRequest, error: DatabaseError) -> HttpResponse:
    if not database_not_now(error):
        raise error
    # Deadlock, lock or statement timeout, pool exhausted, failover: the database said "not now".
    log.warning("api %s %s: database busy: %s", request.method, request.path, error)
    return error_response(Busy(gettext_lazy("The shop is very busy; try again in a second.")))


def _json_405(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """ninja answers a method a path does not take with a text 405; the contract's is an Error."""

    @csrf_exempt
    @functools.wraps(view)
    def answered(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponseBase:
        response = view(request, *args, **kwargs)
        if isinstance(response, HttpResponseNotAllowed):
            return method_not_allowed(name.strip() for name in response["Allow"].split(","))
        return response

    return answered


urlpatterns = [
    path(str(pattern.pattern), _json_405(pattern.callback), name=pattern.name)
    for pattern in api.urls[0]
    # ninja's api-root only lets it reverse its own prefix; /api/ is the index operation's
    if isinstance(pattern, URLPattern) and pattern.name != "api-root"
]
