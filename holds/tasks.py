"""Celery tasks of the hold lifecycle."""

from __future__ import annotations

from celery import shared_task

from holds import services


@shared_task(
    name="holds.reclaim_expired_holds", acks_late=True, time_limit=55, soft_time_limit=50, max_retries=0
)
def reclaim_expired_holds() -> int:
    """Garbage collection, not correctness: expire overdue holds in bounded batches.

    Safe to run twice at once (per-drop advisory lock, SKIP LOCKED); returns holds expired.
    """
    return services.sweep_expired()
