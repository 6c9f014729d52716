from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class FairnessConfig(AppConfig):
    name = "fairness"
    verbose_name = _("Fairness")
