"""What on-call sees: per drop the invariant, the traffic and the kill switch's history.

Reads the same invariant SQL as `check_invariant` and the watchdog.
"""

from __future__ import annotations

from datetime import timedelta

from django.db import connection
from django.utils import timezone
from redis.exceptions import RedisError

from checkout.selectors import payments_needing_attention
from inventory.selectors import bucket_levels, invariant, stranded_units
from shop import metrics, sql
from shop.models import Drop, PauseEvent

RECENTLY_ENDED = timedelta(minutes=30)


def watched_drops() -> list[Drop]:
    """Drops on sale now, paused, starting within the hour or ended in the last half hour."""
    now = timezone.now()
    return list(
        Drop.objects.select_related("product")
        .filter(starts_at__lte=now + timedelta(hours=1), ends_at__gte=now - RECENTLY_ENDED)
        .order_by("starts_at")[:20]
    )


def lock_waits() -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql.LOCK_WAITS)
        return int(cursor.fetchone()[0])


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


def drop_panel(drop: Drop) -> dict[str, object]:
    numbers = invariant(drop_id=drop.pk)
    return {
        "id": drop.pk,
        "slug": drop.slug,
        "title": drop.display_title,
        "state": drop.state.value,
        "pause_reason": drop.pause_reason,
        **numbers.as_json(),
        "queue_length": None,  # the waiting room reports here once it exists
        "admitted_through": None,
        **traffic(drop.pk),
        "stranded": stranded_units(drop_id=drop.pk),
        "buckets": bucket_levels(drop_id=drop.pk),
        "events": [
            {
                "action": e.action,
                "at": e.at.isoformat(),
                "by": e.actor.username if e.actor else "watchdog",
                "reason": e.reason,
            }
            for e in PauseEvent.objects.filter(drop=drop).select_related("actor")[:5]
        ],
    }


def snapshot() -> dict[str, object]:
    return {
        "at": timezone.now().isoformat(),
        "lock_waits": lock_waits(),
        "payments_needing_attention": sum(payments_needing_attention().values()),
        "drops": [drop_panel(drop) for drop in watched_drops()],
    }
