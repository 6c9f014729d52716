"""Blank erased buyers' shipping addresses whose orders are past ORDER_RECORDS_RETENTION_DAYS."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from accounts import privacy


class Command(BaseCommand):
    help = (
        "Blank erased buyers' addresses kept with orders older than ORDER_RECORDS_RETENTION_DAYS (run daily)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        blanked = privacy.forget_expired_records()
        self.stdout.write(f"{blanked} kept address(es) of erased buyers blanked.")
