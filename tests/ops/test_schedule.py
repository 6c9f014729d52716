"""One table of duties (ops/schedule.py): beat's schedule, the Celery tasks and the web's cover come
from it, each duty with one body; a task's old name still runs it and still stamps its row."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from celery.signals import task_success
from django.conf import settings
from django.db import OperationalError
from django.utils import timezone

from config.celery import HOUSEKEEPING
from config.celery import app as celery_app
from ops import duties, schedule, tasks
from ops.models import Duty


def test_beats_schedule_is_the_table_with_the_environments_periods(monkeypatch) -> None:
    assert {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()} == set(schedule.DUTIES)
    monkeypatch.setenv("RECLAIM_EVERY_SECONDS", "2")
    entry = schedule.beat_schedule()["holds.reclaim_expired_holds"]
    assert (entry["schedule"], entry["options"]) == (2.0, {"expires": 10})
    assert schedule.beat_schedule()["sale.offer_returns"]["schedule"] == 1.0


def test_every_name_of_a_duty_is_a_task_that_runs_the_covers_body() -> None:
    # ops.tasks (imported, as the worker's autodiscovery does) registered them from the table.
    for duty in schedule.DUTIES.values():
        body = duties.body(duty.task)
        for name in duty.names:
            task = celery_app.tasks[name]
            runs: object = type(task).run  # the instance's run may be Celery's retrying wrapper
            assert runs is body, name
            assert (task.time_limit, task.soft_time_limit, task.acks_late) == (
                duty.time_limit,
                duty.soft_time_limit,
                True,
            )
    assert schedule.BY_NAME["holds.offer_returns"].task == "sale.offer_returns"
    reminders: Any = celery_app.tasks["checkout.send_reminders"]  # autoretry's attributes: not in the stubs
    assert (reminders.autoretry_for, reminders.max_retries) == ((OperationalError,), 5)
    assert reminders.retry_backoff_max == tasks.RETRY_BACKOFF_MAX
    assert {"sale.offer_returns", "holds.offer_returns", "admission.tick"} <= HOUSEKEEPING


@pytest.mark.django_db(transaction=True)
def test_a_run_under_the_old_name_stamps_the_duty_and_an_old_row_is_not_shown() -> None:
    duties.ensure()
    Duty.objects.update(scheduled_ran_at=timezone.now() - timedelta(minutes=5))
    Duty.objects.create(  # the row the offers had under their old name
        name="holds.offer_returns",
        period_seconds=1,
        late_after_seconds=3,
        scheduled_ran_at=timezone.now() - timedelta(days=1),
    )
    assert "sale.offer_returns" in duties.take_late(["sale.offer_returns"], me="web a")

    task_success.send(sender=celery_app.tasks["holds.offer_returns"], result=0)  # the worker's signal

    stamped = Duty.objects.get(name="sale.offer_returns")
    assert (stamped.ran_by, stamped.leased_by) == ("celery", "")
    assert Duty.objects.get(name="holds.offer_returns").ran_by == ""  # the old row is left alone ...
    assert {d.name for d in duties.states()} == set(schedule.DUTIES)  # ... and shown nowhere
