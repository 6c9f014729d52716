"""Celery tasks of the hold lifecycle."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from holds import offers, services
from shop import selectors as catalogue


@shared_task(
    name="holds.reclaim_expired_holds", acks_late=True, time_limit=55, soft_time_limit=50, max_retries=0
)
def reclaim_expired_holds() -> int:
    """Garbage collection, not correctness: expire overdue holds in bounded batches.

    Safe to run twice at once (per-drop advisory lock, SKIP LOCKED); returns holds expired.
    """
    return services.sweep_expired()


@shared_task(name="holds.offer_returns", time_limit=20, soft_time_limit=15, max_retries=0)
def offer_returns() -> int:
    """Returned units of waiting-room drops to the next tickets in line (beat: every second)."""
    return offers.offer_all(catalogue.active_drops(timezone.now()))
