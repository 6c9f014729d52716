"""The JSON API's plumbing: bearer or session auth, domain errors mapped to JSON answers.

config/api.py is the API (django-ninja): each package's api.py declares its operations on a ninja
Router, once each, with `operation(...)` below: method and path, summary, statuses and their answer
models, auth, body and headers; routing, auth and the OpenAPI document all come from that one
declaration, and config/api.py maps the errors. The edge and the claim lane answer some of the same
calls before Django through the helpers here too (bearer_user, csrf_failure, parse_json_body).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from django.conf import settings
from django.contrib.auth import authenticate
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.translation import gettext_lazy
from ninja import Router
from ninja.schema import NinjaGenerateJsonSchema
from ninja.security import APIKeyCookie, HttpBearer
from pydantic import BaseModel, WithJsonSchema

from core.answers import Error, error_body
from core.asgi import csrf_failure
from core.errors import CsrfFailed, FloodgateError, InvalidInput, TooLarge, Unauthenticated

View = Callable[..., HttpResponse]
# A hold's or an order's id in a path: an integer to its callers; the view takes any text and
# answers 404 for one that is not an id of theirs, as it always has (not ninja's 422).
Id = Annotated[str, WithJsonSchema({"type": "integer"})]
MAX_BODY = 16 * 1024
TOO_LARGE = gettext_lazy("The request body is too large (16 KB at most).")


def error_response(error: FloodgateError) -> JsonResponse:
    response = JsonResponse(error_body(error), status=error.status)
    if error.retry_after is not None:
        response["Retry-After"] = str(error.retry_after)
    return response


def signed_in(request: HttpRequest) -> int:
    """The signed-in buyer's id, in a view that only a signed-in buyer reaches (operation(login=True),
    login_required)."""
    pk = request.user.pk
    assert pk is not None, "only behind a login"
    return int(pk)


def bearer_user(request: HttpRequest) -> AbstractBaseUser | None:
    """The user of a valid `Authorization: Bearer` token; raises on a malformed or unknown one."""
    header = request.headers.get("Authorization", "")
    if not header:
        return None
    scheme, _, raw = header.partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        raise Unauthenticated(gettext_lazy("Use the header 'Authorization: Bearer <token>'."))
    user = authenticate(request, bearer_token=raw.strip())  # shop.auth.BearerTokenBackend
    if user is None:
        raise Unauthenticated(gettext_lazy("That bearer token is not valid."))
    return user


CSRF_FAILED = gettext_lazy("Send the CSRF token with a session.")
LOG_IN = gettext_lazy("Log in, or send 'Authorization: Bearer <token>'.")


def json_body(request: HttpRequest) -> dict[str, object]:
    """The request's JSON object body; an empty body is {}."""
    return parse_json_body(request.body)


def parse_json_body(raw: bytes) -> dict[str, object]:
    """A JSON object body (the claim lane reads bodies without Django); an empty body is {}."""
    if len(raw) > MAX_BODY:
        raise TooLarge(TOO_LARGE)
    if not raw:
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):  # deep nesting is not JSON we take
        raise InvalidInput(gettext_lazy("The body is not valid JSON.")) from None
    if not isinstance(body, dict):
        raise InvalidInput(gettext_lazy("The body must be a JSON object."))
    return body


def method_not_allowed(allowed: Iterable[str]) -> JsonResponse:
    """405 with an Error body and `Allow`, for a method the call does not answer (TRACE included)."""
    names = ", ".join(sorted(set(allowed)))
    response = JsonResponse(Error(error="method_not_allowed", detail=f"Use {names}.").dump(), status=405)
    response["Allow"] = names
    return response


class BearerToken(HttpBearer):
    """`Authorization: Bearer <token>`: a malformed or unknown token is refused (401) on every call,
    not passed over to the session."""

    def __call__(self, request: HttpRequest) -> AbstractBaseUser | None:
        user = bearer_user(request)
        if user is not None:
            request.user = user  # type: ignore[assignment]  # stubs say User | AnonymousUser
        return user

    def authenticate(self, request: HttpRequest, token: str) -> AbstractBaseUser | None:
        return None  # __call__ reads the header itself (bearer_user), as the edge and the lane do


class Session(APIKeyCookie):
    """The session cookie; a write also needs the CSRF token (Django's own verdict, csrf_failure)."""

    def __init__(self) -> None:
        self.param_name = settings.SESSION_COOKIE_NAME  # the document names the cookie
        super().__init__(csrf=False)  # checked below, only for a signed-in session's write

    def __call__(self, request: HttpRequest) -> AbstractBaseUser | AnonymousUser | None:
        if not request.user.is_authenticated:
            return None
        if request.method not in {"GET", "HEAD"} and csrf_failure(request) is not None:
            raise CsrfFailed(CSRF_FAILED)
        return request.user

    def authenticate(self, request: HttpRequest, key: str | None) -> None:
        return None  # __call__ asks Django's session middleware, which has read the cookie


class Visitor(APIKeyCookie):
    """Anyone, last in a public call's list: the credentials, when sent, are still checked first.
    config/api.py writes it into the document as the empty requirement (credentials optional)."""

    def __call__(self, request: HttpRequest) -> AbstractBaseUser | AnonymousUser:
        return request.user

    def authenticate(self, request: HttpRequest, key: str | None) -> None:
        return None


BUYER = [BearerToken(), Session()]  # a signed-in buyer (or staff): anyone else is 401 unauthenticated
ANYONE = [BearerToken(), Session(), Visitor()]
RETRY_AFTER = {
    "Retry-After": {"description": "Seconds to wait before trying again", "schema": {"type": "integer"}}
}
RETRIED = {429, 503}  # statuses that carry Retry-After


@dataclass(frozen=True)
class Header:
    name: str
    schema: dict[str, Any]
    required: bool = False
    description: str | None = None


Answers = dict[int, str | tuple[str, type[BaseModel] | None]]


def operation(
    router: Router,
    method: str,
    path: str,
    summary: str,
    answers: Answers,
    *,
    url_name: str,
    login: bool = False,
    body: type[BaseModel] | None = None,
    headers: Sequence[Header] = (),
) -> Callable[[View], View]:
    """Declare one call of the API on `router`: its method (a GET answers HEAD too) and path, each
    status's description and model (a bare description: an Error), who may call it, its body and
    headers. The answers every call may give are added: a bad bearer token 401, the database's "not
    now" 503; a write's csrf_failed 403 and too_large 413; a body that is not a JSON object 422.

    The body and the headers are documented here and read by the view: the services' own checks give
    the contract's codes (invalid_quantity, invalid_idempotency_key...), which a validation in front
    of them would fold into one generic 422. A view answers with its JsonResponse, the same bytes the
    edge and the lane write (core/answers.py); `answers` gives the document its models."""
    common: dict[int, str | tuple[str, type[BaseModel] | None]] = {
        401: "Not logged in, or a bad bearer token" if login else "A bad bearer token",
        503: "busy; see Retry-After",
    }
    if method not in {"GET", "HEAD"}:
        common[403] = "csrf_failed: a session needs the CSRF token"
        common[413] = "too_large: the request body is too large"
    if body is not None:
        common[422] = "invalid: the body is not a JSON object"
    every = {**common, **answers}
    models: dict[int, type[BaseModel] | None] = {}
    documented: dict[int, dict[str, Any]] = {}
    for status, answer in every.items():
        description, model = (answer, Error) if isinstance(answer, str) else answer
        models[status] = model
        documented[status] = {"description": description}
        if status in RETRIED:
            documented[status]["headers"] = RETRY_AFTER
    extra: dict[str, Any] = {"responses": documented}
    if body is not None:
        # as ninja writes the answers' schemas: no `default: null` for a field that may be left out
        schema = body.model_json_schema(schema_generator=NinjaGenerateJsonSchema)
        schema.pop("title", None)
        extra["requestBody"] = {"required": True, "content": {"application/json": {"schema": schema}}}
    if headers:
        extra["parameters"] = [
            {
                "name": header.name,
                "in": "header",
                "required": header.required,
                "schema": header.schema,
                **({"description": header.description} if header.description else {}),
            }
            for header in headers
        ]
    return router.api_operation(
        [method, "HEAD"] if method == "GET" else [method],
        path,
        summary=summary,
        response=models,
        auth=BUYER if login else ANYONE,
        openapi_extra=extra,
        url_name=url_name,
    )
