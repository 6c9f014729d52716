"""3-D Secure against localstripe: a card whose bank asks for authentication is challenged, and the
challenge passes, fails or is abandoned.

What the buyer's browser does is done here over HTTP, as localstripe's Stripe.js stand-in does it:
the card goes to localstripe for a token, our fallback confirms the intent (localstripe answers
`requires_action`), and the challenge's answer is localstripe's own `_authenticate` (its modal's
"Complete" or "Fail authentication"). localstripe sends no event for an authorisation of a
manual-capture intent nor for a failed challenge: those are Stripe's documented
`payment_intent.amount_capturable_updated` and `payment_intent.payment_failed` around the intent
localstripe holds, signed as Stripe signs (README, "localstripe").
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest
from django.db import connection
from django.test import Client
from pytest_django import Settings

from checkout import failures, services
from checkout.models import Order, Payment, WebhookEvent
from holds import services as holds
from holds.counts import invariant
from holds.models import Hold
from tests.checkout.helpers import stripe_api_at, stripe_event, stripe_signature
from tests.conftest import STRIPE_PUBLISHABLE_KEY, STRIPE_SECRET_KEY, STRIPE_WEBHOOK_SECRET
from tests.factories import make_buyer, make_drop

pytestmark = pytest.mark.django_db(transaction=True)

CHALLENGED = "4000002760003184"  # Stripe's test card that always asks for 3-D Secure
WEBHOOK = "/checkout/webhooks/stripe"


@pytest.fixture
def on_stripe(settings: Settings, localstripe: str) -> Iterator[str]:
    settings.PAYMENT_PROVIDER = "stripe"
    settings.STRIPE_SECRET_KEY = STRIPE_SECRET_KEY
    settings.STRIPE_PUBLISHABLE_KEY = STRIPE_PUBLISHABLE_KEY
    settings.STRIPE_WEBHOOK_SECRET = STRIPE_WEBHOOK_SECRET
    with stripe_api_at(settings, localstripe):
        yield localstripe


def at_stripe(base: str, path: str) -> dict:
    return httpx.get(f"{base}{path}", headers={"Authorization": f"Bearer {STRIPE_SECRET_KEY}"}).json()


def card_token(base: str, number: str) -> str:
    """What Stripe.js's createToken sends, from the browser straight to Stripe (never to us)."""
    card = {"number": number, "exp_month": "12", "exp_year": "34", "cvc": "123"}
    data = {f"card[{k}]": v for k, v in card.items()} | {"key": STRIPE_PUBLISHABLE_KEY}
    return str(httpx.post(f"{base}/v1/tokens", data=data).json()["id"])


def authenticate(base: str, intent: dict, *, success: bool) -> None:
    """The buyer answers the bank's challenge (localstripe's stand-in for the issuer's page)."""
    answer = httpx.post(
        f"{base}/v1/payment_intents/{intent['id']}/_authenticate?success={str(success).lower()}",
        content=json.dumps({"key": STRIPE_PUBLISHABLE_KEY, "client_secret": intent["client_secret"]}),
    )
    assert answer.status_code == 200, answer.text


def deliver(kind: str, intent: dict) -> str:
    """Stripe's event about the intent, signed, to our webhook; then the saga's task, in-process."""
    body = stripe_event(kind, intent)
    answer = Client().post(
        WEBHOOK, body, content_type="application/json", HTTP_STRIPE_SIGNATURE=stripe_signature(body)
    )
    assert answer.status_code == 200, answer.content
    event_id = json.loads(body)["id"]
    return services.process_event(event_pk=WebhookEvent.objects.get(event_id=event_id).pk)


def challenged(slug: str, name: str, *, hold_ends_in: float | None = None) -> tuple[Client, Payment, dict]:
    """A buyer's hold, paid with the card that asks for 3-D Secure, up to the bank's challenge."""
    drop = make_drop(slug=slug, quantity=1, hold_seconds=60)
    buyer = make_buyer(name)
    hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=1, idempotency_key="k").hold
    if hold_ends_in is not None:  # the buyer presses "pay" with the hold about to run out
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE holds_hold SET expires_at = now() + make_interval(secs => %s) WHERE id = %s",
                [hold_ends_in, hold.pk],
            )
    payment = services.start_payment(hold_id=hold.pk, buyer_id=buyer.pk).payment
    client = Client()
    client.force_login(buyer)
    answer = client.post(
        f"/checkout/stripe/{payment.session_id}/card", {"token": card_token(stripe_base(), CHALLENGED)}
    )
    assert answer.status_code == 200, answer.content
    assert answer.json() == {"authorised": False, "challenge": True}
    intent = at_stripe(stripe_base(), f"/v1/payment_intents/{payment.session_id}")
    # the bank has not said yes: nothing is authorised, let alone charged
    assert intent["status"] == "requires_action" and intent["latest_charge"] is None
    return client, payment, intent


def stripe_base() -> str:
    from django.conf import settings

    return str(settings.STRIPE_API_BASE)


def test_a_challenged_card_passes_and_the_order_confirms(on_stripe: str) -> None:
    client, payment, intent = challenged("tds-pass", "ines")
    page = f"/checkout/stripe/{payment.session_id}"
    # reloaded mid-challenge, the pay page resumes it instead of asking for a card again
    shown = client.get(page).content.decode()
    assert 'data-challenge="1"' in shown and intent["client_secret"] in shown
    assert 'id="payment-element"' not in shown

    authenticate(on_stripe, intent, success=True)
    intent = at_stripe(on_stripe, f"/v1/payment_intents/{payment.session_id}")
    assert intent["status"] == "requires_capture"

    assert deliver("payment_intent.amount_capturable_updated", intent) == "confirmed"
    order = Order.objects.get()
    assert order.state == "confirmed" and Hold.objects.get().state == "sold"
    assert Payment.objects.get().state == "capture_pending"


def test_a_failed_challenge_charges_nothing_says_so_and_the_unit_returns_at_expiry(on_stripe: str) -> None:
    client, payment, intent = challenged("tds-fail", "jonas")

    authenticate(on_stripe, intent, success=False)
    intent = at_stripe(on_stripe, f"/v1/payment_intents/{payment.session_id}")
    assert intent["status"] == "requires_payment_method" and intent["latest_charge"] is None
    assert intent["last_payment_error"]["code"] == "payment_intent_authentication_failure"
    # localstripe sends no event here; Stripe sends payment_intent.payment_failed
    assert deliver("payment_intent.payment_failed", intent) == "declined"

    order = Order.objects.get()
    assert (order.state, order.failure_reason) == ("failed", failures.NOT_AUTHENTICATED)
    assert Payment.objects.get().state == "failed" and Hold.objects.get().state == "held"  # try again
    page = client.get(f"/checkout/stripe/{payment.session_id}").content.decode()
    assert "did not confirm this payment" in page and "payment-form" not in page
    # the hold's normal fate: at its end the unit goes back on sale
    expire_the_hold()
    assert Hold.objects.get().state == "expired"
    assert (invariant(drop_id=order.drop_id).available, invariant(drop_id=order.drop_id).drift) == (1, 0)
    after = at_stripe(on_stripe, f"/v1/payment_intents/{payment.session_id}")
    assert after["latest_charge"] is None  # never charged


def test_an_abandoned_challenge_charges_nothing_and_a_late_answer_is_voided(on_stripe: str) -> None:
    _client, payment, intent = challenged("tds-abandon", "karin")

    # the buyer closes the tab at the bank's page: the hold runs out, the safety net fails the order
    expire_the_hold()
    assert services.fail_abandoned_orders() == 1
    order = Order.objects.get()
    assert (order.state, order.failure_reason) == ("failed", failures.ABANDONED)
    assert invariant(drop_id=order.drop_id).available == 1 and Hold.objects.get().state == "expired"
    assert at_stripe(on_stripe, f"/v1/payment_intents/{payment.session_id}")["status"] == "requires_action"

    # and if the buyer comes back and passes the challenge after all, the late authorisation is voided
    authenticate(on_stripe, intent, success=True)
    intent = at_stripe(on_stripe, f"/v1/payment_intents/{payment.session_id}")
    assert deliver("payment_intent.amount_capturable_updated", intent) == "too_late_voiding"
    assert services.settle_payment(payment_pk=payment.pk) == "voided"
    assert at_stripe(on_stripe, f"/v1/payment_intents/{payment.session_id}")["status"] == "canceled"
    assert Order.objects.get().state == "failed" and invariant(drop_id=order.drop_id).available == 1


def test_the_holds_one_extension_covers_a_challenge(on_stripe: str) -> None:
    # the buyer presses "pay" two seconds before the hold would end; the challenge takes longer
    _client, payment, intent = challenged("tds-slow", "lena", hold_ends_in=2)
    hold = Hold.objects.get()
    started_at = Payment.objects.get().created_at
    assert hold.extended and (hold.expires_at - started_at).total_seconds() > 50
    time.sleep(2.5)  # past the hold's first end, still in its one extension

    authenticate(on_stripe, intent, success=True)
    intent = at_stripe(on_stripe, f"/v1/payment_intents/{payment.session_id}")
    assert deliver("payment_intent.amount_capturable_updated", intent) == "confirmed"
    assert Order.objects.get().state == "confirmed" and Hold.objects.get().state == "sold"


def expire_the_hold() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE holds_hold SET created_at = now() - interval '1 hour',"
            " expires_at = now() - interval '1 s' WHERE state = 'held'"
        )
    holds.sweep_expired()
