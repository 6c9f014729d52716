from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ShopConfig(AppConfig):
    name = "shop"
    verbose_name = _("Catalogue")

    def ready(self) -> None:
        from shop import checks  # noqa: F401  registers the deploy check of the shop's identity
