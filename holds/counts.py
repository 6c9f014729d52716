"""What stock and holds say together: the units a claim could get, and the invariant."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection
from django.utils.translation import gettext_lazy

from core.errors import NotFound, fill
from holds import answers, sql
from inventory import sql as stock
from inventory.selectors import per_drop


def claimable_by_drop(drop_ids: list[int]) -> dict[int, int]:
    """Units a claim could get per drop: open ones, plus those in expired, unreclaimed holds
    (in a waiting-room drop those go to the line, not to a claim)."""
    return per_drop(sql.CLAIMABLE_BY_DROP, drop_ids)


@dataclass(frozen=True)
class Invariant:
    quantity: int
    available: int
    held: int
    sold: int
    refunded: int  # refunded units kept off sale (those put back on sale are available)
    exchange: int  # units on the face-value exchange, waiting for the next ticket in line
    expired_unreclaimed: int
    expired_holds: int
    drift: int

    def answer(self, variants: list[VariantInvariant] | None = None) -> answers.Invariant:
        """The numbers as the API answers them; with the variants' when given (the ops endpoint)."""
        numbers = answers.Invariant(
            quantity=self.quantity,
            available=self.available,
            held=self.held,
            sold=self.sold,
            refunded=self.refunded,
            exchange=self.exchange,
            expired_unreclaimed=self.expired_unreclaimed,
            expired_holds=self.expired_holds,
            drift=self.drift,
        )
        if variants is not None:
            numbers.variants = [v.answer() for v in variants]
        return numbers

    def as_json(self) -> dict[str, object]:
        return self.answer().dump()


def invariant(*, drop_id: int) -> Invariant:
    """available + held + sold + refunded + exchange = quantity, from one statement (one snapshot).

    In units mode the unit rows must also agree with the holds; any disagreement is drift.
    """
    with connection.cursor() as cursor:
        row = stock.one(cursor, sql.INVARIANT, {"drop": drop_id})
    if row is None:
        raise NotFound(fill(gettext_lazy("There is no drop with id %(drop_id)s."), drop_id=drop_id))
    (
        quantity,
        available,
        held,
        sold,
        refunded,
        expired_unreclaimed,
        expired_holds,
        units_held,
        units_sold,
        mode,
        exchange,
    ) = row
    drift = quantity - (available + held + sold + refunded + exchange)
    if mode == "units":
        drift += abs(units_held - held) + abs(units_sold - (sold + refunded))
    return Invariant(
        quantity, available, held, sold, refunded, exchange, expired_unreclaimed, expired_holds, drift
    )


@dataclass(frozen=True)
class VariantInvariant:
    """The invariant of one variant's stock: its units are available, held, sold, refunded or on the
    exchange."""

    name: str
    quantity: int
    available: int
    held: int
    sold: int
    refunded: int
    exchange: int

    @property
    def drift(self) -> int:
        return self.quantity - (self.available + self.held + self.sold + self.refunded + self.exchange)

    def answer(self) -> answers.VariantInvariant:
        return answers.VariantInvariant(
            name=self.name,
            quantity=self.quantity,
            available=self.available,
            held=self.held,
            sold=self.sold,
            refunded=self.refunded,
            exchange=self.exchange,
            drift=self.drift,
        )

    def as_json(self) -> dict[str, object]:
        return self.answer().dump()


def invariant_by_variant(*, drop_id: int) -> list[VariantInvariant]:
    """available + held + sold + refunded + exchange = quantity for each of the drop's variants, in their
    order, from one statement (one snapshot). A hold of no variant counts in none of them."""
    with connection.cursor() as cursor:
        rows = stock.all_rows(cursor, sql.INVARIANT_BY_VARIANT, {"drop": drop_id})
    return [VariantInvariant(name, *(int(n) for n in numbers)) for _id, name, *numbers in rows]
