"""The shop's identity in templates: `{% shop_identity as shop %}` (name, logo, seller, contact,
accent colour) and `{% shop_name %}`, for pages and e-mails alike (an e-mail has no request)."""

from __future__ import annotations

from django import template

from shop import identity
from shop.identity import Identity

register = template.Library()


@register.simple_tag
def shop_identity() -> Identity:
    return identity.current()


@register.simple_tag
def shop_name() -> str:
    return identity.current().name
