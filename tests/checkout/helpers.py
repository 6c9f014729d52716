"""What the saga's tests share: sales waiting for their payment's authorisation to be applied."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from checkout import services as checkout
from checkout.models import Order, Payment, PaymentState
from checkout.providers.base import WebhookEvent as ProviderEvent
from holds import services as holds
from shop.models import Drop


@dataclass(frozen=True)
class Sale:
    hold: int
    order: int
    payment: int
    event: int


def pending_sales(drop: Drop, buyers: list[int]) -> list[Sale]:
    """A hold, an order, a pending payment and its recorded authorisation per buyer."""
    sales = []
    for buyer in buyers:
        hold = holds.reserve(drop=drop, buyer_id=buyer, quantity=1, idempotency_key="k").hold
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
