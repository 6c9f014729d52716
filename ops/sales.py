"""A drop's sales over its first minutes, for the merchant: units and revenue per time slot, and
the chart's geometry (drawn as SVG by the template, so the page needs no script)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

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
    last_sale_seconds: float | None
    units_path: str  # SVG polyline points: cumulative units
    revenue_path: str  # cumulative revenue, scaled to the same height
    variants: list[VariantSales]  # a line each, only where the drop has several

    @property
    def span_seconds(self) -> float:
        """Where the chart's time axis ends."""
        return self.slots[-1].starts + self.step_seconds if self.slots else 0.0

    @property
    def width(self) -> int:
        return WIDTH

    @property
    def height(self) -> int:
        return HEIGHT


def sales(drop: Drop) -> Sales:
    """Units sold and revenue per slot since the drop's start (slots wide enough that the whole
    selling span fits SLOTS of them: a sell-out in 2 s is drawn per second, a day per half hour)."""
    with connection.cursor() as cursor:
        cursor.execute(sql.SALES_SPAN, {"drop": drop.pk})
        last, refunded = cursor.fetchone()
        step = max(1, math.ceil((last or 0) / SLOTS))
        cursor.execute(sql.SALES_OVER_TIME, {"drop": drop.pk, "step": step})
        rows = cursor.fetchall()
        cursor.execute(sql.SALES_OVER_TIME_BY_VARIANT, {"drop": drop.pk, "step": step})
        by_variant = cursor.fetchall()
    slots = _cumulative(rows, step)
    units = slots[-1].total_units if slots else 0
    revenue = slots[-1].total_revenue_minor if slots else 0
    span = slots[-1].starts + step if slots else step
    currency = drop.product.currency
    return Sales(
        step_seconds=step,
        slots=slots,
        units=units,
        revenue=formatting.money(revenue, currency),
        refunded=formatting.money(refunded or 0, currency),
        last_sale_seconds=last,
        units_path=_path(slots, units, lambda s: s.total_units, step, span),
        revenue_path=_path(slots, revenue, lambda s: s.total_revenue_minor, step, span),
        variants=_per_variant(drop, by_variant, step, span, (units, revenue)),
    )


def _cumulative(rows: list[tuple[int, int, int]], step: int) -> list[Slot]:
    slots: list[Slot] = []
    units = revenue = 0
    for slot, slot_units, slot_revenue in rows:
        units, revenue = units + slot_units, revenue + slot_revenue
        slots.append(Slot(slot * step, slot_units, slot_revenue, units, revenue))
    return slots


def _per_variant(
    drop: Drop, rows: list[tuple[int, int, int, int]], step: int, span: float, tops: tuple[int, int]
) -> list[VariantSales]:
    """Each variant's cumulative lines, to the drop's totals' scale (none for a drop of one)."""
    variants = list(Variant.objects.filter(drop_id=drop.pk).order_by("position"))
    if len(variants) < 2:
        return []
    found: list[VariantSales] = []
    for n, variant in enumerate(variants):
        slots = _cumulative([(slot, u, r) for vid, slot, u, r in rows if vid == variant.pk], step)
        units = slots[-1].total_units if slots else 0
        revenue = slots[-1].total_revenue_minor if slots else 0
        found.append(
            VariantSales(
                name=variant.name,
                colour=COLOURS[n % len(COLOURS)],
                units=units,
                revenue=formatting.money(revenue, drop.product.currency),
                units_path=_path(slots, tops[0], lambda s: s.total_units, step, span),
                revenue_path=_path(slots, tops[1], lambda s: s.total_revenue_minor, step, span),
            )
        )
    return found


def _path(slots: list[Slot], top: int, get: Callable[[Slot], int], step: int, span: float) -> str:
    """Polyline points of a cumulative series from (0, 0), each slot's total at its end, on an
    axis of `span` seconds (the drop's, so every variant's line shares it)."""
    if not slots or top <= 0:
        return ""
    span = span or 1
    points = [(0.0, float(HEIGHT))]
    for slot in slots:
        x = (slot.starts + step) / span * WIDTH
        points.append((x, HEIGHT - get(slot) / top * HEIGHT))
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
