"""The line drawn: the admitted-through mark over the sale's time, and the offers made past it.

An SVG a buyer reads at a glance on the report's page (templates/fairness/report.html); the same
numbers are in the figures for anyone who would rather read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

WIDTH, HEIGHT = 600, 160


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    steps: str  # SVG polyline points: the mark, as steps
    offers: list[tuple[float, float]]  # an offer's time and place, as a dot
    seconds: float  # the time the x axis spans, from the start
    places: int  # the highest place on the y axis


def line(
    starts_at: datetime, waves: list[tuple[datetime, int]], offers: list[tuple[datetime, int]]
) -> Chart | None:
    """The chart of a line that let anyone in; None when nothing moved."""
    moments = [at for at, _ in waves] + [at for at, _ in offers]
    if not moments:
        return None
    span = max(1.0, max((at - starts_at).total_seconds() for at in moments))
    top = max([1] + [place for _, place in waves] + [place for _, place in offers])

    def x(at: datetime) -> float:
        return round(max(0.0, (at - starts_at).total_seconds()) / span * WIDTH, 1)

    def y(place: int) -> float:
        return round(HEIGHT - place / top * HEIGHT, 1)

    points, mark = [(0.0, float(HEIGHT))], 0
    for at, through in waves:
        points += [(x(at), y(mark)), (x(at), y(through))]
        mark = through
    points.append((float(WIDTH), y(mark)))
    return Chart(
        width=WIDTH,
        height=HEIGHT,
        steps=" ".join(f"{px},{py}" for px, py in points),
        offers=[(x(at), y(place)) for at, place in offers],
        seconds=round(span, 1),
        places=top,
    )
