"""One contract, both providers: the simulator's process and Stripe's library against localstripe's.

Each test runs once per provider against real processes (the provider, daphne, a Celery worker)
and real PostgreSQL. What a provider sees is read from the provider itself: the simulator's
counters, localstripe's intent, charge and refunds.

localstripe sends no event when a manual-capture intent is authorised (real Stripe sends
payment_intent.amount_capturable_updated) and none for refunds: those events are built here as
Stripe's documentation describes them, around the intent localstripe holds, and signed with
Stripe's scheme. Its payment_intent.payment_failed and payment_intent.succeeded are its own.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from django.db import connection

from checkout.models import Order, Payment, WebhookEvent
from checkout.providers.base import PaymentProvider, PermanentProviderError
from checkout.providers.simulated import SimulatedProvider
from checkout.providers.stripe import StripeProvider
from holds import services as holds
from tests.checkout.helpers import (
    buyer_token,
    provider_config,
    provider_session,
    reserve_and_start_paying,
    stripe_event,
    stripe_signature,
    wait_until,
)
from tests.conftest import PROVIDER_SECRET, STRIPE_SECRET_KEY, STRIPE_WEBHOOK_SECRET, WEBHOOK_SECRET, Worker
from tests.factories import make_drop

pytestmark = pytest.mark.django_db(transaction=True)


@dataclass
class Stack:
    """One provider's processes and how a test drives and reads it."""

    name: str
    provider_url: str
    shop: str  # the daphne whose buyers pay with this provider
    adapter: PaymentProvider

    # -- the buyer pays; the authorisation's webhook reaches the shop `copies` times ---------------
    def authorise(self, session_id: str, redirect_url: str, *, copies: int = 2, late: float = 0) -> None:
        if self.name == "simulated":
            provider_config(self.provider_url, duplicates=copies, late_seconds=late)
            answer = httpx.post(redirect_url, data={"action": "pay"}, timeout=10)
            assert answer.status_code in (200, 303), answer.text
            return
        self.stripe("POST", f"/v1/payment_intents/{session_id}", {"payment_method": "pm_card_visa"})
        assert (
            self.stripe("POST", f"/v1/payment_intents/{session_id}/confirm")["status"] == "requires_capture"
        )
        if late:
            return  # the test delivers it itself once the hold has ended
        self.deliver_authorisation(session_id, copies=copies)

    def deliver_authorisation(self, session_id: str, *, copies: int) -> None:
        if self.name == "simulated":
            return  # the simulator delivers late by itself (late_seconds)
        body = stripe_event("payment_intent.amount_capturable_updated", self.intent(session_id))
        for _ in range(copies):  # the same event id each time: a replay
            answer = self.post_webhook(body, {"Stripe-Signature": stripe_signature(body)})
            assert answer.status_code == 200, answer.text

    def post_webhook(self, body: bytes, headers: dict[str, str]) -> httpx.Response:
        headers = {"content-type": "application/json", **headers}
        return httpx.post(f"{self.shop}/checkout/webhooks/{self.name}", content=body, headers=headers)

    def forged(self, body: bytes) -> dict[str, str]:
        if self.name == "simulated":
            return {"X-Floodgate-Signature": f"t={int(time.time())},v1={'0' * 64}"}
        return {"Stripe-Signature": stripe_signature(body, secret="whsec_not_ours")}

    # -- what the provider itself holds -------------------------------------------------------------
    def seen(self, session_id: str) -> dict[str, object]:
        """The state (authorized/captured/voided) and the refunds as the provider itself holds them."""
        if self.name == "simulated":
            s = provider_session(self.provider_url, session_id)
            return {"state": s["state"], "refunds": s["refunds"]}
        intent = self.intent(session_id)
        states = {"requires_capture": "authorized", "succeeded": "captured", "canceled": "voided"}
        charge = intent.get("latest_charge") or {}
        refunds = self.stripe("GET", f"/v1/refunds?payment_intent={session_id}")["data"] if charge else []
        state = states.get(intent["status"], intent["status"])
        assert (state == "captured") == bool(charge.get("captured")), intent  # one charge, captured once
        # Refunds made with a key: localstripe also records one when less than authorised is captured.
        return {"state": state, "refunds": len([r for r in refunds if r.get("metadata", {}).get("key")])}

    def intent(self, session_id: str) -> dict:
        return self.stripe("GET", f"/v1/payment_intents/{session_id}")

    def stripe(self, method: str, path: str, data: dict[str, str] | None = None) -> dict:
        answer = httpx.request(
            method,
            f"{self.provider_url}{path}",
            data=data,
            headers={"Authorization": f"Bearer {STRIPE_SECRET_KEY}"},
            timeout=10,
        )
        assert answer.status_code == 200, answer.text
        return answer.json()


# Module-scoped, so pytest runs every test on the simulator, then every test on Stripe: one worker
# serves a provider's tests in a row (shared_worker), told by the mark which one the test asks for.
@pytest.fixture(
    scope="module",
    params=[
        pytest.param("simulated", marks=pytest.mark.asks_for("celery_worker")),
        pytest.param("stripe", marks=pytest.mark.asks_for("stripe_worker")),
    ],
)
def provider_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def stack(request: pytest.FixtureRequest, provider_name: str, payment_provider: str) -> Iterator[Stack]:
    if provider_name == "simulated":
        shop = request.getfixturevalue("live_daphne")
        request.getfixturevalue("celery_worker")
        provider_config(payment_provider, latency_ms=50, failure_rate=0, duplicates=1, late_seconds=0)
        adapter: PaymentProvider = SimulatedProvider(
            base_url=payment_provider, secret=PROVIDER_SECRET, webhook_secret=WEBHOOK_SECRET
        )
        yield Stack("simulated", payment_provider, shop, adapter)
        return
    localstripe = request.getfixturevalue("localstripe")
    shop = request.getfixturevalue("stripe_daphne")
    worker: Worker = request.getfixturevalue("stripe_worker")
    assert worker.process is not None
    adapter = StripeProvider(
        secret_key=STRIPE_SECRET_KEY, webhook_secret=STRIPE_WEBHOOK_SECRET, api_base=localstripe
    )
    yield Stack("stripe", localstripe, shop, adapter)


def paying(stack: Stack, slug: str, name: str) -> tuple[int, dict]:
    make_drop(slug=slug, quantity=2, buckets=1, price_minor=4900)
    return reserve_and_start_paying(stack.shop, buyer_token(name), slug)


def payment_of(started: dict) -> Payment:
    return Payment.objects.get(order_id=started["order"]["id"])


def test_authorise_capture_refund_each_twice_and_the_provider_sees_one(stack: Stack) -> None:
    _hold, started = paying(stack, f"contract-{stack.name}-a", f"ann-{stack.name}")
    payment = payment_of(started)
    assert payment.session_id  # the provider's session, made when paying started
    assert payment.provider == stack.name
    assert started["redirect_url"].startswith(stack.shop if stack.name == "stripe" else stack.provider_url)

    stack.authorise(payment.session_id, started["redirect_url"], copies=2)

    # the replayed authorisation is applied once: confirmed, captured once at the provider
    wait_until(lambda: payment_of(started).state == "captured")
    assert Order.objects.get(pk=started["order"]["id"]).state == "confirmed"
    applied = WebhookEvent.objects.filter(provider=stack.name, type="payment.authorized")
    outcomes = sorted(e.outcome for e in applied if e.facts.get("session_id") == payment.session_id)
    # localstripe's own payment_intent.succeeded after the capture is a second authorisation: ignored
    assert outcomes[0] == "confirmed" and all(o.startswith("ignored_") for o in outcomes[1:]), outcomes
    stack.adapter.capture(session_id=payment.session_id)  # again: a success without effect
    assert stack.seen(payment.session_id) == {"state": "captured", "refunds": 0}
    if stack.name == "simulated":  # both captures reached it; the second changed nothing
        assert provider_session(stack.provider_url, payment.session_id)["captures"] == 2

    first = stack.adapter.refund(session_id=payment.session_id, amount_minor=1000, currency="EUR", key="r-1")
    again = stack.adapter.refund(session_id=payment.session_id, amount_minor=1000, currency="EUR", key="r-1")
    assert first == again and first.state == "succeeded" and first.refund_id
    rest = stack.adapter.refund(session_id=payment.session_id, amount_minor=3900, currency="EUR", key="r-2")
    assert rest.refund_id != first.refund_id
    with pytest.raises(PermanentProviderError):  # partial refunds add up to at most the capture
        stack.adapter.refund(session_id=payment.session_id, amount_minor=1, currency="EUR", key="r-3")
    assert stack.seen(payment.session_id)["refunds"] == 2
    if stack.name == "simulated":
        session = provider_session(stack.provider_url, payment.session_id)
        assert (session["refund_calls"], session["refunded_minor"]) == (3, 4900)


def test_void_twice_is_one_void_and_a_voided_payment_cannot_be_captured_or_refunded(stack: Stack) -> None:
    _hold, started = paying(stack, f"contract-{stack.name}-v", f"val-{stack.name}")
    payment = payment_of(started)
    assert payment.session_id  # the provider's session, made when paying started
    with pytest.raises(PermanentProviderError):  # nothing captured yet, nothing to refund
        stack.adapter.refund(session_id=payment.session_id, amount_minor=100, currency="EUR", key="v-0")
    stack.authorise(session := payment.session_id, started["redirect_url"], copies=0)
    wait_until(lambda: stack.seen(session)["state"] == "authorized")

    stack.adapter.void(session_id=payment.session_id)
    stack.adapter.void(session_id=payment.session_id)
    assert stack.seen(payment.session_id) == {"state": "voided", "refunds": 0}
    with pytest.raises(PermanentProviderError):
        stack.adapter.capture(session_id=payment.session_id)
    with pytest.raises(PermanentProviderError):
        stack.adapter.refund(session_id=payment.session_id, amount_minor=100, currency="EUR", key="v-1")


def test_a_late_authorisation_after_the_hold_ended_is_voided_at_the_provider(stack: Stack) -> None:
    slug = f"contract-{stack.name}-l"
    hold_id, started = paying(stack, slug, f"lou-{stack.name}")
    payment = payment_of(started)
    assert payment.session_id  # the provider's session, made when paying started
    stack.authorise(payment.session_id, started["redirect_url"], copies=1, late=3)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE holds_hold SET created_at = now() - interval '1 hour',"
            " expires_at = now() - interval '1 s'"
            " WHERE id = %s",
            [hold_id],
        )
    assert holds.reclaim_expired(drop_id=payment.order.drop_id) == 1
    stack.deliver_authorisation(payment.session_id, copies=2)

    wait_until(lambda: payment_of(started).state == "voided")
    order = Order.objects.get(pk=started["order"]["id"])
    assert order.state == "failed" and order.refunded
    assert stack.seen(payment.session_id) == {"state": "voided", "refunds": 0}
    assert [e.outcome for e in WebhookEvent.objects.filter(type="payment.authorized")].count(
        "too_late_voiding"
    ) == 1


def test_a_forged_signature_is_400_and_changes_nothing(stack: Stack) -> None:
    _hold, started = paying(stack, f"contract-{stack.name}-f", f"fay-{stack.name}")
    payment = payment_of(started)
    assert payment.session_id  # the provider's session, made when paying started
    if stack.name == "stripe":
        body = stripe_event("payment_intent.amount_capturable_updated", stack.intent(payment.session_id))
    else:
        body = json.dumps(
            {
                "id": "evt_forged",
                "type": "payment.authorized",
                "session_id": payment.session_id,
                "reference": str(payment.reference),
                "amount_minor": 4900,
                "currency": "EUR",
            }
        ).encode()
    answer = stack.post_webhook(body, stack.forged(body))

    assert answer.status_code == 400, answer.text
    time.sleep(0.5)
    # Counted by this event and this payment, not in all: an earlier test's late delivery (three
    # seconds late by design) may land in these seconds, genuinely signed.
    assert not WebhookEvent.objects.filter(event_id=json.loads(body)["id"]).exists()
    assert not WebhookEvent.objects.filter(facts__session_id=payment.session_id).exists()
    assert payment_of(started).state == "pending"
