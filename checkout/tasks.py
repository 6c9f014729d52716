"""Celery tasks of the payment saga. Each takes ids, is safe to run twice and calls one service.

acks_late + reject_on_worker_lost (settings): a worker killed mid-task gets the task
redelivered; the service's transaction either committed (the rerun sees it) or not.
"""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError

from checkout import exchange, outbox, push, raffles, refunds, reminders, selectors, services
from checkout.providers.base import ProviderError


@shared_task(
    name="checkout.process_webhook_event",
    acks_late=True,
    time_limit=30,
    max_retries=5,
    autoretry_for=(ConnectionError,),
    retry_backoff=True,
)
def process_webhook_event(event_pk: int) -> str:
    return services.process_event(event_pk=event_pk)


@shared_task(
    name="checkout.settle_payment",
    acks_late=True,
    time_limit=30,
    max_retries=10,
    autoretry_for=(ProviderError,),
    retry_backoff=2,
    retry_backoff_max=60,
)
def settle_payment(payment_pk: int) -> str:
    return services.settle_payment(payment_pk=payment_pk)


@shared_task(name="checkout.settle_unsettled_payments", time_limit=30)
def settle_unsettled_payments() -> int:
    """Beat safety net: capture or void what a lost task left pending, and pay the exchange's sellers
    whose buyers' captures were recorded without their pay-out."""
    ids = selectors.unsettled_payment_ids()
    for payment_pk in ids:
        settle_payment.delay(payment_pk)
    exchange.pay_out_missed()
    return len(ids)


@shared_task(
    name="checkout.send_refund",
    acks_late=True,
    time_limit=30,
    max_retries=10,
    autoretry_for=(ProviderError,),
    retry_backoff=2,
    retry_backoff_max=60,
)
def send_refund(refund_pk: int) -> str:
    return refunds.send_refund(refund_pk=refund_pk)


@shared_task(name="checkout.relay_outbox", acks_late=True, time_limit=60)
def relay_outbox() -> int:
    return outbox.relay_outbox()


@shared_task(
    name="checkout.send_reminders",
    acks_late=True,
    time_limit=60,
    max_retries=5,
    autoretry_for=(OperationalError,),  # a lock wait past its timeout, a lost connection
    retry_backoff=1,
    retry_backoff_max=30,
)
def send_reminders(batch: int = reminders.BATCH) -> int:
    """Beat, every few seconds: reminders of drops that opened become outbox e-mails, once each."""
    return reminders.send_due_reminders(batch=batch)


@shared_task(name="checkout.sweep", time_limit=30)
def sweep() -> dict[str, int]:
    """Beat safety net: re-run events and refunds whose task was lost; fail orders nobody paid for."""
    events = selectors.stale_event_ids()
    for event_pk in events:
        process_webhook_event.delay(event_pk)
    unsent = selectors.unsent_refund_ids()
    for refund_pk in unsent:
        send_refund.delay(refund_pk)
    return {
        "events_requeued": len(events),
        "refunds_resent": len(unsent),
        "orders_abandoned": services.fail_abandoned_orders(),
    }


@shared_task(name="checkout.announce_raffles", acks_late=True, time_limit=60, max_retries=0)
def announce_raffles() -> int:
    """Beat, every few seconds: raffle results now known become outbox e-mails, once per entrant."""
    return raffles.announce_raffle_results()


@shared_task(name="checkout.announce_turns", acks_late=True, time_limit=30, max_retries=0)
def announce_turns() -> int:
    """Beat, every second: subscribed buyers just admitted or offered a unit get a push, once each
    (the outbox's unique key); a run lost or doubled changes nothing. Returns how many written."""
    return push.announce_turns()
