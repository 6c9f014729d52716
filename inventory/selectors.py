"""Stock reads."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection
from django.db.models import QuerySet
from django.db.models.expressions import RawSQL

from inventory import sql
from inventory.models import Unit, UnitState
from shop.models import Variant


def available_by_drop(drop_ids: list[int]) -> dict[int, int]:
    """Units still available per drop (held units are not counted), whatever the mode."""
    return per_drop(sql.AVAILABLE_BY_DROP, drop_ids)


LEFT = "left"  # the annotation variants_with_stock adds


def variants_with_stock(drop_ids: list[int]) -> list[tuple[Variant, int]]:
    """The variants of these drops in order, each with its units still available (one query)."""
    left = RawSQL(sql.variant_available("shop_variant"), ())
    variants = Variant.objects.filter(drop_id__in=drop_ids).annotate(**{LEFT: left})
    return [(v, int(getattr(v, LEFT))) for v in variants.order_by("drop_id", "position")]


def variants_left() -> QuerySet[Variant]:
    """Variants in order, each with what is left of it (`variant_left(v)`): for a list of drops'
    variants in one query (a prefetch)."""
    left = RawSQL(sql.variant_available("shop_variant"), ())
    return Variant.objects.annotate(**{LEFT: left}).order_by("position")


def variant_left(variant: Variant) -> int:
    """Units of a variant from variants_left() still available."""
    return int(getattr(variant, LEFT))


def per_drop(statement: str, drop_ids: list[int]) -> dict[int, int]:
    """A per-drop count (`statement` returns (drop id, count) rows); 0 for a drop it has no row for."""
    ids = list(drop_ids)
    with connection.cursor() as cursor:
        found = {row[0]: int(row[1]) for row in sql.all_rows(cursor, statement, {"drops": ids})}
    return {drop_id: found.get(drop_id, 0) for drop_id in ids}


def bucket_levels(*, drop_id: int) -> list[int]:
    with connection.cursor() as cursor:
        return [row[0] for row in sql.all_rows(cursor, sql.BUCKET_LEVELS, {"drop": drop_id})]


def stranded_units(*, drop_id: int) -> int:
    with connection.cursor() as cursor:
        row = sql.one(cursor, sql.STRANDED_UNITS, {"drop": drop_id})
    return int(row[0]) if row else 0


def unit_labels(*, drop_id: int) -> list[str]:
    """A units-mode drop's labels in their order ([] for a drop of buckets)."""
    return list(Unit.objects.filter(drop_id=drop_id).order_by("rank").values_list("label", flat=True))


@dataclass(frozen=True)
class Seat:
    label: str
    free: bool
    variant: str = ""  # its size's name ("" in a drop of one)


def seat_map(*, drop_id: int, limit: int = 1000) -> list[Seat]:
    """A units-mode drop's first `limit` units in their order, each free or not ([] for buckets).

    A unit in an expired hold nobody reclaimed yet shows as taken: wrong only in the safe direction.
    """
    rows = Unit.objects.filter(drop_id=drop_id).order_by("rank")
    picked = rows.values_list("label", "state", "variant__name")[:limit]
    return [Seat(label, state == UnitState.AVAILABLE, variant) for label, state, variant in picked]
