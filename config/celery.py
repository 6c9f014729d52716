"""The Celery app (`config.celery:app`): Redis broker, tasks found in the installed apps."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("floodgate")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
