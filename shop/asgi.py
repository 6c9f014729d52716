"""`shop.asgi:application`: the public name (docs/API.md) of config.asgi's application."""

from config.asgi import application

__all__ = ["application"]
