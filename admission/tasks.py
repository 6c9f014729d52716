"""Celery tasks of the waiting room. Its scheduled duty, admission.tick, is registered from the
table of duties (ops/schedule.py)."""

from __future__ import annotations

from celery import shared_task

from admission import services


@shared_task(name="admission.start_wave", time_limit=20, soft_time_limit=15, max_retries=0)
def start_wave(drop_id: int) -> bool:
    """The draw and first wave of a waiting room at its start (sent with the start as its ETA)."""
    return services.start_wave(drop_id) is not None
