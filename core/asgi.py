"""Raw ASGI for the answers given before Django (the admission edge, the claim lane): the types,
the request's headers, cookies, bearer token and language read as Django reads them, and a JSON
answer with the headers Django's middleware would add.

Everything of Django's that the edge and the lane do without building an HttpRequest has its one
home here and a row in MIRRORED; tests/core/test_mirror.py holds one parity test per row, each
against Django's own answer for the same request, so a Django upgrade that changes one fails the
test named after it. What cannot be mirrored cheaply is not: the CSRF verdict and the session's
user are Django's own middleware and auth, called on a request built from the scope.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import import_module
from typing import Any, cast

from django.conf import settings
from django.contrib.auth import get_user
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse
from django.http.cookie import parse_cookie
from django.http.request import split_domain_port, validate_host
from django.middleware.csrf import CsrfViewMiddleware
from django.utils import translation

from core.answers import error_body
from core.errors import FloodgateError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


# What Django does that the edge and the lane do too, in the words of Django's own code; each
# row is a function or constant of this module and a test in tests/core/test_mirror.py.
MIRRORED: dict[str, str] = {
    "header": 'HttpRequest.headers: a repeated header joined with "," as ASGIRequest joins it',
    "bearer": "the token core.api.bearer_user authenticates, from the same Authorization header",
    "slug": "SlugConverter: the <slug:slug> of the drops' paths (within Drop.slug's 80 characters)",
    "allowed_host": "HttpRequest.get_host: the Host header against ALLOWED_HOSTS (else a 400)",
    "https_redirect": "SecurityMiddleware: SECURE_SSL_REDIRECT sends a request not secure to HTTPS",
    "hsts": "SecurityMiddleware: Strict-Transport-Security on a secure request's answer",
    "common_headers": "SecurityMiddleware, XFrameOptionsMiddleware: nosniff, referrer, opener, frames",
    "cookies": "request.COOKIES, repeated Cookie headers joined as ASGIRequest joins them",
    "language": "LocaleMiddleware: the language cookie, else Accept-Language, else LANGUAGE_CODE",
    "session_user": "AuthenticationMiddleware: the session's user, its password hash checked",
    "csrf": "CsrfViewMiddleware: the verdict on a session's write",
}

# Django's slug converter, within Drop.slug's length: what it would not take is a 404 without a query.
SLUG = re.compile(r"[-a-zA-Z0-9_]{1,80}")

# Django's answers carry these (SecurityMiddleware, XFrameOptionsMiddleware); so do ours.
COMMON_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
]


def strict_transport() -> bytes | None:
    """The Strict-Transport-Security value Django's SecurityMiddleware sends, or None. The edge and
    the lane answer only what Django would serve (with SECURE_SSL_REDIRECT, secure requests), and a
    browser ignores the header over plain HTTP anyway."""
    if not settings.SECURE_HSTS_SECONDS:
        return None
    value = f"max-age={settings.SECURE_HSTS_SECONDS}"
    if settings.SECURE_HSTS_INCLUDE_SUBDOMAINS:
        value += "; includeSubDomains"
    if settings.SECURE_HSTS_PRELOAD:
        value += "; preload"
    return value.encode()


# A buyer's own place: like Django's session answers, not for shared caches.
PRIVATE_HEADERS = ((b"vary", b"Cookie"), (b"cache-control", b"private"))


def header(scope: Scope, name: bytes) -> str | None:
    """A request header as HttpRequest.headers reads it: a repeated one joined with ",", as
    ASGIRequest joins it (before, the first alone: two Authorization headers named a buyer here
    whom Django, reading "Bearer a,Bearer b", refuses)."""
    sent = [bytes(value).decode("latin-1") for key, value in scope.get("headers", ()) if key.lower() == name]
    return ",".join(sent) if sent else None


def allowed_host(host: str) -> bool:
    """Would HttpRequest.get_host accept this Host header (as sent, port and all)?"""
    hosts = settings.ALLOWED_HOSTS
    if settings.DEBUG and not hosts:
        hosts = [".localhost", "127.0.0.1", "[::1]"]  # as HttpRequest.get_host does
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, hosts)


def secure(scope: Scope) -> bool:
    """HttpRequest.is_secure: the scheme, or SECURE_PROXY_SSL_HEADER's first value."""
    if scope.get("scheme") == "https":
        return True
    if not settings.SECURE_PROXY_SSL_HEADER:
        return False
    name, value = settings.SECURE_PROXY_SSL_HEADER
    sent = header(scope, name.removeprefix("HTTP_").replace("_", "-").lower().encode())
    return sent is not None and sent.split(",", 1)[0].strip() == value


def https_redirect_due(scope: Scope) -> bool:
    """Would SecurityMiddleware send this request to HTTPS? (The shop sets no SECURE_REDIRECT_EXEMPT.)"""
    return bool(settings.SECURE_SSL_REDIRECT) and not secure(scope)


def bearer(scope: Scope) -> str | None:
    """The token of `Authorization: Bearer <token>`; None for no header or another scheme."""
    raw = header(scope, b"authorization")
    if not raw:
        return None
    scheme, _, value = raw.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def cookies(scope: Scope) -> dict[str, str]:
    """The request's cookies as Django parses them (ASGIRequest joins repeated headers with ",")."""
    sent = [bytes(v).decode("latin-1") for k, v in scope.get("headers", ()) if k.lower() == b"cookie"]
    return parse_cookie(",".join(sent)) if sent else {}


def language(scope: Scope) -> str:
    """The language LocaleMiddleware would activate for this request: the switcher's cookie, else
    the browser's Accept-Language, else LANGUAGE_CODE. Decided once per cookie and header pair."""
    chosen = None
    if any(k.lower() == b"cookie" for k, _v in scope.get("headers", ())):
        chosen = cookies(scope).get(settings.LANGUAGE_COOKIE_NAME)
    return _language(chosen, header(scope, b"accept-language"))


class _Asked:
    """All of a request that Django's get_language_from_request reads (without check_path)."""

    def __init__(self, chosen: str | None, accept: str | None) -> None:
        self.COOKIES = {} if chosen is None else {settings.LANGUAGE_COOKIE_NAME: chosen}
        self.META = {} if accept is None else {"HTTP_ACCEPT_LANGUAGE": accept}


@lru_cache(maxsize=512)  # a crowd sends a handful of pairs; a stranger's made-up ones only churn it
def _language(chosen: str | None, accept: str | None) -> str:
    return translation.get_language_from_request(cast(HttpRequest, _Asked(chosen, accept)))


def session_users(keys: list[str]) -> dict[str, int]:
    """Each session's user as AuthenticationMiddleware finds them (backend, password hash checked);
    a session with none is left out. Reads the session store: not on the event loop."""
    store = import_module(settings.SESSION_ENGINE).SessionStore
    found = {}
    for key in keys:
        request = HttpRequest()
        request.session = store(key)
        user = get_user(request)
        if user.is_authenticated:
            found[key] = user.pk
    return found


def csrf_failure(request: HttpRequest) -> HttpResponse | None:
    """Django's CSRF verdict on a session's write: None when it passes, else Django's 403."""
    middleware = CsrfViewMiddleware(_no_view)
    middleware.process_request(request)  # the cookie's secret into META, as the middleware chain does
    return middleware.process_view(request, _no_view, (), {})


def csrf_failure_of(scope: Scope, body: bytes) -> HttpResponse | None:
    """csrf_failure of a raw request: the scope and its body as Django reads them."""
    return csrf_failure(ASGIRequest(scope, io.BytesIO(body)))


def _no_view(request: HttpRequest) -> HttpResponse:
    """What csrf_failure hands the middleware for a view: not csrf_exempt, never called."""
    return HttpResponse()


async def read_body(receive: Receive, *, limit: int) -> tuple[bytes | None, bool]:
    """The request body (None: the client left before it was whole), and False when it is
    longer than `limit` (what was read is then dropped)."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None, True
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return b"", False
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), True


def replay(body: bytes, receive: Receive) -> Receive:
    """A body already read, once more for the next application, then the server's own messages
    (a disconnect)."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: bytes
    content_type: bytes = b"application/json"
    retry_after: int | None = None
    headers: tuple[tuple[bytes, bytes], ...] = ()
    by: bytes = b"x-floodgate-edge"  # who answered: the edge, or the claim lane (x-floodgate-lane)

    @classmethod
    def error(cls, error: FloodgateError, *, language: str, by: bytes = b"x-floodgate-edge") -> Answer:
        """The answer core.api.error_response gives the same error, its detail in `language`
        (core.asgi.language: the request's), with the headers LocaleMiddleware adds."""
        with translation.override(language):
            body = json.dumps(error_body(error)).encode()
        headers = ((b"content-language", language.encode()), (b"vary", b"Accept-Language, Cookie"))
        return cls(error.status, body, retry_after=error.retry_after, headers=headers, by=by)

    async def send(self, send: Send, *, head: bool = False) -> None:
        headers = [
            (b"content-type", self.content_type),
            (b"content-length", str(len(self.body)).encode()),
            (self.by, b"hit"),
            *COMMON_HEADERS,
            *self.headers,
        ]
        if self.retry_after is not None:
            headers.append((b"retry-after", str(self.retry_after).encode()))
        if hsts := strict_transport():
            headers.append((b"strict-transport-security", hsts))
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if head else self.body})
