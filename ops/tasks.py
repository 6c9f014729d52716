"""The Celery tasks of the scheduled duties, every one registered here from the table (ops/schedule.py).

Each duty's task runs its body, the service function a web process runs when it covers for Celery
(ops/duties.py), and is registered under its name and under each old name a message queued or
scheduled before the rename may still carry. The tasks that are not duties (a webhook event, a
payment to settle, a refund to send, a wave to start, units to offer now) stay in their packages.
"""

from __future__ import annotations

from typing import TypedDict

from celery import shared_task
from django.utils.module_loading import import_string

from ops import duties, schedule

# A duty retried on an exception (schedule.Duty.retry_on) waits 1, 2, 4 ... s, at most 30 s.
RETRY_BACKOFF = 1
RETRY_BACKOFF_MAX = 30


class Options(TypedDict, total=False):
    """The Celery options a duty sets; what it leaves out stays the app's (acks_late, for one)."""

    time_limit: int
    soft_time_limit: int
    max_retries: int
    autoretry_for: tuple[type[BaseException], ...]
    retry_backoff: int
    retry_backoff_max: int


def options(duty: schedule.Duty) -> Options:
    found = Options(time_limit=duty.time_limit, max_retries=duty.max_retries)
    if duty.soft_time_limit is not None:
        found["soft_time_limit"] = duty.soft_time_limit
    if duty.retry_on:
        found["autoretry_for"] = tuple(import_string(path) for path in duty.retry_on)
        found["retry_backoff"], found["retry_backoff_max"] = RETRY_BACKOFF, RETRY_BACKOFF_MAX
    return found


def register(duty: schedule.Duty) -> None:
    """The duty's task under each of its names, every one running the same body."""
    for name in duty.names:
        shared_task(name=name, **options(duty))(duties.body(duty.task))


for duty in schedule.DUTIES.values():
    register(duty)
