"""Stock reads."""

from __future__ import annotations

from django.db.models import Count, Q, Sum

from inventory.models import StockBucket, Unit, UnitState


def available_by_drop(drop_ids: list[int]) -> dict[int, int]:
    """Units still available per drop (held units are not counted), from buckets and unit rows."""
    ids = list(drop_ids)
    found = {
        row["drop_id"]: row["n"]
        for row in StockBucket.objects.filter(drop_id__in=ids).values("drop_id").annotate(n=Sum("available"))
    }
    found |= {
        row["drop_id"]: row["n"]
        for row in Unit.objects.filter(drop_id__in=ids)
        .values("drop_id")
        .annotate(n=Count("id", filter=Q(state=UnitState.AVAILABLE)))
    }
    return {drop_id: found.get(drop_id, 0) for drop_id in ids}
