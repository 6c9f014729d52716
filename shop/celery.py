"""`shop.celery:app`: the public name (DESIGN §11) of config.celery's app."""

from config.celery import app

__all__ = ["app"]
