"""`shop.asgi:application`: the public name (DESIGN §11) of config.asgi's application."""

from config.asgi import application

__all__ = ["application"]
