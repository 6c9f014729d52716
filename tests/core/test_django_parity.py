"""What the edge and the claim lane read and write before Django (core/asgi.py's MIRRORS), each row
against Django's own answer for the same request."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest
from django.core.handlers.asgi import ASGIRequest
from django.test import Client

from core import api as core_api
from core import asgi
from core.errors import Unauthenticated

pytestmark = pytest.mark.django_db

PARITY_TESTS = {
    "header": "test_header_is_djangos",
    "bearer": "test_bearer_is_the_token_django_authenticates",
    "cookies": "test_cookies_are_djangos",
    "language": "test_language_is_the_one_django_answers_in",
    "common_headers": "test_common_headers_are_djangos",
    "strict_transport": "test_strict_transport_is_djangos",
}


def scope(*headers: tuple[bytes, bytes]) -> dict[str, Any]:
    return {
        "type": "http",
        "method": "GET",
        "path": "/api/drops/nowhere",
        "query_string": b"",
        "headers": list(headers),
    }


def django_request(sent: dict[str, Any]) -> ASGIRequest:
    return ASGIRequest(sent, io.BytesIO())


def test_every_mirror_has_its_parity_test() -> None:
    assert set(PARITY_TESTS) == set(asgi.MIRRORS)
    assert all(name in globals() for name in PARITY_TESTS.values())


@pytest.mark.parametrize(
    "headers",
    [
        (),
        ((b"authorization", b"Bearer abc"),),
        ((b"Authorization", b"bearer  abc "),),
        ((b"x-admission-token", b"t1"),),
        ((b"x-admission-token", b"t1"), (b"X-Admission-Token", b"t2")),
        ((b"authorization", b"Bearer a"), (b"authorization", b"Bearer b")),
    ],
)
def test_header_is_djangos(headers: tuple[tuple[bytes, bytes], ...]) -> None:
    sent = scope(*headers)
    request = django_request(sent)

    for name in (b"authorization", b"x-admission-token"):
        assert asgi.header(sent, name) == request.headers.get(name.decode()), name


@pytest.mark.parametrize(
    "values",
    [
        *(
            [value]
            for value in ["Bearer abc", "bearer abc", "BEARER  abc  ", "Bearer", "Bearer ", "Basic abc", ""]
        ),
        ["Bearer a", "Bearer b"],  # repeated: Django reads "Bearer a,Bearer b"
    ],
)
def test_bearer_is_the_token_django_authenticates(values: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    sent = scope(*((b"authorization", value.encode()) for value in values))
    asked: list[str] = []

    def authenticate(request: object, bearer_token: str) -> None:
        asked.append(bearer_token)

    monkeypatch.setattr(core_api, "authenticate", authenticate)
    with contextlib.suppress(Unauthenticated):
        core_api.bearer_user(django_request(sent))

    assert asgi.bearer(sent) == (asked[0] if asked else None)


@pytest.mark.parametrize(
    "cookies",
    [
        [],
        [b"sessionid=abc"],
        [b"sessionid=abc; django_language=de"],
        [b"sessionid=abc", b"django_language=de"],
        [b'a="quoted"; b=2; =empty; c'],
    ],
)
def test_cookies_are_djangos(cookies: list[bytes]) -> None:
    sent = scope(*((b"cookie", cookie) for cookie in cookies))

    assert asgi.cookies(sent) == django_request(sent).COOKIES


@pytest.mark.parametrize(
    ("cookie", "accept"),
    [
        (None, None),
        (None, "de-DE,de;q=0.9,en;q=0.5"),
        (None, "fr, de;q=0.3"),
        (None, "xx"),
        ("de", "en"),
        ("en", "de"),
        ("fr", "de"),
    ],
)
def test_language_is_the_one_django_answers_in(cookie: str | None, accept: str | None) -> None:
    headers = []
    extra: dict[str, Any] = {}
    client = Client()
    if cookie is not None:
        headers.append((b"cookie", f"django_language={cookie}".encode()))
        client.cookies["django_language"] = cookie
    if accept is not None:
        headers.append((b"accept-language", accept.encode()))
        extra["HTTP_ACCEPT_LANGUAGE"] = accept

    answer = client.get("/api/drops/nowhere", **extra)

    assert answer.status_code == 404
    assert asgi.language(scope(*headers)) == answer["Content-Language"]


def test_common_headers_are_djangos() -> None:
    answer = Client().get("/api/drops/nowhere")

    for name, value in asgi.COMMON_HEADERS:
        assert answer.get(name.decode()) == value.decode(), name


@pytest.mark.parametrize("preload", [False, True])
def test_strict_transport_is_djangos(settings: Any, preload: bool) -> None:
    settings.SECURE_HSTS_SECONDS = 3600
    settings.SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    settings.SECURE_HSTS_PRELOAD = preload
    settings.SECURE_SSL_REDIRECT = False

    answer = Client().get("/api/drops/nowhere", secure=True)
    hsts = asgi.strict_transport()

    assert hsts is not None and answer["Strict-Transport-Security"] == hsts.decode()
