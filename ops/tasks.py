"""Celery tasks of the catalogue: the invariant watchdog."""

from __future__ import annotations

from celery import shared_task

from ops import switch


@shared_task(name="ops.watch_invariants", time_limit=30, soft_time_limit=25, max_retries=0)
def watch_invariants() -> int:
    """Check every drop on sale; pause any that drifts. Returns how many drifted."""
    return switch.watch_invariants()
