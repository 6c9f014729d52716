"""Stock reads."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection

from core.errors import NotFound
from inventory import sql
from inventory.models import Unit, UnitState


def available_by_drop(drop_ids: list[int]) -> dict[int, int]:
    """Units still available per drop (held units are not counted), whatever the mode."""
    return _per_drop(sql.AVAILABLE_BY_DROP, drop_ids)


def claimable_by_drop(drop_ids: list[int]) -> dict[int, int]:
    """Units a claim could get per drop: open ones, plus those in expired, unreclaimed holds
    (in a waiting-room drop those go to the line, not to a claim)."""
    return _per_drop(sql.CLAIMABLE_BY_DROP, drop_ids)


def _per_drop(statement: str, drop_ids: list[int]) -> dict[int, int]:
    ids = list(drop_ids)
    with connection.cursor() as cursor:
        found = {row[0]: int(row[1]) for row in sql.all_rows(cursor, statement, {"drops": ids})}
    return {drop_id: found.get(drop_id, 0) for drop_id in ids}


@dataclass(frozen=True)
class Invariant:
    quantity: int
    available: int
    held: int
    sold: int
    expired_unreclaimed: int
    expired_holds: int
    drift: int

    def as_json(self) -> dict[str, int]:
        return {
            "quantity": self.quantity,
            "available": self.available,
            "held": self.held,
            "sold": self.sold,
            "expired_unreclaimed": self.expired_unreclaimed,
            "expired_holds": self.expired_holds,
            "drift": self.drift,
        }


def invariant(*, drop_id: int) -> Invariant:
    """available + held + sold = quantity, from one statement (one snapshot).

    In units mode the unit rows must also agree with the holds; any disagreement is drift.
    """
    with connection.cursor() as cursor:
        row = sql.one(cursor, sql.INVARIANT, {"drop": drop_id})
    if row is None:
        raise NotFound(f"There is no drop with id {drop_id}.")
    quantity, available, held, sold, expired_unreclaimed, expired_holds, units_held, units_sold, mode = row
    drift = quantity - (available + held + sold)
    if mode == "units":
        drift += abs(units_held - held) + abs(units_sold - sold)
    return Invariant(quantity, available, held, sold, expired_unreclaimed, expired_holds, drift)


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


def seat_map(*, drop_id: int, limit: int = 1000) -> list[Seat]:
    """A units-mode drop's first `limit` units in their order, each free or not ([] for buckets).

    A unit in an expired hold nobody reclaimed yet shows as taken: wrong only in the safe direction.
    """
    rows = Unit.objects.filter(drop_id=drop_id).order_by("rank").values_list("label", "state")[:limit]
    return [Seat(label, state == UnitState.AVAILABLE) for label, state in rows]
