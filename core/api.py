"""The JSON API's plumbing: bearer or session auth, domain errors mapped to JSON answers."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from functools import wraps

from django.contrib.auth import authenticate
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.translation import gettext_lazy
from django.views.decorators.csrf import csrf_exempt

from core.answers import Error, error_body
from core.asgi import csrf_failure
from core.errors import (
    Busy,
    CsrfFailed,
    FloodgateError,
    InvalidInput,
    TooLarge,
    Unauthenticated,
    database_not_now,
)

View = Callable[..., HttpResponse]
log = logging.getLogger(__name__)
MAX_BODY = 16 * 1024
TOO_LARGE = gettext_lazy("The request body is too large (16 KB at most).")


def error_response(error: FloodgateError) -> JsonResponse:
    response = JsonResponse(error_body(error), status=error.status)
    if error.retry_after is not None:
        response["Retry-After"] = str(error.retry_after)
    return response


def signed_in(request: HttpRequest) -> int:
    """The signed-in buyer's id, in a view that only a signed-in buyer reaches (api(login=True),
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


def api(methods: set[str], *, login: bool = False) -> Callable[[View], View]:
    """Wrap a JSON view: allowed methods, auth (bearer, or session plus CSRF), error mapping.

    A view that answers GET answers HEAD too (the same headers, no body), as Django's own do.
    """
    allowed = methods | {"HEAD"} if "GET" in methods else methods

    def decorate(view: View) -> View:
        @csrf_exempt
        @wraps(view)
        def wrapper(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
            if request.method not in allowed:
                response = JsonResponse(
                    Error(error="method_not_allowed", detail=f"Use {', '.join(sorted(allowed))}.").dump(),
                    status=405,
                )
                response["Allow"] = ", ".join(sorted(allowed))
                return response
            try:
                user = bearer_user(request)
                if user is not None:
                    request.user = user  # type: ignore[assignment]  # stubs say User | AnonymousUser
                elif (
                    request.user.is_authenticated
                    and request.method not in {"GET", "HEAD"}
                    and csrf_failure(request) is not None
                ):
                    raise CsrfFailed(CSRF_FAILED)
                if login and (isinstance(request.user, AnonymousUser) or not request.user.is_authenticated):
                    raise Unauthenticated(LOG_IN)
                return view(request, *args, **kwargs)
            except FloodgateError as error:
                return error_response(error)
            except RequestDataTooBig:  # past DATA_UPLOAD_MAX_MEMORY_SIZE: Django's answer is an HTML 400
                return error_response(TooLarge(TOO_LARGE))
            except DatabaseError as error:
                if not database_not_now(error):
                    raise
                # Deadlock, lock or statement timeout, pool exhausted, failover: the database said "not now".
                log.warning("api %s %s: database busy: %s", request.method, request.path, error)
                return error_response(Busy(gettext_lazy("The shop is very busy; try again in a second.")))

        return wrapper

    return decorate


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
