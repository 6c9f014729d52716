# Load the Celery app with Django, so shared_task sends to Floodgate's broker (not Celery's default).
from config.celery import app as celery_app

__all__ = ["celery_app"]
