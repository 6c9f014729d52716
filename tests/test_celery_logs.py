"""The scheduled tasks' per-run Celery lines stay out of the log; everything else stays in."""

from __future__ import annotations

import logging

import pytest
from celery.app.trace import LOG_RECEIVED, LOG_SUCCESS

from config.celery import QuietHousekeeping


def record(level: int, message: str, args: object) -> logging.LogRecord:
    return logging.LogRecord("celery", level, __file__, 1, message, args, None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("level", "message", "args", "kept"),
    [
        (logging.INFO, "Scheduler: Sending due task %s (%s)", ("admission-tick", "admission.tick"), False),
        (logging.INFO, LOG_RECEIVED, {"id": "1", "name": "admission.tick"}, False),
        (
            logging.INFO,
            LOG_SUCCESS,
            {"id": "1", "name": "admission.tick", "return_value": 1, "runtime": 0.1},
            False,
        ),
        (
            logging.INFO,
            LOG_SUCCESS,
            {"id": "1", "name": "holds.reclaim_expired_holds", "return_value": 0, "runtime": 0},
            False,
        ),
        # the offers under their name and under the old one a queued message may carry
        (logging.INFO, LOG_RECEIVED, {"id": "1", "name": "sale.offer_returns"}, False),
        (logging.INFO, LOG_RECEIVED, {"id": "1", "name": "holds.offer_returns"}, False),
        # a webhook's processing is news, and a failing tick too
        (
            logging.INFO,
            LOG_SUCCESS,
            {"id": "2", "name": "checkout.process_webhook_event", "return_value": "ok", "runtime": 0},
            True,
        ),
        (logging.ERROR, "Task %(name)s[%(id)s] raised", {"id": "1", "name": "admission.tick"}, True),
        (logging.INFO, "celery@host ready.", (), True),
    ],
)
def test_only_the_scheduled_tasks_routine_lines_are_dropped(
    settings, level: int, message: str, args: object, kept: bool
) -> None:
    settings.LOG_HOUSEKEEPING = False
    assert QuietHousekeeping().filter(record(level, message, args)) is kept
    settings.LOG_HOUSEKEEPING = True
    assert QuietHousekeeping().filter(record(level, message, args)) is True
