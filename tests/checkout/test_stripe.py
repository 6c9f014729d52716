"""The Stripe adapter and its pages: Stripe's documented event bodies, signed as Stripe signs, sent to
our webhook view; the library's requests as they leave for localstripe (a real process)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest
from django.http.response import HttpResponseBase
from django.test import Client
from pytest_django import Settings

from checkout import services
from checkout.models import Payment, WebhookEvent
from checkout.providers.base import BadWebhook, ProviderError
from checkout.providers.base import WebhookEvent as ParsedEvent
from checkout.providers.stripe import StripeProvider
from devtools.ports import free_port
from holds import services as holds
from tests.checkout.helpers import stripe_api_at, stripe_event, stripe_signature
from tests.conftest import STRIPE_PUBLISHABLE_KEY, STRIPE_SECRET_KEY, STRIPE_WEBHOOK_SECRET
from tests.factories import make_buyer, make_drop

URL = "/checkout/webhooks/stripe"


@pytest.fixture
def on_stripe(settings: Settings, localstripe: str) -> Iterator[str]:
    """This process's settings pointed at localstripe, as PAYMENT_PROVIDER=stripe would have them
    (the URLs again, so the localstripe-only card fallback is mounted as it would be there)."""
    settings.PAYMENT_PROVIDER = "stripe"
    settings.STRIPE_SECRET_KEY = STRIPE_SECRET_KEY
    settings.STRIPE_PUBLISHABLE_KEY = STRIPE_PUBLISHABLE_KEY
    settings.STRIPE_WEBHOOK_SECRET = STRIPE_WEBHOOK_SECRET
    with stripe_api_at(settings, localstripe):
        yield localstripe


def intent(**fields: object) -> dict:
    """A PaymentIntent as Stripe's API reference shows one (the fields the adapter reads, and more)."""
    return {
        "id": "pi_3MtwBwLkdIwHu7ix28a3tqPa",
        "object": "payment_intent",
        "amount": 4900,
        "amount_capturable": 4900,
        "capture_method": "manual",
        "currency": "eur",
        "metadata": {"reference": "1f0e4c1a-3a57-4c1e-9a55-b0b5e7d1a001"},
        "status": "requires_capture",
        "last_payment_error": None,
        **fields,
    }


def charge_refunded() -> dict:
    """A Charge as charge.refunded carries it (Stripe's API reference), its refunds listed."""
    return {
        "id": "ch_3MtwBwLkdIwHu7ix0snN0B15",
        "object": "charge",
        "amount": 4900,
        "amount_captured": 4900,
        "amount_refunded": 3000,  # the charge's total so far: 1000 earlier, 2000 now
        "currency": "eur",
        "payment_intent": "pi_3MtwBwLkdIwHu7ix28a3tqPa",
        "refunded": False,
        "refunds": {
            "object": "list",
            "data": [
                {"id": "re_2", "object": "refund", "amount": 2000, "metadata": {"key": "refund-7"}},
                {"id": "re_1", "object": "refund", "amount": 1000, "metadata": {"key": "refund-6"}},
            ],
            "has_more": False,
        },
    }


def parse(body: bytes, **headers: str) -> ParsedEvent:
    adapter = StripeProvider(secret_key=STRIPE_SECRET_KEY, webhook_secret=STRIPE_WEBHOOK_SECRET)
    return adapter.parse_webhook(body=body, headers=headers or {"Stripe-Signature": stripe_signature(body)})


def test_documented_events_map_onto_the_sagas() -> None:
    authorised = parse(stripe_event("payment_intent.amount_capturable_updated", intent(), event_id="evt_a"))
    assert (authorised.type, authorised.session_id, authorised.reference) == (
        "payment.authorized",
        "pi_3MtwBwLkdIwHu7ix28a3tqPa",
        "1f0e4c1a-3a57-4c1e-9a55-b0b5e7d1a001",
    )
    assert (authorised.amount_minor, authorised.currency, authorised.event_id) == (4900, "EUR", "evt_a")

    failed = intent(status="requires_payment_method", last_payment_error={"code": "card_declined"})
    declined = parse(stripe_event("payment_intent.payment_failed", failed))
    assert (declined.type, declined.reason) == ("payment.failed", "card_declined")

    refunded = parse(stripe_event("charge.refunded", charge_refunded()))
    assert (refunded.type, refunded.session_id, refunded.amount_minor) == (
        "refund.succeeded",
        "pi_3MtwBwLkdIwHu7ix28a3tqPa",
        3000,
    )
    assert (refunded.refund_id, refunded.reference, refunded.currency) == ("re_2", "refund-7", "EUR")

    refund = {
        "id": "re_9",
        "object": "refund",
        "amount": 500,
        "currency": "eur",
        "payment_intent": "pi_3MtwBwLkdIwHu7ix28a3tqPa",
        "status": "failed",
        "failure_reason": "expired_or_canceled_card",
        "metadata": {"key": "refund-8"},
    }
    lost = parse(stripe_event("refund.failed", refund))
    assert (lost.type, lost.refund_id, lost.reference, lost.reason, lost.amount_minor) == (
        "refund.failed",
        "re_9",
        "refund-8",
        "expired_or_canceled_card",
        500,
    )

    # an intent not (or no longer) authorised, and one another integration made, are not the saga's
    assert parse(stripe_event("payment_intent.succeeded", intent(status="processing"))).type == "ignored"
    assert parse(stripe_event("payment_intent.succeeded", intent(metadata={}))).type == "ignored"


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Stripe-Signature": "garbage"},
        {"Stripe-Signature": "t=1,v1=" + "0" * 64},
    ],
)
def test_unsigned_or_forged_events_are_refused(headers: dict[str, str]) -> None:
    body = stripe_event("payment_intent.amount_capturable_updated", intent())
    adapter = StripeProvider(secret_key=STRIPE_SECRET_KEY, webhook_secret=STRIPE_WEBHOOK_SECRET)
    with pytest.raises(BadWebhook):
        adapter.parse_webhook(body=body, headers=headers)


@pytest.mark.django_db
def test_the_webhook_view_records_events_once_answers_unknown_types_and_refuses_replays(
    on_stripe: str,
) -> None:
    client = Client()
    body = stripe_event("charge.refunded", charge_refunded(), event_id="evt_refunded")
    for _ in range(2):  # a duplicate delivery: recorded once
        answer = client.post(
            URL, body, content_type="application/json", headers={"Stripe-Signature": stripe_signature(body)}
        )
        assert answer.status_code == 200, answer.content
    [event] = WebhookEvent.objects.filter(provider="stripe")
    assert (event.event_id, event.type) == ("evt_refunded", "refund.succeeded")
    # the adapter's reading kept beside Stripe's own event, which is stored as received
    assert event.facts["refund_id"] == "re_2" and event.facts["amount_minor"] == 3000
    assert event.payload["data"]["object"]["id"] == "ch_3MtwBwLkdIwHu7ix0snN0B15"

    unknown = stripe_event("customer.created", {"id": "cus_1", "object": "customer"})
    answer = client.post(
        URL, unknown, content_type="application/json", headers={"Stripe-Signature": stripe_signature(unknown)}
    )
    assert answer.status_code == 200 and answer.json()["ignored"] is True

    stale = stripe_event("payment_intent.amount_capturable_updated", intent())
    old = stripe_signature(stale, at=int(time.time()) - 600)  # outside the 300 s tolerance
    answer = client.post(URL, stale, content_type="application/json", headers={"Stripe-Signature": old})
    assert answer.status_code == 400 and "signature" in answer.json()["detail"].lower()
    forged = client.post(
        URL,
        stale,
        content_type="application/json",
        headers={"Stripe-Signature": stripe_signature(stale, secret="x")},
    )
    assert forged.status_code == 400
    assert WebhookEvent.objects.count() == 1


def test_an_unreachable_stripe_is_a_retryable_provider_error() -> None:
    adapter = StripeProvider(
        secret_key=STRIPE_SECRET_KEY,
        webhook_secret=STRIPE_WEBHOOK_SECRET,
        api_base=f"http://127.0.0.1:{free_port()}",
    )
    with pytest.raises(ProviderError) as caught:
        adapter.capture(session_id="pi_123")
    assert type(caught.value) is ProviderError  # not PermanentProviderError: the saga retries


@pytest.mark.django_db(transaction=True)
def test_the_pay_page_is_the_buyers_own_and_bad_tokens_change_nothing(on_stripe: str) -> None:
    drop = make_drop(slug="stripe-page", quantity=2)
    buyer, other = make_buyer("petra"), make_buyer("olaf")
    hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=1, idempotency_key="k").hold

    started = services.start_payment(hold_id=hold.pk, buyer_id=buyer.pk)
    again = services.start_payment(hold_id=hold.pk, buyer_id=buyer.pk)
    assert again.payment.pk == started.payment.pk and again.payment.session_id == started.payment.session_id
    assert Payment.objects.count() == 1  # a second click opens no second intent
    intent_id = started.payment.session_id
    page = f"/checkout/stripe/{intent_id}"
    assert started.payment.redirect_url.endswith(page)

    mine, theirs = Client(), Client()
    mine.force_login(buyer)
    theirs.force_login(other)
    assert Client().get(page).status_code == 302  # to the login page
    assert theirs.get(page).status_code == 404
    assert theirs.post(f"{page}/card", {"token": "tok_visa"}).status_code == 404
    assert mine.get("/checkout/stripe/pi_nothing").status_code == 404

    shown = mine.get(page)
    assert shown.status_code == 200
    client_secret = httpx.get(
        f"{on_stripe}/v1/payment_intents/{intent_id}",
        headers={"Authorization": f"Bearer {STRIPE_SECRET_KEY}"},
    ).json()["client_secret"]
    assert client_secret in shown.content.decode() and STRIPE_PUBLISHABLE_KEY in shown.content.decode()

    for token, status in [("garbage", 400), ("tok_" + "x" * 80, 400), ("tok_unknown", 400)]:
        answer = mine.post(f"{page}/card", {"token": token})
        assert answer.status_code == status, answer.content
        assert answer.json()["error"] in {"bad_token", "refused"}
    state = httpx.get(
        f"{on_stripe}/v1/payment_intents/{intent_id}",
        headers={"Authorization": f"Bearer {STRIPE_SECRET_KEY}"},
    ).json()
    assert state["status"] == "requires_payment_method" and Payment.objects.get().state == "pending"
    assert json.loads(mine.post(f"{page}/card", {}).content)["error"] == "bad_token"


# Stripe's integration security guide, "Content Security Policy" (docs.stripe.com/security/guide):
# what Stripe.js, its Payment Element and 3-D Secure need, written here from the guide (not from
# checkout/stripe_page.py) so that a change there is read against Stripe's list.
STRIPE_GUIDE = {
    "script-src": {"https://js.stripe.com", "https://*.js.stripe.com"},
    "frame-src": {"https://js.stripe.com", "https://*.js.stripe.com", "https://hooks.stripe.com"},
    "connect-src": {"https://api.stripe.com"},
}


def policy(answer: HttpResponseBase) -> dict[str, set[str]]:
    header = answer.headers["Content-Security-Policy"]
    return {words[0]: set(words[1:]) for words in (part.split() for part in header.split(";")) if words}


def open_pay_page(buyer_name: str, slug: str) -> tuple[Client, str]:
    drop = make_drop(slug=slug, quantity=1)
    buyer = make_buyer(buyer_name)
    hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=1, idempotency_key="k").hold
    started = services.start_payment(hold_id=hold.pk, buyer_id=buyer.pk)
    client = Client()
    client.force_login(buyer)
    return client, f"/checkout/stripe/{started.payment.session_id}"


@pytest.mark.django_db(transaction=True)
def test_the_pay_page_allows_what_stripes_guide_lists_and_only_that_page_does(
    on_stripe: str, settings: Settings
) -> None:
    assert settings.STRIPE_JS_URL == "https://js.stripe.com/v3/"  # its default
    client, page = open_pay_page("paula", "csp-page")

    shown = client.get(page)
    assert shown.status_code == 200
    directives = policy(shown)
    for name, sources in STRIPE_GUIDE.items():
        missing = sources - directives[name]
        assert not missing, f"{name} lacks {missing}"
        # nothing beyond Stripe's list and the shop's own policy (its origin, the request's nonce)
        extra = {s for s in directives[name] - sources if s != "'self'" and not s.startswith("'nonce-")}
        assert not extra, f"{name} also allows {extra}"
    assert all("maps.googleapis.com" not in s for v in directives.values() for s in v)
    assert "'unsafe-inline'" not in directives["script-src"]
    # the shop's other pages keep the shop's own policy: no Stripe origin anywhere
    home = client.get("/")
    assert "stripe" not in home.headers["Content-Security-Policy"]
    assert "frame-src" not in policy(home)  # default-src 'self' covers it there


@pytest.mark.django_db(transaction=True)
def test_pointed_at_localstripe_the_pay_page_allows_its_one_origin(
    on_stripe: str, settings: Settings
) -> None:
    settings.STRIPE_JS_URL = f"{on_stripe}/js.stripe.com/v3/"
    client, page = open_pay_page("pia", "csp-local")

    directives = policy(client.get(page))

    for name in ("script-src", "frame-src", "connect-src"):
        assert on_stripe in directives[name]
        assert not any("stripe.com" in s for s in directives[name]), directives[name]


@pytest.mark.django_db(transaction=True)
def test_on_stripes_own_api_the_card_fallback_is_not_mounted(settings: Settings, localstripe: str) -> None:
    settings.PAYMENT_PROVIDER = "stripe"
    settings.STRIPE_SECRET_KEY = STRIPE_SECRET_KEY
    settings.STRIPE_PUBLISHABLE_KEY = STRIPE_PUBLISHABLE_KEY
    with stripe_api_at(settings, localstripe):  # the intent is made at localstripe
        client, page = open_pay_page("pablo", "no-fallback")
        assert client.post(f"{page}/card", {"token": "tok_visa"}).status_code != 404
    with stripe_api_at(settings, "https://api.stripe.com"):  # production: Stripe's own API
        assert client.post(f"{page}/card", {"token": "tok_visa"}).status_code == 404
        assert client.post(f"{page}/card", {"token": "garbage"}).status_code == 404
        assert Payment.objects.get().state == "pending"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "intent_id", ["pi_nothing", "not-an-intent", "pi_" + "x" * 300, "%00", "pi_%E2%80%AE", "pi_1/../x"]
)
def test_garbage_intents_answer_404_on_the_pay_page_and_the_fallback(on_stripe: str, intent_id: str) -> None:
    client, _page = open_pay_page("priya", "garbage")
    before = Payment.objects.get()

    assert client.get(f"/checkout/stripe/{intent_id}").status_code == 404
    assert client.post(f"/checkout/stripe/{intent_id}/card", {"token": "tok_visa"}).status_code == 404

    after = Payment.objects.get()
    assert (after.state, after.session_id) == (before.state, before.session_id)


def test_a_card_intent_asks_for_the_shops_statement_descriptor_suffix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given the adapter pointed at Stripe itself, its outgoing create call read
    adapter = StripeProvider(secret_key=STRIPE_SECRET_KEY, webhook_secret=STRIPE_WEBHOOK_SECRET)
    sent: list[dict] = []

    def create(*, params: dict, options: dict) -> object:
        sent.append(params)
        return type("Intent", (), {"id": "pi_1"})()

    monkeypatch.setattr(adapter.client.v1.payment_intents, "create", create)

    # when a session opens for a shop with a name
    adapter.create_session(
        reference="ref-1",
        amount_minor=4900,
        currency="EUR",
        callback_url="https://x",
        return_url="https://y",
        statement_descriptor="HARBOUR LA",
    )

    # then the card intent carries the suffix (a card intent refuses a whole statement_descriptor)
    assert sent[0]["statement_descriptor_suffix"] == "HARBOUR LA" and "statement_descriptor" not in sent[0]
    no_name = adapter.intent_params(
        reference="r", amount_minor=1, currency="EUR", description="", statement_descriptor=""
    )
    assert "statement_descriptor_suffix" not in no_name


def test_against_localstripe_the_suffix_is_left_out_and_the_intent_is_made(on_stripe: str) -> None:
    adapter = StripeProvider(
        secret_key=STRIPE_SECRET_KEY, webhook_secret=STRIPE_WEBHOOK_SECRET, api_base=on_stripe
    )

    session = adapter.create_session(
        reference="ref-local",
        amount_minor=4900,
        currency="EUR",
        callback_url="https://x",
        return_url="https://y",
        statement_descriptor="HARBOUR LA",
    )

    assert session.session_id.startswith("pi_")
    # control: localstripe refuses the field, which is why it is not sent there
    refused = httpx.post(
        f"{on_stripe}/v1/payment_intents",
        data={"amount": 100, "currency": "eur", "statement_descriptor_suffix": "HARBOUR LA"},
        headers={"Authorization": f"Bearer {STRIPE_SECRET_KEY}"},
    )
    assert refused.status_code == 400 and "statement_descriptor_suffix" in refused.text
