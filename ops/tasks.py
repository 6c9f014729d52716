"""Celery tasks of operations: the invariant watchdog, rehearsals whose time is up, the draw's relays."""

from __future__ import annotations

from celery import shared_task

from ops import preflight, rehearsal, switch


@shared_task(name="ops.watch_invariants", time_limit=30, soft_time_limit=25, max_retries=0)
def watch_invariants() -> int:
    """Check every drop on sale; pause any that drifts. Returns how many drifted."""
    return switch.watch_invariants()


@shared_task(name="ops.end_rehearsals", time_limit=120, soft_time_limit=100, max_retries=0)
def end_rehearsals() -> int:
    """Remove the buyers of every rehearsal whose copy's time ran out. Returns how many ended."""
    return rehearsal.end_overdue()


@shared_task(name="ops.check_draw_beacons", time_limit=60, soft_time_limit=50, max_retries=0)
def check_draw_beacons() -> int:
    """Can the coming draws read their drand round? Returns how many cannot (each merchant told once)."""
    return preflight.check_draw_beacons()
