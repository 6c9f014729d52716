"""Charged once, shown: a create or confirm whose answer is lost is retried without a second intent or
charge, against a proxy that honours Idempotency-Key as Stripe documents it (keyed_replay.py) in front
of localstripe (a real process); and our side records one intent per payment, keys or not."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import httpx
import pytest
from django.db import connections
from pytest_django import Settings

from checkout import services
from checkout.models import Payment, PaymentState
from checkout.providers.base import ProviderError, Session
from checkout.providers.stripe import CardConfirmed, StripeProvider
from holds import services as holds
from tests.checkout.keyed_replay import KeyedReplay, keyed_replay
from tests.concurrency import run_concurrently
from tests.conftest import STRIPE_PUBLISHABLE_KEY, STRIPE_SECRET_KEY, STRIPE_WEBHOOK_SECRET
from tests.factories import make_buyer, make_drop

CREATE = "/v1/payment_intents"
SECRET = {"Authorization": f"Bearer {STRIPE_SECRET_KEY}"}


@pytest.fixture
def replay(localstripe: str) -> Iterator[KeyedReplay]:
    with keyed_replay(localstripe) as proxy:
        yield proxy


def adapter(base: str) -> StripeProvider:
    return StripeProvider(secret_key=STRIPE_SECRET_KEY, webhook_secret=STRIPE_WEBHOOK_SECRET, api_base=base)


def create(stripe: StripeProvider, reference: str) -> Session:
    return stripe.create_session(
        reference=reference,
        amount_minor=4900,
        currency="EUR",
        callback_url="https://x",
        return_url="https://y",
    )


def intents_of(localstripe: str, reference: str) -> list[dict]:
    """The intents localstripe holds for one of our references (asked directly, not through the proxy)."""
    listed = httpx.get(f"{localstripe}/v1/payment_intents", params={"limit": 100}, headers=SECRET).json()
    return [i for i in listed["data"] if i["metadata"].get("reference") == reference]


def card_token(localstripe: str) -> str:
    """A card token as Stripe.js makes one in the buyer's browser (with the publishable key)."""
    answer = httpx.post(
        f"{localstripe}/v1/tokens",
        data={
            "card[number]": "4242424242424242",
            "card[exp_month]": "12",
            "card[exp_year]": "2034",
            "card[cvc]": "123",
            "key": STRIPE_PUBLISHABLE_KEY,  # as Stripe.js sends it (localstripe reads it there)
        },
    )
    answer.raise_for_status()
    return str(answer.json()["id"])


def test_control_without_keys_honoured_a_lost_create_answer_makes_two_intents(
    localstripe: str, settings: Settings
) -> None:
    """What localstripe alone does (and what the proxy must prevent): the retry is a second intent."""
    settings.PUBLIC_BASE_URL = "https://shop.example"
    reference = str(uuid.uuid4())
    with keyed_replay(localstripe, honour_keys=False) as lossy:
        lossy.lose(CREATE)
        create(adapter(lossy.url), reference)
        assert lossy.outcomes("POST", CREATE) == ["lost", "forwarded"]
    assert len(intents_of(localstripe, reference)) == 2


def test_the_proxy_answers_a_key_as_stripe_documents(replay: KeyedReplay, localstripe: str) -> None:
    reference = str(uuid.uuid4())
    body = {"amount": "4900", "currency": "eur", "capture_method": "manual", "metadata[reference]": reference}
    first = httpx.post(replay.url + CREATE, data=body, headers={**SECRET, "Idempotency-Key": reference})
    again = httpx.post(replay.url + CREATE, data=body, headers={**SECRET, "Idempotency-Key": reference})
    assert first.status_code == again.status_code == 200
    assert again.json() == first.json() and again.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers

    other = httpx.post(
        replay.url + CREATE, data={**body, "amount": "5000"}, headers={**SECRET, "Idempotency-Key": reference}
    )
    assert other.status_code == 400 and other.json()["error"]["type"] == "idempotency_error"
    assert reference in other.json()["error"]["message"]
    [made] = intents_of(localstripe, reference)  # neither the replay nor the refusal reached localstripe
    assert made["id"] == first.json()["id"] and made["amount"] == 4900
    assert replay.outcomes("POST", CREATE) == ["forwarded", "replayed", "mismatch"]


def test_a_lost_create_answer_is_retried_into_the_one_intent(
    replay: KeyedReplay, localstripe: str, settings: Settings
) -> None:
    settings.PUBLIC_BASE_URL = "https://shop.example"
    reference = str(uuid.uuid4())
    replay.lose(CREATE)

    session = create(adapter(replay.url), reference)

    # the library retried with the same key, and the retry was answered what the lost answer said
    assert replay.outcomes("POST", CREATE) == ["lost", "replayed"]
    assert {s.key for s in replay.state.seen if s.path == CREATE} == {f"floodgate-intent-{reference}"}
    [made] = intents_of(localstripe, reference)
    assert session.session_id == made["id"]
    assert session.redirect_url == f"https://shop.example/checkout/stripe/{made['id']}"


def test_a_lost_confirm_answer_is_retried_into_one_charge(replay: KeyedReplay, localstripe: str) -> None:
    stripe = adapter(replay.url)
    reference = str(uuid.uuid4())
    intent_id = create(stripe, reference).session_id
    confirm = f"{CREATE}/{intent_id}/confirm"
    replay.lose(confirm)

    confirmed = stripe.confirm_with_token(intent_id, card_token(localstripe))

    assert confirmed == CardConfirmed()  # the buyer is told it went through, as it did
    assert replay.outcomes("POST", confirm) == ["lost", "replayed"]
    [made] = intents_of(localstripe, reference)
    assert made["status"] == "requires_capture"
    charges = httpx.get(f"{localstripe}/v1/charges", params={"limit": 100}, headers=SECRET).json()["data"]
    assert len([c for c in charges if c.get("payment_intent") == intent_id]) == 1


def test_control_without_keys_honoured_a_lost_confirm_answer_is_refused_on_retry(localstripe: str) -> None:
    """Without the replay the retried confirm meets an intent already authorised: the buyer would be
    told it failed while the card was held."""
    with keyed_replay(localstripe, honour_keys=False) as lossy:
        stripe = adapter(lossy.url)
        intent_id = create(stripe, str(uuid.uuid4())).session_id
        confirm = f"{CREATE}/{intent_id}/confirm"
        lossy.lose(confirm)
        try:
            told = stripe.confirm_with_token(intent_id, card_token(localstripe)).declined
        except ProviderError as error:
            told = str(error)
        assert lossy.outcomes("POST", confirm) == ["lost", "forwarded"]
    assert told
    state = httpx.get(f"{localstripe}/v1/payment_intents/{intent_id}", headers=SECRET).json()
    assert state["status"] == "requires_capture"


def test_threads_creating_one_payments_intent_make_one(replay: KeyedReplay, localstripe: str) -> None:
    reference = str(uuid.uuid4())
    stripe = adapter(replay.url)

    sessions = run_concurrently([lambda: create(stripe, reference)] * 8, threads=8)

    assert not [s for s in sessions if isinstance(s, BaseException)], sessions
    [made] = intents_of(localstripe, reference)
    assert {s.session_id for s in sessions if isinstance(s, Session)} == {made["id"]}
    outcomes = replay.outcomes("POST", CREATE)
    assert outcomes.count("forwarded") == 1 and outcomes.count("replayed") == 7


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("keys", ["honoured", "ignored"])
def test_buyers_clicks_racing_on_one_hold_open_one_payment_with_one_intent(
    keys: str, replay: KeyedReplay, localstripe: str, settings: Settings
) -> None:
    """Keys or not: the payment row lets one click open the session (the others wait for it)."""
    settings.PAYMENT_PROVIDER = "stripe"
    settings.STRIPE_SECRET_KEY = STRIPE_SECRET_KEY
    settings.STRIPE_WEBHOOK_SECRET = STRIPE_WEBHOOK_SECRET
    settings.STRIPE_API_BASE = replay.url if keys == "honoured" else localstripe
    drop = make_drop(slug="one-intent", quantity=1)
    buyer = make_buyer("ines")
    hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=1, idempotency_key="k").hold

    answers = run_concurrently(
        [lambda: services.start_payment(hold_id=hold.pk, buyer_id=buyer.pk)] * 8, threads=8
    )

    started = [a for a in answers if isinstance(a, services.Started)]
    assert started, answers
    assert all(isinstance(a, services.Started | services.PaymentOpening) for a in answers), answers
    [payment] = Payment.objects.all()
    assert payment.state == PaymentState.PENDING
    assert {s.payment.session_id for s in started} == {payment.session_id}
    [made] = intents_of(localstripe, str(payment.reference))
    assert made["id"] == payment.session_id


@pytest.mark.django_db(transaction=True)
def test_a_session_no_payment_records_is_cancelled(localstripe: str, settings: Settings) -> None:
    """Keys or not, a payment records one intent: a create that answers after its payment was retired
    (slower than the opening timeout) loses the conditional UPDATE and cancels what it made."""
    settings.PAYMENT_PROVIDER = "stripe"
    settings.STRIPE_SECRET_KEY = STRIPE_SECRET_KEY
    settings.STRIPE_WEBHOOK_SECRET = STRIPE_WEBHOOK_SECRET
    settings.STRIPE_API_BASE = localstripe
    drop = make_drop(slug="slow-create", quantity=1)
    buyer = make_buyer("jonas")
    hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=1, idempotency_key="k").hold
    made: list[str] = []
    second: list[object] = []
    real_create = StripeProvider.create_session

    def click_again() -> None:
        try:
            second.append(services.start_payment(hold_id=hold.pk, buyer_id=buyer.pk))
        finally:
            connections.close_all()

    def slow_create(self: StripeProvider, **kwargs: object) -> Session:
        session = real_create(self, **kwargs)  # type: ignore[arg-type]
        made.append(session.session_id)
        if len(made) == 1:
            # meanwhile the buyer clicked again after the opening timeout: the first attempt is retired
            Payment.objects.update(created_at=Payment.objects.get().created_at - services.OPENING_TIMEOUT * 2)
            thread = threading.Thread(target=click_again)
            thread.start()
            thread.join()
        return session

    StripeProvider.create_session = slow_create  # type: ignore[method-assign]
    try:
        with pytest.raises(services.PaymentOpening):
            services.start_payment(hold_id=hold.pk, buyer_id=buyer.pk)
    finally:
        StripeProvider.create_session = real_create  # type: ignore[method-assign]

    first, kept = made
    [opened] = second
    assert isinstance(opened, services.Started) and opened.payment.session_id == kept
    retired, current = Payment.objects.order_by("pk")
    assert (retired.state, retired.session_id) == (PaymentState.FAILED, None)
    assert (current.state, current.session_id) == (PaymentState.PENDING, kept)
    url = f"{localstripe}/v1/payment_intents"
    status = {i: httpx.get(f"{url}/{i}", headers=SECRET).json()["status"] for i in made}
    assert status == {first: "canceled", kept: "requires_payment_method"}
