from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class HoldsConfig(AppConfig):
    name = "holds"
    verbose_name = _("Holds")
