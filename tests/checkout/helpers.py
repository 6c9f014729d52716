"""What the saga's tests share: sales waiting for their payment's authorisation to be applied, and
a buyer driving the saga over HTTP against the provider's process."""

from __future__ import annotations

import hashlib
import hmac
import importlib
import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal

import httpx

from checkout import refunds
from checkout import services as checkout
from checkout.models import Order, Payment, PaymentState, Refund
from checkout.providers.base import WebhookEvent as ProviderEvent
from holds import services as holds
from shop.models import ApiToken, Drop, Variant
from tests.conftest import PROVIDER_SECRET, STRIPE_WEBHOOK_SECRET
from tests.factories import make_buyer


@dataclass(frozen=True)
class Sale:
    hold: int
    order: int
    payment: int
    event: int


def pending_sales(drop: Drop, buyers: list[int], *, variant: Variant | None = None) -> list[Sale]:
    """A hold (of `variant`; None: the drop's only one), an order, a pending payment and its
    recorded authorisation per buyer."""
    sales = []
    for buyer in buyers:
        hold = holds.reserve(drop=drop, buyer_id=buyer, quantity=1, idempotency_key="k", variant=variant).hold
        order = Order.objects.create(
            hold=hold, buyer_id=buyer, drop=drop, quantity=1, amount_minor=4900, currency="EUR"
        )
        session = f"ses_{uuid.uuid4().hex}"
        payment = Payment.objects.create(
            order=order,
            provider="simulated",
            session_id=session,
            state=PaymentState.PENDING,
            amount_minor=4900,
            currency="EUR",
        )
        payload = {
            "id": f"evt_{session}",
            "type": "payment.authorized",
            "session_id": session,
            "reference": str(payment.reference),
            "amount_minor": 4900,
            "currency": "EUR",
            "reason": "",
        }
        event_pk = checkout.record_webhook(
            provider_name="simulated",
            event=ProviderEvent(
                event_id=payload["id"],
                type="payment.authorized",
                session_id=session,
                reference=payload["reference"],
                amount_minor=4900,
                currency="EUR",
            ),
            payload=payload,
        )
        assert event_pk is not None
        sales.append(Sale(hold=hold.pk, order=order.pk, payment=payment.pk, event=event_pk))
    return sales


def buyer_token(name: str) -> str:
    user = make_buyer(name)
    token = f"token-{name}-{uuid.uuid4().hex[:6]}"
    ApiToken.objects.create(user=user, digest=ApiToken.digest_of(token))
    return token


def api(base: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=10)


def provider_config(provider: str, **config: object) -> None:
    answer = httpx.post(
        f"{provider}/api/config", json=config, headers={"Authorization": f"Bearer {PROVIDER_SECRET}"}
    )
    answer.raise_for_status()


def provider_session(provider: str, session_id: str) -> dict:
    headers = {"Authorization": f"Bearer {PROVIDER_SECRET}"}
    return httpx.get(f"{provider}/api/sessions/{session_id}", headers=headers).json()


def reserve_and_start_paying(base: str, token: str, slug: str) -> tuple[int, dict]:
    with api(base, token) as client:
        hold = client.post(f"/api/drops/{slug}/holds", json={"quantity": 1}, headers={"Idempotency-Key": "k"})
        assert hold.status_code == 201, hold.text
        started = client.post(f"/api/holds/{hold.json()['id']}/payment")
        assert started.status_code == 202, started.text
    return hold.json()["id"], started.json()


def pay_at_provider(redirect_url: str, action: str = "pay") -> httpx.Response:
    answer = httpx.post(redirect_url, data={"action": action}, follow_redirects=False, timeout=10)
    assert answer.status_code == 303, answer.text
    return answer


def wait_until(check: Callable[[], bool], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def confirmed_order(
    drop: Drop, *, quantity: int = 2, captured: bool = True, tax_minor: int = 0, tax_rate: str = "0"
) -> Order:
    """An order sold through the saga (its authorisation applied by process_event); its payment
    marked captured, as settle_payment leaves it, unless captured=False."""
    buyer = make_buyer()
    hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=quantity, idempotency_key="k").hold
    order = Order.objects.create(
        hold=hold,
        buyer=buyer,
        drop=drop,
        quantity=quantity,
        amount_minor=1000 * quantity,
        currency="EUR",
        tax_minor=tax_minor,
        tax_rate=Decimal(tax_rate),
    )
    session = f"ses_{uuid.uuid4().hex}"
    payment = Payment.objects.create(
        order=order,
        provider="simulated",
        session_id=session,
        state="pending",
        amount_minor=order.amount_minor,
        currency="EUR",
    )
    event = ProviderEvent(
        event_id=f"evt_{session}",
        type="payment.authorized",
        session_id=session,
        reference=str(payment.reference),
        amount_minor=order.amount_minor,
        currency="EUR",
    )
    event_pk = checkout.record_webhook(provider_name="simulated", event=event, payload={"id": event.event_id})
    assert event_pk is not None and checkout.process_event(event_pk=event_pk) == "confirmed"
    if captured:
        Payment.objects.filter(pk=payment.pk).update(state=PaymentState.CAPTURED)
    order.refresh_from_db()
    return order


def accepted(refund: Refund) -> str:
    """Record the provider's yes the way send_refund does, for tests about our side of a refund."""
    return refunds._record(refund, "succeeded", f"re_{refund.pk}", "")


def stripe_signature(body: bytes, *, secret: str = STRIPE_WEBHOOK_SECRET, at: int | None = None) -> str:
    """Stripe's documented scheme: t=<unix>,v1=hex(HMAC-SHA256(secret, "<t>.<body>"))."""
    t = int(time.time()) if at is None else at
    mac = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


def stripe_event(kind: str, thing: dict, *, event_id: str | None = None) -> bytes:
    """An event as Stripe's API reference shows it (object "event", the thing under data.object)."""
    return json.dumps(
        {
            "id": event_id or f"evt_{uuid.uuid4().hex[:24]}",
            "object": "event",
            "api_version": "2024-06-20",
            "created": int(time.time()),
            "data": {"object": thing},
            "livemode": False,
            "pending_webhooks": 1,
            "request": {"id": None, "idempotency_key": None},
            "type": kind,
        }
    ).encode()


@contextmanager
def stripe_api_at(settings: object, base: str) -> Iterator[None]:
    """STRIPE_API_BASE at `base` in this process, its URLs loaded again for it (config/urls.py mounts
    the card fallback only off Stripe's own API), and back as they were after."""
    from django.urls import clear_url_caches

    before = settings.STRIPE_API_BASE
    settings.STRIPE_API_BASE = base
    importlib.reload(importlib.import_module("config.urls"))
    clear_url_caches()
    try:
        yield
    finally:
        settings.STRIPE_API_BASE = before
        importlib.reload(importlib.import_module("config.urls"))
        clear_url_caches()
