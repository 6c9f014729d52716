"""Celery tasks of the sale's flows. Its scheduled duty, sale.offer_returns, is registered from the
table of duties (ops/schedule.py)."""

from __future__ import annotations

from celery import shared_task

from sale import offers


@shared_task(name="sale.offer_now", time_limit=20, soft_time_limit=15, max_retries=0, ignore_result=True)
def offer_now(drop_id: int) -> int:
    """Units just came back to this drop's line (a release, a refund put back on sale): offer
    them now rather than on beat's next tick. Another offerer holding the line: the tick does it."""
    return offers.offer_now(drop_id)
