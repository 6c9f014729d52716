"""A drop's public report: its figures and the root committing to each entry's outcome, kept once made."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _


class Report(models.Model):
    """Written once, when the drop is over (fairness/services.py); only the merchant's note changes."""

    drop = models.OneToOneField(
        "shop.Drop", primary_key=True, on_delete=models.CASCADE, related_name="report", verbose_name=_("drop")
    )
    published_at = models.DateTimeField(db_default=Now(), verbose_name=_("published at"))
    figures = models.JSONField(verbose_name=_("figures"))
    # Every entry's outcome as hashed into the tree (fairness/outcomes.py), in entry order.
    leaves = models.JSONField(verbose_name=_("outcomes"))
    root = models.CharField(max_length=64, verbose_name=_("root"))
    size = models.PositiveIntegerField(verbose_name=_("entries"))  # len(leaves), read without them
    note = models.TextField(
        blank=True,
        default="",
        help_text=_(
            "Your words beside the figures, shown to everyone. The figures themselves cannot be edited."
        ),
        verbose_name=_("merchant's note"),
    )

    class Meta:
        verbose_name = _("public report")
        verbose_name_plural = _("public reports")
        constraints = [
            models.CheckConstraint(
                condition=Q(root__regex=r"^[0-9a-f]{64}$"), name="fairness_report_root_hex"
            ),
        ]

    def __str__(self) -> str:
        return f"report of drop {self.drop_id}"
