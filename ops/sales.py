"""A drop's sales over time, for the merchant: units and revenue per time slot from the first sale
to the last, and the chart's geometry (drawn as SVG by the template, so the page needs no script).
The chart starts at the first sale: a line from the drop's start would draw sales before it."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection

from core import formatting
from ops import sql
from shop.models import Drop, Variant

SLOTS = 60  # the chart's resolution: the span sold in, cut into this many slots at most
WIDTH, HEIGHT = 640, 200
# One colour per variant's pair of lines (units solid, revenue dashed), in the variants' order.
COLOURS = ["#2b7a4b", "#1f5fa8", "#b3261e", "#8a5a00", "#6a3d9a", "#00838f", "#c2185b", "#555555"]


@dataclass(frozen=True)
class Slot:
    starts: float  # seconds after the drop's start
    units: int
    revenue_minor: int
    total_units: int  # sold up to the end of this slot
    total_revenue_minor: int
    at: datetime  # when the slot starts, for the merchant's clock
    revenue: str  # revenue_minor in the currency

    @property
    def after(self) -> str:
        """ "+2 minutes": how long after the drop's start, the small print beside the clock time."""
        return formatting.after(self.starts)


@dataclass(frozen=True)
class VariantSales:
    """One variant's sales drawn on the drop's axes: its lines rise to its share of the totals."""

    name: str
    colour: str
    units: int
    revenue: str
    units_path: str
    revenue_path: str


@dataclass(frozen=True)
class Sales:
    step_seconds: int
    slots: list[Slot]
    units: int
    revenue: str
    refunded: str
    first_sale_seconds: float | None  # after the drop's start
    last_sale_seconds: float | None
    first_sale_at: datetime | None
    last_sale_at: datetime | None
    ends_at: datetime | None  # where the chart's time axis ends
    units_path: str  # SVG polyline points: cumulative units
    revenue_path: str  # cumulative revenue, scaled to the same height
    variants: list[VariantSales]  # a line each, only where the drop has several

    @property
    def all_at_once(self) -> bool:
        """Every sale within one second: one moment to name, not a first and a last."""
        return (self.last_sale_seconds or 0) - (self.first_sale_seconds or 0) < 1

    @property
    def first_after(self) -> str:
        return formatting.after(self.first_sale_seconds or 0)

    @property
    def last_after(self) -> str:
        return formatting.after(self.last_sale_seconds or 0)

    @property
    def span_seconds(self) -> float:
        """The chart's time axis: from the first sale to the end of the last slot."""
        return self.slots[-1].starts + self.step_seconds - self.slots[0].starts if self.slots else 0.0

    @property
    def width(self) -> int:
        return WIDTH

    @property
    def height(self) -> int:
        return HEIGHT


def sales(drop: Drop) -> Sales:
    """Units sold and revenue per slot from the first sale (slots wide enough that the whole selling
    span fits SLOTS of them: a sell-out in 2 s is drawn per second, a day per half hour)."""
    with connection.cursor() as cursor:
        cursor.execute(sql.SALES_SPAN, {"drop": drop.pk})
        first, last, refunded = cursor.fetchone()
        first = math.floor(first or 0)  # slots on whole seconds from the first sale's
        step = max(1, math.ceil(((last or 0) - first) / SLOTS))
        cursor.execute(sql.SALES_OVER_TIME, {"drop": drop.pk, "step": step, "first": first})
        rows = cursor.fetchall()
        cursor.execute(sql.SALES_OVER_TIME_BY_VARIANT, {"drop": drop.pk, "step": step, "first": first})
        by_variant = cursor.fetchall()
    currency = drop.product.currency
    axis = Axis(drop.starts_at, first, step, currency)
    slots = axis.cumulative(rows)
    units = slots[-1].total_units if slots else 0
    revenue = slots[-1].total_revenue_minor if slots else 0
    span = slots[-1].starts + step - first if slots else step
    return Sales(
        step_seconds=step,
        slots=slots,
        units=units,
        revenue=formatting.money(revenue, currency),
        refunded=formatting.money(refunded or 0, currency),
        first_sale_seconds=first if slots else None,
        last_sale_seconds=last,
        first_sale_at=axis.moment(first) if slots else None,
        last_sale_at=axis.moment(last) if last is not None else None,
        ends_at=axis.moment(first + span) if slots else None,
        units_path=_path(slots, units, lambda s: s.total_units, axis, span),
        revenue_path=_path(slots, revenue, lambda s: s.total_revenue_minor, axis, span),
        variants=_per_variant(drop, by_variant, axis, span, (units, revenue)),
    )


@dataclass(frozen=True)
class Axis:
    """The chart's time axis: slots of `step` seconds from the first sale, `first` seconds after
    the drop's start."""

    starts_at: datetime
    first: float
    step: int
    currency: str

    def moment(self, seconds: float) -> datetime:
        return self.starts_at + timedelta(seconds=seconds)

    def cumulative(self, rows: list[tuple[int, int, int]]) -> list[Slot]:
        slots: list[Slot] = []
        units = revenue = 0
        for slot, slot_units, slot_revenue in rows:
            units, revenue = units + slot_units, revenue + slot_revenue
            starts = self.first + slot * self.step
            money = formatting.money(slot_revenue, self.currency)
            slots.append(Slot(starts, slot_units, slot_revenue, units, revenue, self.moment(starts), money))
        return slots


def _per_variant(
    drop: Drop, rows: list[tuple[int, int, int, int]], axis: Axis, span: float, tops: tuple[int, int]
) -> list[VariantSales]:
    """Each variant's cumulative lines, to the drop's totals' scale (none for a drop of one)."""
    variants = list(Variant.objects.filter(drop_id=drop.pk).order_by("position"))
    if len(variants) < 2:
        return []
    found: list[VariantSales] = []
    for n, variant in enumerate(variants):
        slots = axis.cumulative([(slot, u, r) for vid, slot, u, r in rows if vid == variant.pk])
        units = slots[-1].total_units if slots else 0
        revenue = slots[-1].total_revenue_minor if slots else 0
        found.append(
            VariantSales(
                name=variant.name,
                colour=COLOURS[n % len(COLOURS)],
                units=units,
                revenue=formatting.money(revenue, drop.product.currency),
                units_path=_path(slots, tops[0], lambda s: s.total_units, axis, span),
                revenue_path=_path(slots, tops[1], lambda s: s.total_revenue_minor, axis, span),
            )
        )
    return found


def _path(slots: list[Slot], top: int, get: Callable[[Slot], int], axis: Axis, span: float) -> str:
    """Polyline points of a cumulative series from 0 where its first sale's slot starts (the
    drop's first sale: the axis' start), each slot's total at its end, on an axis of `span`
    seconds (the drop's, so every variant's line shares it)."""
    if not slots or top <= 0:
        return ""
    span = span or 1

    def x(seconds: float) -> float:
        return (seconds - axis.first) / span * WIDTH

    points = [(x(slots[0].starts), float(HEIGHT))]
    for slot in slots:
        points.append((x(slot.starts + axis.step), HEIGHT - get(slot) / top * HEIGHT))
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
