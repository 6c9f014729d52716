"""What on-call needs kept in the database: when each scheduled duty last ran, and who covers it;
the rehearsals' reports."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now


class Duty(models.Model):
    """One of beat's scheduled tasks (ops/duties.py). Celery's runs stamp `scheduled_ran_at`; when
    that falls late, one web process at a time takes the duty over under a lease (`lease_until`)
    and stamps `ran_at` alone, until beat's runs come back."""

    name = models.CharField(max_length=100, primary_key=True)  # the Celery task's name
    period_seconds = models.FloatField()
    late_after_seconds = models.FloatField()  # Celery's last run older than this: a web process covers
    ran_at = models.DateTimeField(null=True)  # the last finished run, by anyone
    ran_by = models.CharField(max_length=200, blank=True)  # "celery" or "web <host>:<pid>"
    scheduled_ran_at = models.DateTimeField()  # the last finished run from Celery (beat and worker)
    lease_until = models.DateTimeField(null=True)
    leased_by = models.CharField(max_length=200, blank=True)
    covered_runs = models.BigIntegerField(default=0)  # runs a web process made in Celery's place
    last_error = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class RehearsalReport(models.Model):
    """A finished rehearsal's report, kept in the database so every web replica can show it (the
    engine runs on one host; its working files stay there). The drop is the one rehearsed, not its copy."""

    drop = models.ForeignKey("shop.Drop", on_delete=models.CASCADE, related_name="rehearsal_reports")
    copy_slug = models.SlugField(max_length=100)
    buyers = models.PositiveIntegerField()
    summary = models.JSONField()
    html = models.TextField()
    made_at = models.DateTimeField(db_default=Now())

    class Meta:
        ordering = ["-made_at", "-id"]
        indexes = [models.Index(fields=["drop", "-made_at"], name="ops_rehearsalreport_latest")]

    def __str__(self) -> str:
        return f"rehearsal {self.copy_slug}"
