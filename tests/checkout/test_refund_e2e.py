"""Refunds and cancels over HTTP, end to end: daphne, a real Celery worker and the provider's process."""

from __future__ import annotations

import httpx
import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from checkout import outbox
from checkout.models import Order, OutboxMessage, Payment, Refund
from holds.counts import invariant
from shop.models import ApiToken
from tests.checkout.helpers import (
    buyer_token,
    pay_at_provider,
    provider_config,
    provider_session,
    reserve_and_start_paying,
    wait_until,
)
from tests.conftest import Worker
from tests.factories import make_drop, staff

pytestmark = pytest.mark.django_db(transaction=True)


def paid(base: str, slug: str, name: str) -> Order:
    """A unit bought through the whole saga: held, paid at the provider, confirmed and captured."""
    token = buyer_token(name)
    _, started = reserve_and_start_paying(base, token, slug)
    pay_at_provider(started["redirect_url"])
    order = Order.objects.get(pk=started["order"]["id"])
    wait_until(lambda: Payment.objects.get(order=order).state == "captured")
    return order


def merchant_api(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture(autouse=True)
def provider_defaults(payment_provider: str, settings) -> None:
    provider_config(payment_provider, latency_ms=50, failure_rate=0, duplicates=1, late_seconds=0)
    settings.PAYMENT_PROVIDER_URL = payment_provider  # the merchant's requests run in this process


def test_a_merchant_refunds_over_the_api_the_provider_refunds_once_and_the_unit_is_back(
    live_daphne: str, payment_provider: str, celery_worker: Worker, roles: None
) -> None:
    drop = make_drop(slug="refund-api", quantity=2, per_buyer_limit=1)
    order = paid(live_daphne, "refund-api", "rhea")
    merchant = merchant_api(staff("mona", "Merchants"))
    url = f"/api/ops/orders/{order.pk}/refund"

    first = merchant.post(
        url, {"restock": True, "reason": "wrong size"}, "application/json", HTTP_IDEMPOTENCY_KEY="r1"
    )
    again = merchant.post(
        url, {"restock": True, "reason": "wrong size"}, "application/json", HTTP_IDEMPOTENCY_KEY="r1"
    )

    assert first.status_code == 201, first.content
    assert first.json()["state"] == "succeeded" and first.json()["amount_minor"] == order.amount_minor
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    session = provider_session(payment_provider, str(Payment.objects.get(order=order).session_id))
    assert session["refunded_minor"] == order.amount_minor and session["refunds"] == 1, session
    order.refresh_from_db()
    assert order.state == "refunded"
    numbers = invariant(drop_id=drop.pk)
    assert (numbers.available, numbers.sold, numbers.refunded, numbers.drift) == (2, 0, 0, 0)
    # the buyer hears of it once, through the outbox
    wait_until(
        lambda: OutboxMessage.objects.filter(topic=outbox.REFUND_TOPIC, sent_at__isnull=False).exists()
    )
    # nothing left: a third refund is refused and changes nothing
    third = merchant.post(url, {}, "application/json")
    assert third.status_code == 409 and third.json()["error"] == "not_refundable"
    assert Refund.objects.count() == 1


BAD_REFUNDS: list[object] = [
    {"quantity": 2},
    {"quantity": -1},
    {"amount_minor": -100},
    {"amount_minor": 10**9},
    {"amount_minor": "10"},
    {"restock": "no"},
    {"reason": "nul\u0000byte"},
    {"surprise": 1},
    [1, 2],
]


def test_bad_refund_requests_get_a_clear_4xx_and_change_nothing(
    live_daphne: str, celery_worker: Worker, roles: None
) -> None:
    make_drop(slug="refund-bad", quantity=1, per_buyer_limit=1)
    order = paid(live_daphne, "refund-bad", "bo")  # one paid order, every bad request against it
    merchant = merchant_api(staff("mona", "Merchants"))

    for body in BAD_REFUNDS:
        answer = merchant.post(f"/api/ops/orders/{order.pk}/refund", body, "application/json")
        assert (answer.status_code, answer.json()["error"]) == (422, "invalid"), (body, answer.content)
        assert answer.json()["detail"]
    assert not Refund.objects.exists()
    assert Order.objects.get(pk=order.pk).refunded_quantity == 0


def test_refunds_need_the_permission(roles: None) -> None:
    on_call = merchant_api(staff("otto", "On-call"))
    buyer_token("nobody")
    buyer = Client()
    buyer.force_login(ApiToken.objects.get().user)

    for client, status in [(on_call, 403), (buyer, 403), (Client(), 401)]:
        answer = client.post("/api/ops/orders/1/refund", {}, "application/json")
        assert answer.status_code == status, answer.content
    assert Group.objects.get(name="Merchants").permissions.filter(codename="refund_order").exists()
    unknown = merchant_api(staff("mona", "Merchants")).post(
        "/api/ops/orders/999999/refund", {}, "application/json"
    )
    assert unknown.status_code == 404 and unknown.json()["error"] == "not_found"
    garbage = merchant_api(staff("mina", "Merchants")).post(
        "/api/ops/orders/%C2%B2/refund", {}, "application/json"
    )
    assert garbage.status_code == 404


def test_the_merchant_refunds_in_the_admin_some_units_and_the_buyer_gets_an_email(
    live_daphne: str, celery_worker: Worker, roles: None
) -> None:
    make_drop(slug="refund-admin", quantity=1, per_buyer_limit=1)
    order = paid(live_daphne, "refund-admin", "ada")
    merchant = merchant_api(staff("mona", "Merchants"))
    page = f"/admin/checkout/order/{order.pk}/refund/"

    assert merchant.get(f"/admin/checkout/order/{order.pk}/change/").content.count(page.encode()) == 1
    refused = merchant.post(page, {"quantity": 1, "amount": "0.001", "reason": ""})
    assert refused.status_code == 200 and b"decimals" in refused.content and not Refund.objects.exists()
    done = merchant.post(page, {"quantity": 1, "amount": "10.00", "restock": "on", "reason": "scuffed box"})

    assert done.status_code == 302, done.content
    refund = Refund.objects.get()
    assert (refund.amount_minor, refund.restock, refund.state) == (1000, True, "succeeded")
    # the buyer's e-mail leaves through the outbox (the worker relays it); it says what and why
    wait_until(
        lambda: OutboxMessage.objects.filter(topic=outbox.REFUND_TOPIC, sent_at__isnull=False).exists()
    )
    body = outbox.refund_text(refund)
    assert "scuffed box" in body and "€10.00" in body
    on_call = merchant_api(staff("otto", "On-call"))
    assert on_call.get(page).status_code == 403


def test_a_buyer_cancels_over_the_api_before_paying_and_another_buyer_cannot(
    live_daphne: str, celery_worker: Worker
) -> None:
    drop = make_drop(slug="cancel-api", quantity=1, per_buyer_limit=1)
    token = buyer_token("cleo")
    _, started = reserve_and_start_paying(live_daphne, token, "cancel-api")
    order_id = started["order"]["id"]

    other = httpx.post(
        f"{live_daphne}/api/orders/{order_id}/cancel",
        headers={"Authorization": f"Bearer {buyer_token('eve')}"},
    )
    mine = httpx.post(
        f"{live_daphne}/api/orders/{order_id}/cancel", headers={"Authorization": f"Bearer {token}"}
    )
    again = httpx.post(
        f"{live_daphne}/api/orders/{order_id}/cancel", headers={"Authorization": f"Bearer {token}"}
    )

    assert other.status_code == 404
    assert mine.status_code == 200 and mine.json()["state"] == "cancelled"
    assert again.status_code == 200 and again.json()["state"] == "cancelled"
    assert invariant(drop_id=drop.pk).available == 1
    # paying at the provider now is voided, never charged
    pay_at_provider(started["redirect_url"])
    wait_until(lambda: Payment.objects.get(order_id=order_id).state == "voided")
    assert Order.objects.get(pk=order_id).state == "cancelled"
