"""The payment saga end to end: daphne, a real Celery worker and the provider in its own process."""

from __future__ import annotations

import time

import pytest
from django.db import connection, transaction

from checkout.models import Order, OutboxMessage, Payment, WebhookEvent
from holds import services as holds
from holds.counts import invariant
from holds.models import Hold
from tests.checkout.helpers import (
    api,
    buyer_token,
    pay_at_provider,
    provider_config,
    provider_session,
    reserve_and_start_paying,
    wait_until,
)
from tests.conftest import Worker
from tests.factories import make_buyer, make_drop

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def provider_defaults(payment_provider: str) -> None:
    provider_config(payment_provider, latency_ms=50, failure_rate=0, duplicates=1, late_seconds=0)


def test_reserve_pay_confirm_capture(live_daphne: str, payment_provider: str, celery_worker: Worker) -> None:
    drop = make_drop(slug="e2e", quantity=3, buckets=1)
    token = buyer_token("erin")

    hold_id, started = reserve_and_start_paying(live_daphne, token, "e2e")
    back = pay_at_provider(started["redirect_url"])

    order_id = started["order"]["id"]
    assert back.headers["location"] == f"{live_daphne}/orders/{order_id}/"
    wait_until(lambda: Payment.objects.get(order_id=order_id).state == "captured")
    assert Order.objects.get(pk=order_id).state == "confirmed"
    assert Hold.objects.get(pk=hold_id).state == "sold"
    numbers = invariant(drop_id=drop.pk)
    assert (numbers.available, numbers.held, numbers.sold, numbers.drift) == (2, 0, 1, 0)
    session = provider_session(payment_provider, Payment.objects.get(order_id=order_id).session_id)
    assert (session["state"], session["captures"]) == ("captured", 1)
    assert set(OutboxMessage.objects.values_list("topic", flat=True)) == {
        "order_confirmed.email",
        "order_confirmed.merchant_webhook",
    }
    with api(live_daphne, token) as client:
        assert client.get("/api/orders").json()["orders"][0]["state"] == "confirmed"


def test_the_same_webhook_twenty_times_at_once_confirms_once(
    live_daphne: str, payment_provider: str, celery_worker: Worker
) -> None:
    drop = make_drop(slug="dupes", quantity=2)
    provider_config(payment_provider, duplicates=20)
    _, started = reserve_and_start_paying(live_daphne, buyer_token("dan"), "dupes")

    pay_at_provider(started["redirect_url"])

    order_id = started["order"]["id"]
    wait_until(lambda: Payment.objects.get(order_id=order_id).state == "captured")
    session_id = Payment.objects.get(order_id=order_id).session_id
    wait_until(lambda: provider_session(payment_provider, session_id)["webhooks_sent"] == 20)
    time.sleep(1)  # let any stray duplicate task run
    assert WebhookEvent.objects.count() == 1
    assert Order.objects.filter(state="confirmed").count() == 1
    assert provider_session(payment_provider, session_id)["captures"] == 1
    assert invariant(drop_id=drop.pk).sold == 1 and invariant(drop_id=drop.pk).drift == 0


def test_late_webhook_after_expiry_is_voided_and_the_unit_stays_with_its_new_buyer(
    live_daphne: str, payment_provider: str, celery_worker: Worker
) -> None:
    drop = make_drop(slug="late", quantity=1, buckets=1)
    provider_config(payment_provider, late_seconds=3)
    hold_id, started = reserve_and_start_paying(live_daphne, buyer_token("lou"), "late")
    pay_at_provider(started["redirect_url"])

    # the hold runs out and is reclaimed; someone else takes the unit
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE holds_hold SET created_at = now() - interval '1 hour',"
            " expires_at = now() - interval '1 s'"
            " WHERE id = %s",
            [hold_id],
        )
    assert holds.reclaim_expired(drop_id=drop.pk) == 1
    rival = make_buyer("rival")
    theirs = holds.reserve(drop=drop, buyer_id=rival.pk, quantity=1, idempotency_key="r").hold

    # the late authorisation arrives: voided, the order failed with a reason, not sold twice
    order_id = started["order"]["id"]
    wait_until(lambda: Payment.objects.get(order_id=order_id).state == "voided")
    order = Order.objects.get(pk=order_id)
    assert order.state == "failed" and order.refunded and "not charged" in order.failure_words
    assert Hold.objects.get(pk=hold_id).state == "expired"
    assert Hold.objects.get(pk=theirs.pk).state == "held"
    session = provider_session(payment_provider, Payment.objects.get(order_id=order_id).session_id)
    assert (session["state"], session["voids"], session["captures"]) == ("voided", 1, 0)
    numbers = invariant(drop_id=drop.pk)
    assert (numbers.held, numbers.sold, numbers.drift) == (1, 0, 0)


def test_a_declined_card_keeps_the_hold_and_a_second_card_buys_it(
    live_daphne: str, payment_provider: str, celery_worker: Worker
) -> None:
    drop = make_drop(slug="declined", quantity=2)
    token = buyer_token("dee")
    hold_id, started = reserve_and_start_paying(live_daphne, token, "declined")

    # when the first card is declined
    pay_at_provider(started["redirect_url"], action="decline")

    # then the attempt failed, not the hold: the unit stays the buyer's until the hold ends
    order_id = started["order"]["id"]
    wait_until(lambda: Order.objects.get(pk=order_id).state == "failed")
    assert "declined" in Order.objects.get(pk=order_id).failure_reason
    assert Hold.objects.get(pk=hold_id).state == "held"
    assert invariant(drop_id=drop.pk).held == 1

    # when a second card is tried within the hold
    with api(live_daphne, token) as client:
        again = client.post(f"/api/holds/{hold_id}/payment")
    assert again.status_code == 202, again.text
    assert again.json()["order"]["id"] == order_id
    assert Order.objects.get(pk=order_id).state == "pending"
    pay_at_provider(again.json()["redirect_url"])

    # then the same order is confirmed and the first attempt stays failed
    wait_until(lambda: Order.objects.get(pk=order_id).state == "confirmed")
    assert Hold.objects.get(pk=hold_id).state == "sold"
    states = sorted(Payment.objects.filter(order_id=order_id).values_list("state", flat=True))
    assert states[0] in {"capture_pending", "captured"} and states[1] == "failed"
    numbers = invariant(drop_id=drop.pk)
    assert (numbers.available, numbers.held, numbers.sold, numbers.drift) == (1, 0, 1, 0)


def test_worker_killed_mid_callback_finishes_after_restart(
    live_daphne: str, payment_provider: str, celery_worker: Worker
) -> None:
    drop = make_drop(slug="killed", quantity=2)
    hold_id, started = reserve_and_start_paying(live_daphne, buyer_token("kim"), "killed")
    order_id = started["order"]["id"]

    # hold the hold row so the worker's task blocks inside its transaction, then kill it there
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT id FROM holds_hold WHERE id = %s FOR UPDATE", [hold_id])
        pay_at_provider(started["redirect_url"])
        wait_until(lambda: _blocked_on_lock(), seconds=20)
        celery_worker.kill()

    assert Order.objects.get(pk=order_id).state == "pending"  # its transaction died with it
    celery_worker.start()

    wait_until(lambda: Payment.objects.get(order_id=order_id).state == "captured", seconds=60)
    assert Order.objects.get(pk=order_id).state == "confirmed"
    assert WebhookEvent.objects.get().processed_at is not None
    session = provider_session(payment_provider, Payment.objects.get(order_id=order_id).session_id)
    assert session["captures"] == 1
    numbers = invariant(drop_id=drop.pk)
    assert (numbers.sold, numbers.held, numbers.drift) == (1, 0, 0)


def _blocked_on_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")  # activity is cached per transaction
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0] > 0
