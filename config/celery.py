"""The Celery app (`config.celery:app`): Redis broker, tasks found in the installed apps."""

from __future__ import annotations

import logging
import os

from celery import Celery
from celery.signals import task_success
from django.conf import settings

from ops import schedule

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("floodgate")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


# The tasks beat runs on a schedule, under their names and their old ones (ops/schedule.py).
HOUSEKEEPING = frozenset(schedule.BY_NAME)


class QuietHousekeeping(logging.Filter):
    """Drop the INFO lines Celery writes for every run of a scheduled task: sent (beat), received
    and succeeded (worker), about three a second from the tick alone, which buried the request
    log. The tasks log what they change themselves; failures are WARNING and above and stay.
    LOG_HOUSEKEEPING=1 brings the lines back."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.INFO or settings.LOG_HOUSEKEEPING:
            return True
        args = record.args
        if isinstance(args, dict):  # "Task %(name)s[%(id)s] received / succeeded ..."
            task = args.get("name")
        elif isinstance(args, tuple) and len(args) == 2:  # "Scheduler: Sending due task %s (%s)"
            task = args[1]
        else:
            return True
        return task not in HOUSEKEEPING


for _logger in ("celery.beat", "celery.worker.strategy", "celery.app.trace"):
    logging.getLogger(_logger).addFilter(QuietHousekeeping())


@task_success.connect
def _stamp_duty(sender: object = None, **_: object) -> None:
    """A scheduled duty finished in a worker: it is on schedule, and a web process covering it
    hands it back (ops/duties.py); a run under an old name stamps the duty's row under its new
    one. Trouble stamping only logs: the run itself is done."""
    name = getattr(sender, "name", "")
    if name not in HOUSEKEEPING:
        return
    from django.db import DatabaseError

    from ops import duties  # after Django is set up: the worker imports this module first

    try:
        duties.record_scheduled_run(name)
    except DatabaseError as error:
        logging.getLogger(__name__).warning("could not stamp the run of %s: %s", name, error)
