"""A path with NUL or another control character is a 404 on every door, never a 500 (issue 43:
`GET /checkout/stripe/%00` was a 500). Driven through the real `config.asgi.application`: the edge,
the claim lane and Django, as daphne hands a request over (the path percent-decoded)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from tests.factories import make_drop
from tests.harness import call, run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_edge")]

BAD = ["\x00", "\x01", "\n", "\r", "\x1b", "\x1f", "\x7f"]

BUYER_PAGES = [
    ("GET", "/checkout/stripe/{bad}"),
    ("GET", "/checkout/stripe/{bad}/card"),
    ("POST", "/checkout/webhooks/{bad}"),
    ("GET", "/media/{bad}.png"),
    ("GET", "/drops/{bad}/"),
    ("GET", "/accounts/confirm-email/{bad}/"),
    ("GET", "/accounts/password/reset/key/{bad}-set-password/"),
    ("GET", "/no-such-page{bad}"),
]
API = [
    ("GET", "/api/drops/{bad}"),  # the edge looks at it first
    ("POST", "/api/drops/{bad}/holds"),  # the claim lane
    ("POST", "/api/drops/{bad}/queue"),  # the lane's joins
    ("GET", "/api/drops/{bad}/queue"),
    ("GET", "/api/drops/{bad}/queue/draw"),
    ("GET", "/api/holds/{bad}"),
    ("GET", "/api/orders/{bad}"),
    ("POST", "/api/orders/{bad}/cancel"),
    ("POST", "/api/ops/orders/{bad}/refund"),
    ("GET", "/api/{bad}"),
]
ADMIN = [
    ("GET", "/admin/{bad}/"),
    ("GET", "/admin/shop/drop/{bad}/change/"),
    ("GET", "/admin/checkout/order/{bad}/change/"),
    ("GET", "/admin/auth/user/{bad}/change/"),
    ("GET", "/admin/account/emailconfirmation/{bad}/change/"),
]


def logged_in(*, staff: bool) -> dict[str, str]:
    user = get_user_model().objects.create_user(
        username="admin" if staff else "buyer", password="x", is_staff=staff, is_superuser=staff
    )
    client = Client()
    client.force_login(user)
    secret = "s3cr3t" * 5 + "ab"
    return {
        "cookie": f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}; "
        f"{settings.CSRF_COOKIE_NAME}={secret}",
        "x-csrftoken": secret,
        "content-type": "application/json",
        "idempotency-key": "k1",
    }


def answers(routes: list[tuple[str, str]], headers: dict[str, str]) -> dict[str, int]:
    async def scenario() -> dict[str, int]:
        found = {}
        for method, template in routes:
            for bad in BAD:
                path = template.format(bad=bad)
                reply = await call(method, path, headers=headers, body=b"{}" if method == "POST" else b"")
                found[f"{method} {path!r}"] = reply.status
                if path.startswith("/api/"):
                    assert reply.headers["content-type"] == "application/json", path
        return found

    return run(scenario)


def test_buyer_pages_and_the_api_answer_404_for_control_characters_in_the_path() -> None:
    make_drop(slug="paths", quantity=3)
    buyer = logged_in(staff=False)

    anonymous = answers(BUYER_PAGES + API, {"content-type": "application/json"})
    found = answers(BUYER_PAGES + API, buyer) | {f"anonymous {k}": v for k, v in anonymous.items()}

    assert {k: v for k, v in found.items() if v != 404} == {}


def test_admin_pages_answer_404_for_control_characters_in_the_path() -> None:
    found = answers(ADMIN, logged_in(staff=True))

    assert {k: v for k, v in found.items() if v != 404} == {}
