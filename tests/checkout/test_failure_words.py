"""A failed order keeps a code and says why in the reader's language (checkout.failures)."""

from __future__ import annotations

import importlib
import uuid

import pytest
from django.apps import apps
from django.test import Client
from django.utils import translation

from checkout import failures
from checkout import services as checkout
from checkout.models import Order, Payment
from checkout.providers.base import WebhookEvent as ProviderEvent
from holds import services as holds
from tests.factories import make_buyer, make_drop

pytestmark = pytest.mark.django_db(transaction=True)

CODES = [
    failures.TOO_LATE,
    failures.AMOUNT_MISMATCH,
    failures.ABANDONED,
    failures.DECLINED,
    failures.declined("expired_card"),
]


def declined_order(provider_reason: str) -> Order:
    """An order whose payment the provider declined with `provider_reason`, applied by the saga."""
    drop = make_drop(slug=f"d-{uuid.uuid4().hex[:8]}", quantity=2)
    buyer = make_buyer()
    hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=1, idempotency_key="k").hold
    order = Order.objects.create(
        hold=hold, buyer=buyer, drop=drop, quantity=1, amount_minor=1000, currency="EUR"
    )
    session = f"ses_{uuid.uuid4().hex}"
    payment = Payment.objects.create(
        order=order,
        provider="simulated",
        session_id=session,
        state="pending",
        amount_minor=1000,
        currency="EUR",
    )
    event = ProviderEvent(
        event_id=f"evt_{session}",
        type="payment.failed",
        session_id=session,
        reference=str(payment.reference),
        amount_minor=1000,
        currency="EUR",
        reason=provider_reason,
    )
    event_pk = checkout.record_webhook(provider_name="simulated", event=event, payload={"id": event.event_id})
    assert event_pk is not None and checkout.process_event(event_pk=event_pk) == "declined"
    order.refresh_from_db()
    return order


def test_a_decline_is_stored_as_a_code_and_said_in_the_buyers_language() -> None:
    order = declined_order("expired_card")
    assert order.failure_reason == "declined:expired_card"

    page = Client()
    page.force_login(order.buyer)
    english = page.get(f"/orders/{order.pk}/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    german = page.get(f"/orders/{order.pk}/", HTTP_ACCEPT_LANGUAGE="de").content.decode()
    assert "The payment was declined: the card has expired." in english
    assert "Die Zahlung wurde abgelehnt: Die Karte ist abgelaufen." in german
    assert "expired_card" not in english + german and "The payment" not in german


def test_a_decline_code_nobody_can_act_on_says_only_declined_never_the_raw_code() -> None:
    order = declined_order("do_not_honor_9000")
    assert order.failure_reason == failures.DECLINED
    with translation.override("de"):
        assert order.failure_words == "Die Zahlung wurde abgelehnt."


def test_the_api_gives_the_code_for_programs_and_the_words_in_the_requests_language() -> None:
    order = declined_order("insufficient_funds")
    api = Client()
    api.force_login(order.buyer)
    answer = api.get(f"/api/orders/{order.pk}", HTTP_ACCEPT_LANGUAGE="de").json()
    assert answer["failure_code"] == "declined:insufficient_funds"
    assert answer["failure_reason"] == "Die Zahlung wurde abgelehnt: Die Karte ist nicht ausreichend gedeckt."


@pytest.mark.parametrize("code", CODES)
def test_every_code_has_german_words(code: str) -> None:
    with translation.override("en"):
        english = failures.words(code)
    with translation.override("de"):
        german = failures.words(code)
    assert english and german and english != german  # a missing translation would say English twice


def test_a_sentence_stored_before_codes_is_shown_as_it_was() -> None:
    assert failures.words("too late") == "too late"
    assert failures.code("too late") == ""
    assert failures.code("declined:expired_card") == "declined:expired_card"


def test_the_migration_rewrites_old_sentences_to_codes() -> None:
    old = [
        "Your hold ended before the payment arrived, so the units were not yours any more. "
        "The payment was cancelled: you are not charged.",
        "The payment was declined (expired card).",
        "The payment was declined (something odd).",
        "a merchant's own words",
    ]
    orders = []
    for reason in old:
        order = declined_order("card_declined")
        Order.objects.filter(pk=order.pk).update(failure_reason=reason)
        orders.append(order.pk)

    importlib.import_module("checkout.migrations.0011_failure_reason_codes").to_codes(apps, None)

    now = [Order.objects.get(pk=pk).failure_reason for pk in orders]
    assert now == [failures.TOO_LATE, "declined:expired_card", failures.DECLINED, "a merchant's own words"]
