"""A hold whose payment was authorised does not expire while its event waits for a worker.

The webhook arrives seconds before the hold would run out; no Celery worker is running, so the
task waits in the broker. The hold lasts on (the webhook pinned it), the sweeper leaves it alone,
and the web processes' cover of `checkout.sweep` applies the event: sold, confirmed, captured.
The control records the same event without the pin, as the webhook did before: the hold expires
under the buyer who paid, and the late event can only void the payment.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.db import connection
from django.test import Client

from checkout import services as checkout
from checkout.models import Order, OrderState, Payment, PaymentState, WebhookEvent
from checkout.providers.base import WebhookEvent as ProviderEvent
from checkout.providers.signing import SIGNATURE_HEADER, sign
from config.celery import app as celery_app
from holds import services as holds
from holds.counts import invariant
from holds.models import Hold
from ops import duties
from tests.conftest import PROVIDER_SECRET, WEBHOOK_SECRET
from tests.factories import expire_in, make_buyer, make_drop

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def provider(settings, payment_provider: str) -> Iterator[None]:
    """The simulated provider's real process; the broker emptied afterwards (nothing consumes the
    webhook's task here: that is the point)."""
    settings.PAYMENT_PROVIDER_URL = payment_provider
    settings.PAYMENT_PROVIDER_SECRET = PROVIDER_SECRET
    settings.PAYMENT_WEBHOOK_SECRET = WEBHOOK_SECRET
    yield
    celery_app.control.purge()


def pay_in_the_last_second(slug: str, provider: str) -> tuple[Hold, Payment]:
    """A hold about to run out whose buyer pays at the real simulator now; the simulator then
    calls the shop's webhook at PUBLIC_BASE_URL."""
    drop = make_drop(slug=slug, quantity=2)
    buyer = make_buyer()
    hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=1, idempotency_key="k").hold
    payment = checkout.start_payment(hold_id=hold.pk, buyer_id=buyer.pk).payment
    expire_in([hold.pk], 3.0)
    paid = httpx.post(f"{provider}/pay/{payment.session_id}", data={"action": "pay"}, trust_env=False)
    assert paid.status_code == 303, paid.text
    return hold, payment


def age_events(seconds: int) -> None:
    """The events were received `seconds` ago (the sweep applies those older than 30 s)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE checkout_webhookevent SET received_at = now() - make_interval(secs => %s)", [seconds]
        )


def cover_the_payment_duties() -> None:
    """What a web process runs while the worker is down (ops/duties.py): the tasks' own bodies."""
    duties.body("checkout.sweep")()
    duties.body("checkout.settle_unsettled_payments")()


def test_an_authorised_hold_outlasts_a_worker_that_is_down_and_the_web_applies_it(
    settings, payment_provider: str, live_daphne: str
) -> None:
    settings.PUBLIC_BASE_URL = live_daphne  # the simulator delivers to the real server
    hold, payment = pay_in_the_last_second("pinned", payment_provider)
    deadline = time.monotonic() + 10
    while not WebhookEvent.objects.exists():
        assert time.monotonic() < deadline, "the simulator's webhook never arrived"
        time.sleep(0.05)

    time.sleep(3.5)  # past the hold's old time; the event still waits in the broker for a worker
    assert holds.sweep_expired() == 0
    assert Hold.objects.get(pk=hold.pk).state == "held"
    assert WebhookEvent.objects.get().processed_at is None

    age_events(31)
    cover_the_payment_duties()

    assert Hold.objects.get(pk=hold.pk).state == "sold"
    order = Order.objects.get(pk=payment.order_id)
    assert (order.state, order.refunded) == (OrderState.CONFIRMED, False)
    assert Payment.objects.get(pk=payment.pk).state == PaymentState.CAPTURED
    numbers = invariant(drop_id=hold.drop_id)
    assert (numbers.sold, numbers.held, numbers.drift) == (1, 0, 0)


def test_control_without_the_pin_the_paid_hold_expires_and_the_payment_is_voided(
    settings, payment_provider: str
) -> None:
    settings.PUBLIC_BASE_URL = "http://127.0.0.1:9"  # the simulator's delivery goes nowhere
    hold, payment = pay_in_the_last_second("unpinned", payment_provider)
    event = {
        "id": f"evt_{uuid.uuid4().hex}",
        "type": "payment.authorized",
        "session_id": payment.session_id,
        "reference": str(payment.reference),
        "amount_minor": payment.amount_minor,
        "currency": payment.currency,
        "reason": "",
    }
    with connection.cursor() as cursor:  # stored as the webhook stored it before: no pin
        cursor.execute(
            "INSERT INTO checkout_webhookevent (provider, event_id, type, payload, received_at, outcome)"
            " VALUES ('simulated', %s, 'payment.authorized', %s, now(), '')",
            [event["id"], json.dumps(event)],
        )
    time.sleep(3.5)
    assert holds.sweep_expired() == 1

    age_events(31)
    cover_the_payment_duties()

    assert Hold.objects.get(pk=hold.pk).state == "expired"
    order = Order.objects.get(pk=payment.order_id)
    assert (order.state, order.refunded) == (OrderState.FAILED, True)
    assert Payment.objects.get(pk=payment.pk).state == PaymentState.VOIDED


def test_an_authorisation_for_a_hold_that_already_ended_pins_nothing(settings) -> None:
    drop = make_drop(slug="ended", quantity=2)
    buyer = make_buyer()
    hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=1, idempotency_key="k").hold
    payment = checkout.start_payment(hold_id=hold.pk, buyer_id=buyer.pk).payment
    assert holds.release(hold_id=hold.pk, buyer_id=buyer.pk)
    ended = Hold.objects.get(pk=hold.pk).expires_at
    body = json.dumps(
        {
            "id": "evt_after_the_end",
            "type": "payment.authorized",
            "session_id": payment.session_id,
            "reference": str(payment.reference),
            "amount_minor": payment.amount_minor,
            "currency": payment.currency,
            "reason": "",
            "created": int(time.time()),
        }
    ).encode()
    header = "HTTP_" + SIGNATURE_HEADER.upper().replace("-", "_")
    signed: dict[str, Any] = {header: sign(secret=WEBHOOK_SECRET, body=body)}  # the client's WSGI extras

    answer = Client().post(
        "/checkout/webhooks/simulated", data=body, content_type="application/json", **signed
    )

    assert answer.status_code == 200, answer.content
    assert Hold.objects.get(pk=hold.pk).state == "released"
    assert Hold.objects.get(pk=hold.pk).expires_at == ended


def test_an_authorisation_for_another_amount_pins_nothing() -> None:
    drop = make_drop(slug="mismatch", quantity=2)
    buyer = make_buyer()
    hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=1, idempotency_key="k").hold
    payment = checkout.start_payment(hold_id=hold.pk, buyer_id=buyer.pk).payment
    assert payment.session_id  # the provider's session, made when paying started
    before = Hold.objects.get(pk=hold.pk).expires_at
    event = ProviderEvent(
        event_id="evt_cheaper",
        type="payment.authorized",
        session_id=payment.session_id,
        reference=str(payment.reference),
        amount_minor=payment.amount_minor - 1,
        currency=payment.currency,
    )
    payload = {
        "id": "evt_cheaper",
        "type": event.type,
        "session_id": event.session_id,
        "reference": event.reference,
        "amount_minor": event.amount_minor,
        "currency": event.currency,
    }

    assert checkout.record_webhook(provider_name="simulated", event=event, payload=payload) is not None

    assert Hold.objects.get(pk=hold.pk).expires_at == before  # it will be voided: no 15 minutes more
