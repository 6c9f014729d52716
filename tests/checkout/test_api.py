"""The checkout API and pages: only your own holds and orders, honest answers, nothing half made."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from checkout.models import Order, Payment
from holds import services as holds
from holds.models import Hold
from shop.models import ApiToken, Drop
from tests.conftest import PROVIDER_SECRET
from tests.factories import make_drop

pytestmark = pytest.mark.django_db

UNREACHABLE = "http://127.0.0.1:1"


def bearer(username: str) -> dict[str, Any]:  # the test client's WSGI extras (typed Any)
    user = get_user_model().objects.create_user(username)  # no password: no slow hashing
    ApiToken.objects.create(user=user, digest=ApiToken.digest_of(f"token-{username}"))
    return {"HTTP_AUTHORIZATION": f"Bearer token-{username}"}


def buyer_of(auth: dict[str, str]) -> int:
    token = auth["HTTP_AUTHORIZATION"].removeprefix("Bearer ")
    return ApiToken.objects.get(digest=ApiToken.digest_of(token)).user_id


def hold_for(auth: dict[str, str], drop: Drop) -> Hold:
    return holds.reserve(drop=drop, buyer_id=buyer_of(auth), quantity=1, idempotency_key="k").hold


def pay(hold_id: object, auth: dict[str, Any]):
    return Client().post(f"/api/holds/{hold_id}/payment", **auth)


@pytest.fixture
def provider(settings, payment_provider: str) -> str:
    """The simulated provider, reset to answering at once and never declining."""
    answer = httpx.post(
        f"{payment_provider}/api/config",
        json={"latency_ms": 0, "failure_rate": 0, "duplicates": 1, "late_seconds": 0},
        headers={"Authorization": f"Bearer {PROVIDER_SECRET}"},
    )
    answer.raise_for_status()
    settings.PAYMENT_PROVIDER_URL = payment_provider
    return payment_provider


def test_paying_for_someone_elses_hold_or_a_garbage_id_is_404(provider: str) -> None:
    drop = make_drop(quantity=5)
    hold = hold_for(bearer("owner"), drop)
    thief = bearer("thief")

    answers = [
        pay(hold.pk, thief),
        pay("not-a-number", thief),
        pay("12abc", thief),
        pay(hold.pk + 1000, thief),
        pay("99999999999999999999", thief),
        pay("%C2%B2", thief),
    ]

    assert [(a.status_code, a.json()["error"]) for a in answers] == [(404, "not_found")] * 6
    assert not Order.objects.exists() and not Payment.objects.exists()
    assert Hold.objects.get(pk=hold.pk).extended is False


@pytest.mark.parametrize("ending", ["released", "expired", "expired_and_reclaimed"])
def test_paying_for_a_hold_that_ended_is_409_and_creates_nothing(provider: str, ending: str) -> None:
    drop = make_drop(quantity=5)
    auth = bearer("late")
    hold = hold_for(auth, drop)
    if ending == "released":
        assert holds.release(hold_id=hold.pk, buyer_id=buyer_of(auth))
    else:
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE holds_hold SET created_at = now() - interval '1 hour',"
                " expires_at = now() - interval '1 s' WHERE id = %s",
                [hold.pk],
            )
        if ending == "expired_and_reclaimed":
            assert holds.reclaim_expired(drop_id=drop.pk) == 1

    answer = pay(hold.pk, auth)

    assert answer.status_code == 409, answer.content
    assert answer.json()["error"] == "hold_not_active" and answer.json()["detail"]
    assert not Order.objects.exists() and not Payment.objects.exists()


def test_an_unreachable_provider_is_503_and_the_hold_waits_for_a_retry(settings, provider: str) -> None:
    drop = make_drop(quantity=5)
    auth = bearer("patient")
    hold = hold_for(auth, drop)
    settings.PAYMENT_PROVIDER_URL = UNREACHABLE

    refused = pay(hold.pk, auth)

    assert refused.status_code == 503, refused.content
    assert refused.json()["error"] == "payment_unavailable" and refused.json()["detail"]
    assert int(refused["Retry-After"]) >= 1
    assert Hold.objects.get(pk=hold.pk).state == "held"
    assert list(Payment.objects.values_list("state", flat=True)) == ["failed"]

    # when the provider answers again, the same hold can be paid
    settings.PAYMENT_PROVIDER_URL = provider
    started = pay(hold.pk, auth)

    assert started.status_code == 202, started.content
    body = started.json()
    assert body["state"] == "pending" and body["redirect_url"].startswith(provider)
    assert body["order"]["hold"] == hold.pk and body["order"]["state"] == "pending"
    assert Hold.objects.get(pk=hold.pk).state == "held"
    assert Payment.objects.filter(state="pending").count() == 1


def test_a_second_start_while_paying_returns_the_same_payment(provider: str) -> None:
    drop = make_drop(quantity=5)
    auth = bearer("clicker")
    hold = hold_for(auth, drop)

    first = pay(hold.pk, auth)
    second = pay(hold.pk, auth)

    assert first.status_code == second.status_code == 202
    assert second.json()["payment"] == first.json()["payment"]
    assert second.json()["redirect_url"] == first.json()["redirect_url"]
    assert Payment.objects.count() == 1 and Order.objects.count() == 1
    assert Payment.objects.get().session_id in first.json()["redirect_url"]


def test_an_attempt_left_half_open_by_a_dead_process_does_not_block_paying(provider: str) -> None:
    # given an attempt whose process died between writing the payment and opening its session
    drop = make_drop(quantity=5)
    auth = bearer("stranded")
    hold = hold_for(auth, drop)
    order = Order.objects.create(
        hold=hold, buyer_id=buyer_of(auth), drop=drop, quantity=1, amount_minor=4900, currency="EUR"
    )
    stale = Payment.objects.create(order=order, provider="simulated", amount_minor=4900, currency="EUR")
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE checkout_payment SET created_at = now() - interval '10 minutes',"
            " updated_at = now() - interval '10 minutes' WHERE id = %s",
            [stale.pk],
        )

    answer = pay(hold.pk, auth)

    assert answer.status_code == 202, answer.content
    assert answer.json()["payment"] != stale.pk and answer.json()["redirect_url"]


def test_orders_lists_only_the_buyers_own(provider: str) -> None:
    drop = make_drop(quantity=5)
    mine, theirs = bearer("mine"), bearer("theirs")
    my_order = pay(hold_for(mine, drop).pk, mine).json()["order"]
    their_order = pay(hold_for(theirs, drop).pk, theirs).json()["order"]

    listed = Client().get("/api/orders", **mine)
    own = Client().get(f"/api/orders/{my_order['id']}", **mine)
    other = Client().get(f"/api/orders/{their_order['id']}", **mine)

    assert listed.status_code == 200
    assert [o["id"] for o in listed.json()["orders"]] == [my_order["id"]]
    assert own.status_code == 200 and own.json() == my_order
    assert other.status_code == 404 and other.json()["error"] == "not_found"


@pytest.mark.parametrize(
    "garbage",
    [
        "abc",
        "1x",
        "-1",
        "0",
        "%20",
        "99999999999",
        "99999999999999999999",
        "%D9%A1",
        "%C2%B2",
    ],
)
def test_a_garbage_order_id_is_404(garbage: str) -> None:
    answer = Client().get(f"/api/orders/{garbage}", **bearer("curious"))

    assert answer.status_code == 404, answer.content
    assert answer.json()["error"] == "not_found"


@pytest.mark.parametrize(
    ("method", "path"),
    [("get", "/api/orders"), ("get", "/api/orders/1"), ("post", "/api/holds/1/payment")],
)
def test_anonymous_is_401(method: str, path: str) -> None:
    answer = getattr(Client(), method)(path)

    assert answer.status_code == 401
    assert answer.json()["error"] == "unauthenticated"


def test_order_pages_need_a_login_and_show_only_your_own(provider: str) -> None:
    drop = make_drop(quantity=5)
    mine, theirs = bearer("page-mine"), bearer("page-theirs")
    my_order = Order.objects.get(pk=pay(hold_for(mine, drop).pk, mine).json()["order"]["id"])
    their_order = Order.objects.get(pk=pay(hold_for(theirs, drop).pk, theirs).json()["order"]["id"])

    anonymous = Client().get("/orders/")
    anonymous_order = Client().get(f"/orders/{my_order.pk}/")
    client = Client()
    client.force_login(my_order.buyer)

    assert anonymous.status_code == anonymous_order.status_code == 302
    assert anonymous["Location"].startswith("/accounts/login/")
    listed = client.get("/orders/")
    assert listed.status_code == 200
    assert f"/orders/{my_order.pk}/" in listed.text and f"/orders/{their_order.pk}/" not in listed.text
    assert client.get(f"/orders/{my_order.pk}/").status_code == 200
    assert client.get(f"/orders/{their_order.pk}/").status_code == 404


def test_a_provider_page_off_the_allowed_origins_is_never_given_to_the_buyer(provider: str, settings) -> None:
    # given a provider whose pages are not where the shop was told they are
    settings.PAYMENT_PROVIDER_PUBLIC_PREFIXES = ("https://pay.example",)
    auth = bearer("careful")
    hold = hold_for(auth, make_drop(quantity=5))

    refused = pay(hold.pk, auth)

    assert refused.status_code == 503, refused.content
    assert refused.json()["error"] == "payment_unavailable" and "redirect_url" not in refused.json()
    assert list(Payment.objects.values_list("state", "redirect_url")) == [("failed", "")]
    assert Hold.objects.get(pk=hold.pk).state == "held"
