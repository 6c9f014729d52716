"""Celery tasks of the sale's flows."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from sale import offers


# The name predates the sale package; beat's schedule and the duties know it by this name.
@shared_task(name="holds.offer_returns", time_limit=20, soft_time_limit=15, max_retries=0)
def offer_returns() -> int:
    """Returned units of waiting-room drops, and units on an exchange, to the next tickets in line
    (beat: every second)."""
    return offers.tick(timezone.now())


@shared_task(name="sale.offer_now", time_limit=20, soft_time_limit=15, max_retries=0, ignore_result=True)
def offer_now(drop_id: int) -> int:
    """Units just came back to this drop's line (a release, a refund put back on sale): offer
    them now rather than on beat's next tick. Another offerer holding the line: the tick does it."""
    return offers.offer_now(drop_id)
