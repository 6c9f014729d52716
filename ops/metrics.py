"""Per-drop gauges for /metrics, read from the database at scrape time."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from django.db import connection
from django.utils import timezone

from admission import drawing
from checkout.selectors import outbox_backlog
from core.errors import NotFound
from core.metrics import Gauge
from holds.counts import invariant
from inventory.selectors import stranded_units
from ops import duties, sql
from shop.models import Drop

RECENT = timedelta(hours=1)
MAX_GAUGE_DROPS = 50


def drop_slugs(drop_ids: list[int]) -> dict[int, str]:
    return dict(Drop.objects.filter(pk__in=drop_ids).values_list("id", "slug"))


def drop_gauges(*, now: datetime | None = None) -> list[Gauge]:
    """Per-drop gauges from the database for live, upcoming-within-the-hour and recently ended drops.

    At most 50 drops, newest start first; one invariant statement each (one snapshot per drop).
    """
    now = now or timezone.now()
    drops = list(
        Drop.objects.filter(ends_at__gt=now - RECENT, starts_at__lte=now + RECENT)
        .order_by("-starts_at")
        .values_list("id", "slug")[:MAX_GAUGE_DROPS]
    )
    holds: list[tuple[Mapping[str, str], float]] = []
    expired_unsold: list[tuple[Mapping[str, str], float]] = []
    drift: list[tuple[Mapping[str, str], float]] = []
    stranded: list[tuple[Mapping[str, str], float]] = []
    for drop_id, slug in drops:
        try:
            state = invariant(drop_id=drop_id)
        except NotFound:
            continue  # deleted since the list was read
        holds += [
            ({"drop": slug, "state": "held"}, state.held),
            ({"drop": slug, "state": "sold"}, state.sold),
            ({"drop": slug, "state": "refunded"}, state.refunded),
            ({"drop": slug, "state": "exchange"}, state.exchange),
            ({"drop": slug, "state": "expired"}, state.expired_holds),
        ]
        expired_unsold.append(({"drop": slug}, state.expired_unreclaimed))
        drift.append(({"drop": slug}, state.drift))
        stranded.append(({"drop": slug}, stranded_units(drop_id=drop_id)))
    return [
        Gauge(
            "floodgate_holds",
            "Units held, sold, refunded (kept off sale) and on the exchange, and expired holds, per drop.",
            holds,
        ),
        Gauge(
            "floodgate_expired_unsold_holds",
            "Units in holds past their expiry that the sweeper has not reclaimed yet.",
            expired_unsold,
        ),
        Gauge(
            "floodgate_invariant_drift",
            "quantity - (available + held + sold + refunded + exchange); must be 0.",
            drift,
        ),
        Gauge(
            "floodgate_stranded_units",
            "Units a full-limit claim cannot reach (no bucket holds that many); 0 when healthy.",
            stranded,
        ),
    ]


def lock_waits() -> int:
    """Sessions of this database waiting on a lock now (the dashboard and /metrics)."""
    with connection.cursor() as cursor:
        cursor.execute(sql.LOCK_WAITS)
        return int(cursor.fetchone()[0])


def duty_gauges() -> list[Gauge]:
    """Each scheduled duty: how long since it ran, when that is late, and whether Celery is late
    with it (a web process then covers it: beat or the worker is down)."""
    duties.ensure()  # a duty no run has stamped yet shows (and grows late) from the first scrape
    found = duties.states()
    return [
        Gauge(
            "floodgate_duty_seconds_since_run",
            "Seconds since the scheduled duty last finished a run, by Celery or a web process.",
            [({"duty": d.name}, d.age) for d in found],
        ),
        Gauge(
            "floodgate_duty_late_after_seconds",
            "Past this many seconds without a run the duty is late (two periods and a second).",
            [({"duty": d.name}, d.late_after) for d in found],
        ),
        Gauge(
            "floodgate_duty_covered",
            "1 while Celery is late with the duty (web processes then run it, unless DUTY_TAKEOVER=0).",
            [({"duty": d.name}, float(d.covered)) for d in found],
        ),
    ]


def draw_beacon_gauges(*, now: datetime | None = None) -> list[Gauge]:
    """Waiting rooms starting within the hour: 1 if the last check could not read a valid drand round."""
    return [
        Gauge(
            "floodgate_draw_beacon_unreachable",
            "1 if the last check (every minute, the hour before the start) read no valid drand round "
            "for the drop's draw; 0 if it did. The draw would fall back to the seed alone.",
            [({"drop": r.slug}, float(r.unreachable)) for r in drawing.preflight_states(now=now)],
        )
    ]


def database_gauges() -> list[Gauge]:
    """The database's side: sessions waiting on a lock, and the outbox not yet delivered."""
    backlog, oldest = outbox_backlog()
    return [
        Gauge("floodgate_lock_waits", "Database sessions waiting for a lock now.", [({}, lock_waits())]),
        Gauge("floodgate_outbox_backlog", "Outbox messages not delivered yet.", [({}, backlog)]),
        Gauge(
            "floodgate_outbox_oldest_seconds",
            "Age of the oldest undelivered outbox message (0 with none).",
            [({}, oldest)],
        ),
    ]
