from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AdmissionConfig(AppConfig):
    name = "admission"
    verbose_name = _("Admission")
