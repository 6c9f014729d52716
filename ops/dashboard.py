"""What on-call sees: per drop the invariant, the traffic and the kill switch's history.

Reads the same invariant SQL as `check_invariant` and the watchdog, the waiting room's
snapshot (line length and admitted mark) and, for gated drops, the Redis gate's count.
"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from django.utils.translation import gettext
from redis.exceptions import RedisError

from admission import state
from checkout.selectors import open_disputes, payments_needing_attention, sold_value
from core import formatting, metrics
from holds import gate
from holds.counts import invariant, invariant_by_variant
from inventory.selectors import bucket_levels, stranded_units
from ops import duties
from ops.metrics import lock_waits
from shop.models import Drop, PauseEvent

RECENTLY_ENDED = timedelta(minutes=30)


def watched_drops() -> list[Drop]:
    """Drops on sale now, paused, starting within the hour or ended in the last half hour."""
    now = timezone.now()
    return list(
        Drop.objects.select_related("product")
        .filter(starts_at__lte=now + timedelta(hours=1), ends_at__gte=now - RECENTLY_ENDED)
        .order_by("starts_at", "pk")[:20]  # a fixed order: a paused card must not move under the mouse
    )


def traffic(drop_id: int) -> dict[str, object]:
    """Rates, latency and the 10-minute series; empty (not an error page) while Redis is out."""
    try:
        return {
            **metrics.rates(drop_id=drop_id),
            **metrics.latency_quantiles(drop_id=drop_id),
            "series": metrics.series(drop_id=drop_id, minutes=10),
        }
    except RedisError:
        return {
            "claims_per_second": None,
            "rejections_per_second": None,
            "p50_ms": None,
            "p99_ms": None,
            "series": [],
        }


def queues(drops: list[Drop]) -> dict[int, dict[str, int]]:
    """Waiting-room drops' line (buyers not yet admitted), admitted mark and units on their way
    back to the line (returned, not yet offered), from one statement."""
    rooms = [d for d in drops if d.waiting_room]
    if not rooms:
        return {}
    return {
        snap.drop.pk: {
            "queue_length": int(snap.queue_json()["waiting"]),
            "admitted_through": snap.admitted_through,
            "returning": snap.returning,
        }
        for snap in state.compute(rooms)
    }


def gates(drops: list[Drop]) -> dict[int, gate.GateStatus]:
    """Gated drops' Redis counts; empty while Redis is out (the cards then show no count)."""
    gated = [d.pk for d in drops if d.redis_gate]
    if not gated:
        return {}
    try:
        return gate.status(gated)
    except (RedisError, OSError):
        return {}


def gate_panel(drop: Drop, claimable: int, status: gate.GateStatus | None) -> dict[str, object]:
    """The gate's count next to what the database would let a claim take.

    They differ by the claims in flight and, for up to a second (the reconcile), by units
    that came back; a larger gap is flagged for a look. It is not drift: the count sells
    nothing, PostgreSQL decides.
    """
    if not drop.redis_gate:
        return {
            "redis_gate": False,
            "gate": None,
            "gate_in_flight": None,
            "gate_database": claimable,
            "gate_mismatch": False,
            "gate_refusals": None,
        }
    count = status.count if status else None
    in_flight = status.in_flight if status else 0
    try:
        refusals: int | None = metrics.gate_refusals(drop_id=drop.pk)
    except (RedisError, OSError):
        refusals = None
    return {
        "redis_gate": True,
        "gate": count,
        "gate_in_flight": in_flight,
        "gate_database": claimable,
        "gate_mismatch": count is not None and abs(count - claimable) > in_flight,
        "gate_refusals": refusals,
    }


def drop_panel(
    drop: Drop,
    queue: dict[str, int] | None = None,
    gate_status: gate.GateStatus | None = None,
    sold_value: str | None = None,
) -> dict[str, object]:
    numbers = invariant(drop_id=drop.pk)
    return {
        "id": drop.pk,
        "slug": drop.slug,
        "title": drop.display_title,
        "state": drop.state.value,
        "pause_reason": drop.pause_reason,
        **numbers.as_json(),
        "sold_value": sold_value,
        "queue_length": queue["queue_length"] if queue else None,
        "admitted_through": queue["admitted_through"] if queue else None,
        "returning": queue["returning"] if queue else None,
        **gate_panel(drop, numbers.available + numbers.expired_unreclaimed, gate_status),
        **traffic(drop.pk),
        "stranded": stranded_units(drop_id=drop.pk),
        "buckets": bucket_levels(drop_id=drop.pk),
        "variants": [v.as_json() for v in invariant_by_variant(drop_id=drop.pk)],
        "events": [
            {
                "action": e.action,
                "at": timezone.localtime(e.at).isoformat(),  # the merchant's clock, as "at" below
                "by": e.actor.username if e.actor else "watchdog",
                "reason": e.reason,
            }
            for e in PauseEvent.objects.filter(drop=drop).select_related("actor")[:5]
        ],
    }


def snapshot() -> dict[str, object]:
    drops = watched_drops()
    lines, counts = queues(drops), gates(drops)
    taken = sold_value(drop_ids=[drop.pk for drop in drops])
    return {
        "at": timezone.localtime().isoformat(),  # the merchant's clock (SHOP_TIME_ZONE), named by "zone"
        "zone": formatting.shop_zone(),
        "lock_waits": lock_waits(),
        "payments_needing_attention": sum(payments_needing_attention().values()),
        "open_disputes": open_disputes(),
        "drops": [
            drop_panel(drop, lines.get(drop.pk), counts.get(drop.pk), taken.get(drop.pk)) for drop in drops
        ],
        "duties": duty_rows(),
    }


def duty_rows() -> list[dict[str, object]]:
    """Each scheduled duty: how long since it ran, who ran it, late or covered (ops/duties.py)."""
    duties.ensure()
    return [
        {
            "name": d.name,
            "period": d.period,
            "age": round(d.age, 1),
            "late": d.late,
            "covered": d.covered,
            "ran_by": d.ran_by or gettext("nobody yet"),
            "covered_runs": d.covered_runs,
            "last_error": d.last_error,
        }
        for d in duties.states()
    ]
