"""What the edge and the lane mirror of Django (core.asgi.MIRRORED): one parity test per row, each
against Django's own answer for the same request through the shop's middleware, so a Django upgrade
that changes one fails the test named after it."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest
from django.core.handlers.asgi import ASGIRequest
from django.test import Client, override_settings
from django.urls import Resolver404, resolve

from core import api as core_api
from core import asgi
from core.errors import Unauthenticated
from tests.factories import make_buyer

pytestmark = pytest.mark.django_db

PAGE = "/"  # a page of Django's that needs no login (the API's answers are checked against its schema)


def scope(
    path: str = PAGE, *, method: str = "GET", scheme: str = "http", headers: dict[str, str] | None = None
) -> dict[str, Any]:
    """A raw ASGI request as the edge and the lane see it."""
    sent = [(name.encode(), value.encode("latin-1")) for name, value in (headers or {}).items()]
    return {
        "type": "http",
        "method": method,
        "path": path,
        "root_path": "",
        "scheme": scheme,
        "query_string": b"",
        "server": ("testserver", 443 if scheme == "https" else 80),
        "headers": [(b"host", b"testserver"), *sent] if "host" not in (headers or {}) else sent,
    }


def django_request(raw: dict[str, Any], body: bytes = b"") -> ASGIRequest:
    return ASGIRequest(raw, io.BytesIO(body))


def test_every_row_has_its_parity_test() -> None:
    tested = {name.removeprefix("test_").removesuffix("_is_djangos") for name in globals()}
    assert set(asgi.MIRRORED) <= tested, set(asgi.MIRRORED) - tested


@pytest.mark.parametrize(
    "host",
    [
        "shop.example",
        "SHOP.EXAMPLE",
        "shop.example:8443",
        "shop.example.",
        "a.shop.example",
        "deep.sub.example",
        "sub.example",
        "evil.example",
        "shop.example.evil.example",
        "",
        "shop.example:port",
        "[::1]",
        "[::1]:8000",
        "shop example",
    ],
)
def test_allowed_host_is_djangos(host: str) -> None:
    with override_settings(ALLOWED_HOSTS=["shop.example", ".sub.example", "[::1]"], DEBUG=False):
        answer = Client().get(PAGE, HTTP_HOST=host)
        mirrored = asgi.allowed_host(host)

    assert mirrored == (answer.status_code != 400), (host, answer.status_code)


@pytest.mark.parametrize(
    ("scheme", "forwarded"),
    [
        ("http", None),
        ("https", None),
        ("http", "https"),
        ("http", "http"),
        ("http", "https, http"),
        ("http", ""),
    ],
)
@pytest.mark.parametrize("proxy_header", [True, False])
def test_https_redirect_is_djangos(scheme: str, forwarded: str | None, proxy_header: bool) -> None:
    headers = {} if forwarded is None else {"x-forwarded-proto": forwarded}
    proxy = ("HTTP_X_FORWARDED_PROTO", "https") if proxy_header else None
    with override_settings(
        SECURE_SSL_REDIRECT=True, SECURE_PROXY_SSL_HEADER=proxy, ALLOWED_HOSTS=["testserver"]
    ):
        answer = Client().get(PAGE, secure=scheme == "https", headers=headers)
        mirrored = asgi.https_redirect_due(scope(scheme=scheme, headers=headers))

    assert mirrored == (answer.status_code == 301), (scheme, forwarded, answer.status_code)


@pytest.mark.parametrize(
    ("seconds", "subdomains", "preload"), [(0, False, False), (3600, False, False), (31_536_000, True, True)]
)
def test_hsts_is_djangos(seconds: int, subdomains: bool, preload: bool) -> None:
    with override_settings(
        SECURE_HSTS_SECONDS=seconds,
        SECURE_HSTS_INCLUDE_SUBDOMAINS=subdomains,
        SECURE_HSTS_PRELOAD=preload,
        ALLOWED_HOSTS=["testserver"],
    ):
        answer = Client().get(PAGE, secure=True)
        mirrored = asgi.strict_transport()

    sent = answer.headers.get("Strict-Transport-Security")
    assert (mirrored.decode() if mirrored else None) == sent


def test_common_headers_is_djangos() -> None:
    with override_settings(ALLOWED_HOSTS=["testserver"]):
        answer = Client().get(PAGE, secure=True)

    assert answer.status_code == 200
    for name, value in asgi.COMMON_HEADERS:
        assert answer.headers.get(name.decode()) == value.decode(), name


@pytest.mark.parametrize(
    "sent",
    [
        ["a=1; b=2"],
        ["a=1", "b=2"],  # two Cookie headers (HTTP/2 sends them apart)
        ['q="quoted value"; r=x'],
        ["dup=1; dup=2"],
        ["=novalue; ok=1"],
        ["only"],
        ["sessionid=abc;csrftoken=def ;  django_language=de"],
    ],
)
def test_cookies_is_djangos(sent: list[str]) -> None:
    raw = scope()
    raw["headers"] += [(b"cookie", value.encode()) for value in sent]

    assert asgi.cookies(raw) == django_request(raw).COOKIES


@pytest.mark.parametrize(
    ("cookie", "accept"),
    [
        (None, None),
        ("de", None),
        (None, "de-DE,de;q=0.9,en;q=0.5"),
        (None, "fr-FR,fr;q=0.9"),
        ("xx", "de"),
        ("en", "de"),
        ("de-at", None),
        (None, "*"),
        (None, "garbage;;q=x"),
    ],
)
def test_language_is_djangos(cookie: str | None, accept: str | None) -> None:
    client = Client()
    headers = {} if accept is None else {"accept-language": accept}
    if cookie is not None:
        client.cookies["django_language"] = cookie
        headers["cookie"] = f"django_language={cookie}"
    with override_settings(ALLOWED_HOSTS=["testserver"]):
        answer = client.get(PAGE, headers={k: v for k, v in headers.items() if k != "cookie"})
        mirrored = asgi.language(scope(headers=headers))

    assert answer.headers["Content-Language"] == mirrored


def test_session_user_is_djangos() -> None:
    buyer = make_buyer()
    signed_in, changed = Client(), Client()
    signed_in.force_login(buyer)
    changed.force_login(make_buyer())
    changed_user_key = changed.cookies["sessionid"].value
    other = changed.get("/api/me")  # before the password changes: in
    changed_user = other.json()["username"]
    from_db = type(buyer).objects.get(username=changed_user)
    from_db.set_password("another horse entirely")
    from_db.save()  # its sessions' hash no longer matches: out, as AuthenticationMiddleware says
    key = signed_in.cookies["sessionid"].value

    with override_settings(ALLOWED_HOSTS=["testserver"]):
        djangos = {
            "in": signed_in.get("/api/me").status_code,
            "changed": changed.get("/api/me").status_code,
        }
    mirrored = asgi.session_users([key, changed_user_key, "no-such-session"])

    assert djangos == {"in": 200, "changed": 401}
    assert mirrored == {key: buyer.pk}


TOKEN = "A" * 32  # a CSRF secret as the cookie carries it


@pytest.mark.parametrize(
    ("cookie", "header", "origin"),
    [
        (None, None, "https://testserver"),  # no token at all
        (TOKEN, TOKEN, "https://testserver"),  # the page's token, from the shop's own origin
        (TOKEN, "B" * 32, "https://testserver"),  # a token that is not the cookie's
        (TOKEN, None, "https://testserver"),  # the cookie alone
        (TOKEN, TOKEN, "https://evil.example"),  # another site's page
        (TOKEN, TOKEN, None),  # no Origin: the Referer check over HTTPS
    ],
)
def test_csrf_is_djangos(cookie: str | None, header: str | None, origin: str | None) -> None:
    sent: dict[str, str] = {}
    if header is not None:
        sent["x-csrftoken"] = header
    if origin is not None:
        sent["origin"] = origin
    client = Client(enforce_csrf_checks=True)
    if cookie is not None:
        client.cookies["csrftoken"] = cookie
    raw = scope("/accounts/logout/", method="POST", scheme="https", headers=sent)
    if cookie is not None:
        raw["headers"].append((b"cookie", f"csrftoken={cookie}".encode()))

    with override_settings(ALLOWED_HOSTS=["testserver"]):
        answer = client.post("/accounts/logout/", secure=True, headers=sent)
        mirrored = asgi.csrf_failure_of(raw, b"")

    assert (mirrored is not None) == (answer.status_code == 403), (answer.status_code, mirrored)


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
    raw = scope()
    raw["headers"] += list(headers)
    request = django_request(raw)

    for name in (b"authorization", b"x-admission-token"):
        assert asgi.header(raw, name) == request.headers.get(name.decode()), name


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
def test_bearer_is_djangos(values: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    raw = scope()
    raw["headers"] += [(b"authorization", value.encode()) for value in values]
    asked: list[str] = []

    def authenticate(request: object, bearer_token: str) -> None:
        asked.append(bearer_token)

    monkeypatch.setattr(core_api, "authenticate", authenticate)  # the token Django is asked about
    with contextlib.suppress(Unauthenticated):
        core_api.bearer_user(django_request(raw))

    assert asgi.bearer(raw) == (asked[0] if asked else None)


@pytest.mark.parametrize(
    "slug",
    ["drop", "Drop-2_b", "a" * 80, "a" * 81, "", "dr op", "dröp", "drop.json", "drop\x00", "-", "__", "%41"],
)
def test_slug_is_djangos(slug: str) -> None:
    try:
        resolved = resolve(f"/api/drops/{slug}").url_name == "api-drop"  # not the API's catch-all 404
    except Resolver404:
        resolved = False

    # Django's converter has no length: a longer slug resolves but names no drop (Drop.slug: 80)
    assert bool(asgi.SLUG.fullmatch(slug)) == (resolved and len(slug) <= 80), slug
