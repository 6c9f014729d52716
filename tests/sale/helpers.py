"""What the sale's tests share: a line of buyers drawn before the start, the offer a ticket holds, and
paying a hold at the provider's own process with its webhooks delivered twice and out of order."""

from __future__ import annotations

import random
import uuid

from admission import services as line
from admission.models import Ticket
from checkout import services
from checkout.models import Order, Payment
from checkout.providers.base import WebhookEvent as ProviderEvent
from shop.models import Drop
from tests.checkout.helpers import pay_at_provider


def in_line(drop_id: int, buyers: list[int]) -> dict[int, int]:
    """Every buyer joins before the draw; the draw numbers them. {number: buyer}."""
    drop = current(drop_id)
    for buyer in buyers:
        line.join(drop=drop, buyer_id=buyer)
    line.run_wave(drop, force=True)
    rows = list(Ticket.objects.filter(drop_id=drop_id).values_list("number", "buyer_id"))
    by_number = {number: buyer for number, buyer in rows if number is not None}
    assert len(by_number) == len(rows), "a ticket without a number after the wave"
    return by_number


def current(drop_id: int) -> Drop:
    """The drop as a request reads it (each claim sees its current settings)."""
    return Drop.objects.select_related("product").get(pk=drop_id)


def offer_of(drop_id: int, number: int) -> line.Offer | None:
    return line.offer_of(Ticket.objects.get(drop_id=drop_id, number=number))


def offered_hold(drop_id: int, number: int) -> int:
    """The hold offered to the ticket with this number; it must have one."""
    offer = offer_of(drop_id, number)
    assert offer is not None, f"ticket {number} has no offer"
    return offer.hold


def authorised(payment: Payment) -> ProviderEvent:
    return ProviderEvent(
        event_id=f"evt_{uuid.uuid4().hex}",
        type="payment.authorized",
        session_id=str(payment.session_id),
        reference=str(payment.reference),
        amount_minor=payment.amount_minor,
        currency=payment.currency,
    )


def apply(events: list[ProviderEvent]) -> list[str]:
    """Each event recorded twice (a redelivery under its own id too) and applied in a shuffled order."""
    copies = events + [ProviderEvent(**{**e.__dict__, "event_id": e.event_id + "-again"}) for e in events]
    random.shuffle(copies)
    outcomes = []
    for event in copies:
        pk = services.record_webhook(provider_name="simulated", event=event, payload={"id": event.event_id})
        if pk is not None:
            outcomes.append(services.process_event(event_pk=pk))
    return outcomes


def pay(hold_id: int, buyer_id: int) -> Order:
    """The buyer pays at the provider's page; the authorisation is applied (twice) and captured (twice)."""
    started = services.start_payment(hold_id=hold_id, buyer_id=buyer_id)
    pay_at_provider(started.payment.redirect_url)
    payment = Payment.objects.get(pk=started.payment.pk)
    assert "confirmed" in apply([authorised(payment)])
    for _ in range(2):
        services.settle_payment(payment_pk=payment.pk)
    return Order.objects.get(pk=started.order.pk)
