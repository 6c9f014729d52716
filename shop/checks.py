"""`manage.py check --deploy`: a shop that has not said whose it is (shop.identity) is not ready
to sell; the buyer would read SHOP_NAME and no seller, address or legal pages of the merchant's."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Tags, Warning, register
from django.db import DatabaseError

from shop.models import ShopSettings

IDENTITY_UNSET = "shop.W001"


@register(Tags.compatibility, deploy=True)
def identity_is_set(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    try:
        configured = ShopSettings.objects.filter(pk=1, configured_at__isnull=False).exists()
    except DatabaseError:
        return []  # no database to ask (a build step): the database's own checks speak for it
    if configured:
        return []
    return [
        Warning(
            "The shop's identity is not set: buyers see no seller name, address or contact.",
            hint="Set it in the admin (Shop) or with `manage.py configure_shop --name ... "
            "--legal-name ... --address ... --contact-email ...`.",
            id=IDENTITY_UNSET,
        )
    ]
