"""`shop.celery:app`: the public name (docs/API.md) of config.celery's app."""

from config.celery import app

__all__ = ["app"]
