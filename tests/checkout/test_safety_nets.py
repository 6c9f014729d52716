"""What the saga does when webhooks are lost, wrong or never come, and when buyers double-click."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from checkout import failures, selectors, services
from checkout.models import Order, Payment, WebhookEvent
from checkout.providers import get_provider
from checkout.providers.base import WebhookEvent as ProviderEvent
from holds import services as holds
from holds.counts import invariant
from ops import dashboard
from tests.factories import drop_permission, make_buyer, make_drop

pytestmark = pytest.mark.django_db(transaction=True)


def pending_payment(slug: str, *, quantity: int = 1) -> tuple[Order, Payment]:
    drop = make_drop(slug=slug, quantity=3, per_buyer_limit=2, price_minor=2500)
    buyer = make_buyer()
    hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=quantity, idempotency_key="k").hold
    order = Order.objects.create(
        hold=hold, buyer=buyer, drop=drop, quantity=quantity, amount_minor=2500 * quantity, currency="EUR"
    )
    payment = Payment.objects.create(
        order=order,
        provider="simulated",
        session_id=f"ses_{slug}",
        state="pending",
        amount_minor=order.amount_minor,
        currency="EUR",
    )
    return order, payment


def authorised(payment: Payment, **changes: object) -> int:
    body: dict[str, Any] = {  # the provider's JSON
        "id": f"evt_{uuid.uuid4().hex}",
        "type": "payment.authorized",
        "session_id": payment.session_id,
        "reference": str(payment.reference),
        "amount_minor": payment.amount_minor,
        "currency": payment.currency,
        "reason": "",
        **changes,
    }
    event = ProviderEvent(
        event_id=body["id"],
        type=body["type"],
        session_id=body["session_id"],
        reference=body["reference"],
        amount_minor=int(body["amount_minor"]),
        currency=str(body["currency"]),
    )
    event_pk = services.record_webhook(provider_name="simulated", event=event, payload=body)
    assert event_pk is not None  # a new event id: stored, not yet processed
    return event_pk


def test_an_authorisation_for_another_amount_is_voided_not_sold() -> None:
    order, payment = pending_payment("cheap", quantity=2)

    outcome = services.process_event(event_pk=authorised(payment, amount_minor=1))

    assert outcome == "amount_mismatch_voiding"
    assert Payment.objects.get(pk=payment.pk).state == "void_pending"
    order.refresh_from_db()
    assert order.state == "failed" and order.refunded and "did not match" in order.failure_words
    assert invariant(drop_id=order.drop_id).as_json()["held"] == 0
    assert invariant(drop_id=order.drop_id).drift == 0


def test_an_event_found_by_our_reference_before_the_session_id_was_saved() -> None:
    order, payment = pending_payment("early")
    Payment.objects.filter(pk=payment.pk).update(session_id=None, state="created")
    payment.refresh_from_db()

    assert services.process_event(event_pk=authorised(payment, session_id="ses_unknown")) == "confirmed"
    assert Order.objects.get(pk=order.pk).state == "confirmed"


def test_an_event_for_no_known_payment_stays_for_the_sweep() -> None:
    _, payment = pending_payment("orphan")
    event_pk = authorised(payment, reference=str(uuid.uuid4()), session_id="ses_nobody")

    assert services.process_event(event_pk=event_pk) == "unknown_payment"

    assert WebhookEvent.objects.get(pk=event_pk).processed_at is None
    WebhookEvent.objects.filter(pk=event_pk).update(received_at=timezone.now() - timedelta(minutes=2))
    assert selectors.stale_event_ids() == [event_pk]


def test_orders_nobody_paid_for_fail_when_their_hold_ends() -> None:
    released, _ = pending_payment("left")
    expired, _ = pending_payment("slow")
    paid, paid_payment = pending_payment("paid")
    holds.release(hold_id=released.hold_id, buyer_id=None)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE holds_hold SET created_at = now() - interval '1 hour',"
            " expires_at = now() - interval '1 s' WHERE id = %s",
            [expired.hold_id],
        )
    services.process_event(event_pk=authorised(paid_payment))

    assert services.fail_abandoned_orders() == 2

    states = {o.pk: (o.state, o.failure_reason) for o in Order.objects.all()}
    assert states[released.pk] == ("failed", failures.ABANDONED)
    assert states[expired.pk] == ("failed", failures.ABANDONED)
    assert states[paid.pk][0] == "confirmed"
    assert services.fail_abandoned_orders() == 0


def test_a_second_click_while_the_session_opens_is_told_to_wait() -> None:
    order, payment = pending_payment("double")
    Payment.objects.filter(pk=payment.pk).update(state="created", session_id=None)

    with pytest.raises(services.PaymentOpening):
        services.start_payment(hold_id=order.hold_id, buyer_id=order.buyer_id)
    assert Payment.objects.filter(order=order).count() == 1


def test_a_capture_the_provider_refuses_for_good_stops_and_says_why(payment_provider: str, settings) -> None:
    # given an authorised session that was voided at the provider behind our back
    settings.PAYMENT_PROVIDER_URL = payment_provider
    _, payment = pending_payment("refused")
    session = get_provider("simulated").create_session(
        reference=str(payment.reference),
        amount_minor=payment.amount_minor,
        currency="EUR",
        callback_url="http://127.0.0.1:1/nowhere",
        return_url="http://127.0.0.1:1/back",
    )
    httpx.post(session.redirect_url, data={"action": "pay"}, timeout=10)
    get_provider("simulated").void(session_id=session.session_id)
    Payment.objects.filter(pk=payment.pk).update(session_id=session.session_id, state="capture_pending")

    # when we try to capture
    outcome = services.settle_payment(payment_pk=payment.pk)

    # then no retry loop: a terminal state on-call can find, with the provider's reason
    payment.refresh_from_db()
    assert outcome == payment.state == "capture_failed"
    assert "capture" in payment.last_error and "409" in payment.last_error
    assert selectors.unsettled_payment_ids() == []
    # and on-call sees it: /metrics and the dashboard count it
    staff = make_buyer("watcher")
    staff.is_staff = True
    staff.save()
    staff.user_permissions.add(drop_permission("view_drop"))  # who may watch
    client = Client()
    client.force_login(staff)
    assert (
        'floodgate_payments_needing_attention{state="capture_failed"} 1'
        in client.get("/metrics").content.decode()
    )
    assert dashboard.snapshot()["payments_needing_attention"] == 1
