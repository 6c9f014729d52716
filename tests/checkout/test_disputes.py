"""Disputes: recorded on the order once, the merchant e-mailed, shown in the admin, the dashboard and
/metrics, closed as won or lost; from Stripe's documented events (signed as Stripe signs) and from the
simulated provider's process over a real server and worker. Forged, replayed, late and unknown
dispute events change nothing."""

from __future__ import annotations

import email
import email.policy
import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from email.message import EmailMessage
from typing import TYPE_CHECKING

import httpx
import pytest
from django.core import mail
from django.db.models.functions import Now
from django.test import Client
from pytest_django import Settings

from checkout import outbox, services
from checkout.models import Dispute, Order, OutboxMessage, Payment, WebhookEvent
from config.celery import app as celery_app
from ops import dashboard
from tests.checkout.helpers import (
    buyer_token,
    confirmed_order,
    pay_at_provider,
    provider_config,
    reserve_and_start_paying,
    stripe_event,
    stripe_signature,
    wait_until,
)
from tests.conftest import PROVIDER_SECRET, ROOT, STRIPE_WEBHOOK_SECRET, WEBHOOK_SECRET, Worker
from tests.factories import make_drop, staff

if TYPE_CHECKING:
    from django.test.client import _MonkeyPatchedWSGIResponse as TestResponse

STRIPE = "/checkout/webhooks/stripe"
SIMULATED = "/checkout/webhooks/simulated"
DUE_BY = 1_900_000_000  # 2030-03-17 17:46:40 UTC
MAIL_DIR = ROOT / ".data" / "test" / "mail"  # the workers' file backend (conftest.app_env)


@pytest.fixture(autouse=True)
def empty_queue_afterwards() -> Iterator[None]:
    """The webhook view sends process_webhook_event; these in-process tests run it themselves."""
    yield
    celery_app.control.purge()


@pytest.fixture
def on_stripe(settings: Settings) -> None:
    settings.STRIPE_WEBHOOK_SECRET = STRIPE_WEBHOOK_SECRET
    settings.MERCHANT_EMAIL = ["disputes@shop.example"]
    settings.PUBLIC_BASE_URL = "https://shop.example"


def stripe_order() -> tuple[Order, str]:
    """A confirmed, captured order whose payment is a Stripe PaymentIntent."""
    order = confirmed_order(make_drop(slug=f"disputed-{uuid.uuid4().hex[:6]}", quantity=2))
    intent = f"pi_{uuid.uuid4().hex[:24]}"
    Payment.objects.filter(order=order).update(provider="stripe", session_id=intent)
    OutboxMessage.objects.update(sent_at=Now())  # its confirmation is not what these tests read
    return order, intent


def dispute(intent: str | None, status: str, *, charge: str = "ch_3MtwBwLkdIwHu7ix0snN0B15") -> dict:
    """A Dispute as Stripe's API reference shows one."""
    return {
        "id": "dp_1MtJUT2eZvKYlo2CNaw2HvEv",
        "object": "dispute",
        "amount": 2000,
        "balance_transactions": [],
        "charge": charge,
        "created": 1680651737,
        "currency": "eur",
        "evidence": {"customer_name": None, "product_description": None},
        "evidence_details": {
            "due_by": DUE_BY,
            "has_evidence": False,
            "past_due": False,
            "submission_count": 0,
        },
        "is_charge_refundable": False,
        "livemode": False,
        "metadata": {},
        "payment_intent": intent,
        "reason": "fraudulent",
        "status": status,
    }


def deliver(
    kind: str, thing: dict, *, event_id: str, created: int | None = None, secret: str = ""
) -> TestResponse:
    """Post a Stripe event to the webhook view, signed (with `secret` when given: a forgery)."""
    body = json.loads(stripe_event(kind, thing, event_id=event_id))
    if created is not None:
        body["created"] = created
    raw = json.dumps(body).encode()
    signature = stripe_signature(raw, secret=secret) if secret else stripe_signature(raw)
    headers = {"Stripe-Signature": signature}
    return Client().post(STRIPE, raw, content_type="application/json", headers=headers)


def process(event_id: str) -> str:
    return services.process_event(event_pk=WebhookEvent.objects.get(event_id=event_id).pk)


@pytest.mark.django_db
def test_a_stripe_dispute_is_recorded_once_told_shown_and_closed(on_stripe: None, roles: None) -> None:
    order, intent = stripe_order()
    merchant = Client()
    merchant.force_login(staff("mona", "Merchants"))
    at = int(time.time()) - 60

    # opened: recorded on the order with its amount, reason and deadline, and the merchant e-mailed
    opening = dispute(intent, "needs_response")
    answer = deliver("charge.dispute.created", opening, event_id="evt_dp1", created=at)
    assert answer.status_code == 200, answer.content
    assert process("evt_dp1") == "dispute_opened_needs_response"
    [recorded] = Dispute.objects.all()
    assert (recorded.order_id, recorded.state, recorded.amount_minor, recorded.currency) == (
        order.pk,
        "needs_response",
        2000,
        "EUR",
    )
    assert recorded.reason == "fraudulent" and recorded.dispute_id == "dp_1MtJUT2eZvKYlo2CNaw2HvEv"
    assert recorded.evidence_due_at == datetime.fromtimestamp(DUE_BY, UTC) and recorded.closed_at is None

    # a replay of the same delivery: 200, nothing new
    again = deliver("charge.dispute.created", opening, event_id="evt_dp1", created=at)
    assert again.status_code == 200 and WebhookEvent.objects.filter(event_id="evt_dp1").count() == 1
    assert Dispute.objects.count() == 1

    assert outbox.relay_outbox() == 1
    [told] = mail.outbox
    assert told.to == ["disputes@shop.example"]
    assert told.subject == f"[Floodgate] Order {order.pk}: the buyer's bank disputes €20.00"
    assert "fraudulent" in told.body and "Evidence due by: Sun 17 Mar 2030, 17:46 UTC" in told.body
    assert f"https://shop.example/admin/checkout/order/{order.pk}/change/" in told.body

    # seen in the admin's order list, its own list, and the dashboard
    listed = merchant.get("/admin/checkout/order/").content.decode()
    assert "Needs a response by 2030-03-17" in listed
    assert merchant.get("/admin/checkout/dispute/").status_code == 200
    assert merchant.get(f"/admin/checkout/order/{order.pk}/change/").status_code == 200
    assert dashboard.snapshot()["open_disputes"] == 1

    # under review, then lost: closed, told once more
    deliver("charge.dispute.updated", dispute(intent, "under_review"), event_id="evt_dp2", created=at + 10)
    assert process("evt_dp2") == "dispute_under_review"
    deliver("charge.dispute.closed", dispute(intent, "lost"), event_id="evt_dp3", created=at + 20)
    assert process("evt_dp3") == "dispute_lost"
    # a late update (made before the close, delivered after it) changes nothing
    deliver("charge.dispute.updated", dispute(intent, "under_review"), event_id="evt_dp4", created=at + 15)
    assert process("evt_dp4") == "dispute_unchanged"
    recorded.refresh_from_db()
    assert recorded.state == "lost" and recorded.closed_at is not None
    assert dashboard.snapshot()["open_disputes"] == 0

    assert outbox.relay_outbox() == 1
    closed = mail.outbox[-1]
    assert closed.subject == f"[Floodgate] Order {order.pk}: the dispute of €20.00 is lost"
    assert "went back to the buyer's bank" in closed.body and "Evidence due by" not in closed.body
    assert OutboxMessage.objects.filter(topic=outbox.DISPUTE_TOPIC).count() == 2

    scraped = merchant.get("/metrics").content.decode()
    assert 'floodgate_disputes{state="lost"} 1.0' in scraped
    assert 'floodgate_disputes{state="needs_response"} 0.0' in scraped


@pytest.mark.django_db
def test_forged_unknown_and_conflicting_dispute_events_record_nothing(on_stripe: None) -> None:
    _, intent = stripe_order()

    opening = dispute(intent, "needs_response")
    forged = deliver("charge.dispute.created", opening, event_id="evt_f", secret="x")
    assert forged.status_code == 400 and "signature" in forged.json()["detail"].lower()

    # a dispute of a charge the shop did not make: 200 (Stripe must not retry it), nothing stored
    unknown = deliver("charge.dispute.created", dispute(None, "needs_response"), event_id="evt_u")
    assert unknown.status_code == 200, unknown.content
    other = deliver("charge.dispute.created", dispute("pi_NotOursAtAll", "needs_response"), event_id="evt_o")
    assert other.status_code == 200

    # a status Stripe may add later: answered 200 and ignored, not refused
    novel = deliver("charge.dispute.updated", dispute(intent, "prevented"), event_id="evt_n")
    assert novel.status_code == 200 and novel.json()["ignored"] is True

    assert not WebhookEvent.objects.filter(type__startswith="dispute.").exists()
    assert not Dispute.objects.exists()
    assert not OutboxMessage.objects.filter(topic=outbox.DISPUTE_TOPIC).exists()


@pytest.mark.django_db
def test_a_dispute_first_heard_of_when_it_closes_is_recorded_decided(
    on_stripe: None, settings: Settings
) -> None:
    """Events out of order: the close came first, so the late 'created' finds it decided."""
    settings.MERCHANT_EMAIL = []  # then the Merchants group's members are told
    _, intent = stripe_order()
    at = int(time.time())

    deliver("charge.dispute.closed", dispute(intent, "won"), event_id="evt_w", created=at)
    assert process("evt_w") == "dispute_opened_won"
    deliver("charge.dispute.created", dispute(intent, "needs_response"), event_id="evt_c", created=at - 100)
    assert process("evt_c") == "dispute_unchanged"
    # the same dispute in a second event (another id): still one row
    deliver("charge.dispute.closed", dispute(intent, "won"), event_id="evt_w2", created=at + 1)
    assert process("evt_w2") == "dispute_unchanged"

    [recorded] = Dispute.objects.all()
    assert recorded.state == "won" and recorded.closed_at is not None
    topics = sorted(OutboxMessage.objects.filter(topic=outbox.DISPUTE_TOPIC).values_list("key", flat=True))
    assert topics == [f"dispute-{recorded.pk}-decided", f"dispute-{recorded.pk}-opened"]
    assert outbox.relay_outbox() == 2 and not mail.outbox  # nobody in the Merchants group: told nobody


@pytest.mark.django_db
def test_merchants_and_on_call_see_disputes_and_cannot_change_them(on_stripe: None, roles: None) -> None:
    _, intent = stripe_order()
    deliver("charge.dispute.created", dispute(intent, "needs_response"), event_id="evt_r")
    process("evt_r")
    recorded = Dispute.objects.get()
    for name, group in [("mona", "Merchants"), ("otto", "On-call")]:
        user = Client()
        user.force_login(staff(name, group))
        assert user.get("/admin/checkout/dispute/").status_code == 200
        page = user.get(f"/admin/checkout/dispute/{recorded.pk}/change/")
        assert page.status_code == 200 and b"fraudulent" in page.content
        changed = user.post(f"/admin/checkout/dispute/{recorded.pk}/change/", {"state": "won"})
        assert changed.status_code == 403
        assert user.post(f"/admin/checkout/dispute/{recorded.pk}/delete/", {"post": "yes"}).status_code == 403
    nobody = Client()
    nobody.force_login(staff("nina"))
    assert nobody.get("/admin/checkout/dispute/").status_code == 403
    recorded.refresh_from_db()
    assert recorded.state == "needs_response"


# The simulated provider's process ---------------------------------------------------------------


def sim(provider: str, path: str, body: dict) -> httpx.Response:
    return httpx.post(f"{provider}{path}", json=body, headers={"Authorization": f"Bearer {PROVIDER_SECRET}"})


def mails_to(address: str) -> list[EmailMessage]:
    """Every message the workers' file backend wrote to this address (unique to its test)."""
    found = []
    for path in sorted(MAIL_DIR.glob("*.log")):
        for raw in path.read_bytes().split(b"\n" + b"-" * 79 + b"\n"):
            message = email.message_from_bytes(raw, policy=email.policy.default)
            if raw.strip() and isinstance(message, EmailMessage) and message["To"] == address:
                found.append(message)
    return found


def told(address: str, message_id: str) -> EmailMessage | None:
    """The mail whose Message-ID has this one's key (the domain is the worker's PUBLIC_BASE_URL's)."""
    key = message_id.strip("<>").split("@")[0]
    return next((m for m in mails_to(address) if str(m["Message-ID"]).startswith(f"<{key}@")), None)


@pytest.mark.django_db(transaction=True)
def test_the_simulator_raises_and_closes_a_dispute_end_to_end(
    live_daphne: str, payment_provider: str, celery_worker: Worker, roles: None
) -> None:
    provider_config(payment_provider, latency_ms=50, failure_rate=0, duplicates=2, late_seconds=0)
    make_drop(slug="sim-dispute", quantity=2, per_buyer_limit=1)
    merchant = staff("mona", "Merchants")
    merchant.email = f"mona-{uuid.uuid4().hex[:6]}@shop.example"
    merchant.save()
    _, started = reserve_and_start_paying(live_daphne, buyer_token("dora"), "sim-dispute")
    order = Order.objects.get(pk=started["order"]["id"])
    session = str(Payment.objects.get(order=order).session_id)
    unpaid = sim(payment_provider, f"/api/sessions/{session}/dispute", {})
    assert unpaid.status_code == 409 and "captured" in unpaid.json()["detail"]  # no money taken yet
    pay_at_provider(started["redirect_url"])
    wait_until(lambda: Payment.objects.get(order=order).state == "captured")

    # an unknown reason, nothing to close: refused by the simulator, nothing sent
    dispute_at, close_at = f"/api/sessions/{session}/dispute", f"/api/sessions/{session}/dispute/close"
    assert sim(payment_provider, dispute_at, {"reason": "boredom"}).status_code == 400
    assert sim(payment_provider, close_at, {"outcome": "won"}).status_code == 409

    opened = sim(payment_provider, dispute_at, {"reason": "product_not_received"})
    assert opened.status_code == 201, opened.text
    assert sim(payment_provider, dispute_at, {}).status_code == 409  # one per payment
    wait_until(lambda: Dispute.objects.filter(order=order).exists())
    recorded = Dispute.objects.get(order=order)
    assert (recorded.state, recorded.reason, recorded.amount_minor) == (
        "needs_response",
        "product_not_received",
        order.amount_minor,
    )
    assert recorded.evidence_due_at == datetime.fromtimestamp(opened.json()["due_by"], UTC)
    wait_until(lambda: told(merchant.email, f"<dispute-{recorded.pk}-opened@floodgate>") is not None)
    opening = told(merchant.email, f"<dispute-{recorded.pk}-opened@floodgate>")
    assert (
        opening is not None
        and (plain := opening.get_body(preferencelist=("plain",))) is not None
        and "product not received" in plain.get_content()
    )

    closed = sim(payment_provider, close_at, {"outcome": "won"})
    assert closed.status_code == 200 and closed.json()["state"] == "won"
    assert sim(payment_provider, close_at, {"outcome": "won"}).status_code == 200  # asked again: the same
    assert sim(payment_provider, close_at, {"outcome": "lost"}).status_code == 409
    wait_until(lambda: Dispute.objects.get(pk=recorded.pk).state == "won")
    wait_until(lambda: told(merchant.email, f"<dispute-{recorded.pk}-decided@floodgate>") is not None)
    assert len(mails_to(merchant.email)) == 2  # opened, decided: once each
    # each webhook came twice (duplicates=2) and was recorded and applied once
    events = WebhookEvent.objects.filter(type__startswith="dispute.")
    assert events.count() == 2 and all(e.processed_at for e in events)
    assert OutboxMessage.objects.filter(topic=outbox.DISPUTE_TOPIC).count() == 2


@pytest.mark.django_db
def test_forged_and_malformed_simulated_dispute_events_are_refused(settings: Settings) -> None:
    settings.PAYMENT_WEBHOOK_SECRET = WEBHOOK_SECRET
    from checkout.providers import signing

    body = {
        "id": "evt_sim",
        "type": "dispute.opened",
        "session_id": "ses_1",
        "reference": str(uuid.uuid4()),
        "amount_minor": 100,
        "currency": "EUR",
        "reason": "fraudulent",
        "dispute_id": "dp_1",
        "state": "needs_response",
        "due_by": DUE_BY,
        "created": int(time.time()),
    }

    def post(data: dict, secret: str = WEBHOOK_SECRET) -> TestResponse:
        raw = json.dumps(data).encode()
        header = signing.sign(secret=secret, body=raw)
        return Client().post(
            SIMULATED, raw, content_type="application/json", headers={signing.SIGNATURE_HEADER: header}
        )

    assert post(body, secret="forged").status_code == 400
    assert post({**body, "state": "sort_of"}).status_code == 400
    assert post({**body, "dispute_id": ""}).status_code == 400
    assert post({**body, "due_by": "soon"}).status_code == 400
    unknown = post(body)  # well formed, signed, of no payment of ours
    assert unknown.status_code == 200
    assert not WebhookEvent.objects.exists() and not Dispute.objects.exists()
