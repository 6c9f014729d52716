"""Celery tasks of the payment saga. Each takes ids, is safe to run twice and calls one service.
The scheduled duties (the outbox's relay, reminders, announcements, the safety nets) are registered
from the table of duties (ops/schedule.py).

acks_late + reject_on_worker_lost (settings): a worker killed mid-task gets the task
redelivered; the service's transaction either committed (the rerun sees it) or not.
"""

from __future__ import annotations

from celery import shared_task

from checkout import refunds, services
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
