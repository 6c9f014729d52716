"""What on-call needs kept in the database: when each scheduled duty last ran, and who covers it;
the rehearsals' reports."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _


class Duty(models.Model):
    """One of beat's scheduled tasks (ops/duties.py). Celery's runs stamp `scheduled_ran_at`; when
    that falls late, one web process at a time takes the duty over under a lease (`lease_until`)
    and stamps `ran_at` alone, until beat's runs come back."""

    name = models.CharField(
        max_length=100, primary_key=True, verbose_name=_("name")
    )  # the Celery task's name
    period_seconds = models.FloatField(verbose_name=_("period seconds"))
    late_after_seconds = models.FloatField(
        verbose_name=_("late after seconds")
    )  # Celery's last run older than this: a web process covers
    ran_at = models.DateTimeField(null=True, verbose_name=_("ran at"))  # the last finished run, by anyone
    ran_by = models.CharField(
        max_length=200, blank=True, verbose_name=_("ran by")
    )  # "celery" or "web <host>:<pid>"
    scheduled_ran_at = models.DateTimeField(
        verbose_name=_("scheduled ran at")
    )  # the last finished run from Celery (beat and worker)
    lease_until = models.DateTimeField(null=True, verbose_name=_("lease until"))
    leased_by = models.CharField(max_length=200, blank=True, verbose_name=_("leased by"))
    covered_runs = models.BigIntegerField(
        default=0, verbose_name=_("covered runs")
    )  # runs a web process made in Celery's place
    last_error = models.CharField(max_length=300, blank=True, verbose_name=_("last error"))

    class Meta:
        verbose_name = _("duty")
        verbose_name_plural = _("duties")
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class RehearsalReport(models.Model):
    """A finished rehearsal's report, kept in the database so every web replica can show it (the
    engine runs on one host; its working files stay there). The drop is the one rehearsed, not its copy."""

    drop = models.ForeignKey(
        "shop.Drop", on_delete=models.CASCADE, related_name="rehearsal_reports", verbose_name=_("drop")
    )
    copy_slug = models.SlugField(max_length=100, verbose_name=_("copy slug"))
    buyers = models.PositiveIntegerField(verbose_name=_("buyers"))
    summary = models.JSONField(verbose_name=_("summary"))
    html = models.TextField(verbose_name=_("html"))
    made_at = models.DateTimeField(db_default=Now(), verbose_name=_("made at"))

    class Meta:
        verbose_name = _("rehearsal report")
        verbose_name_plural = _("rehearsal reports")
        ordering = ["-made_at", "-id"]
        indexes = [models.Index(fields=["drop", "-made_at"], name="ops_rehearsalreport_latest")]

    def __str__(self) -> str:
        return f"rehearsal {self.copy_slug}"
