"""bench crowd --sweep: how the crowd's costs grow with its size and with drops live at once.

    python3 floodgate.py bench crowd --sweep                       # 1,000 to 50,000 buyers; 1-10 drops
    python3 floodgate.py bench crowd --sweep --sizes 1000,2000,5000 --drops 1,2,5
    python3 floodgate.py bench crowd --sweep ... --write-readme    # the table, picture into bench/README.md

Two series on the store of `bench crowd` (production profile, web, Celery worker and beat):

- sizes: one drop (one stock row, `--units` units) and a rush of N buyers, N in `--sizes`;
- drops: D drops live at once, D in `--drops`, each its own crowd of `--drop-crowd` buyers with
  its own in-flight limit, all on the same web processes; each drop's time to its last hold and
  "no" p99 against the same crowd alone (D = 1).

Per point: answers/s, first request to the last hold, "no" p99, 503/429 retries, web CPU per
answer, the web processes' RSS (before, peak while the crowd runs, after; the peak's growth per
HTTP connection in flight). Each drop must end with exactly its units held and drift 0, or the
run fails (exit 2); `--break-count` makes each drop one unit larger than the check expects: the
control that a wrong count is caught. The table goes to stdout and bench/out/sweep-<time>.md,
the picture to bench/out/sweep-<time>.svg; `--write-readme` copies the picture to
bench/sweep.svg and puts the table between README_BEGIN and README_END in bench/README.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import shutil
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench import crowd, profile
from bench.crowd import Measured, Scenario, Stack, say

ROOT = crowd.ROOT
README = ROOT / "bench" / "README.md"
PICTURE = ROOT / "bench" / "sweep.svg"
README_BEGIN = "<!-- sweep:begin (bench crowd --sweep --write-readme replaces this part) -->"
README_END = "<!-- sweep:end -->"
SIZES = [1000, 2000, 5000, 10000, 20000, 50000]
DROPS = [1, 2, 5, 10]
UNITS = 500  # the smallest default crowd (1,000) sells out with half of it told "no"
IN_FLIGHT = 128
LEAD = 4.0  # seconds from the drops' creation to their start (--lead): beat's tick publishes them first
DEADLINE = 90.0  # seconds after the start: nothing is sent after it


@dataclass
class Point:
    """One run: `drops` drops live at once, each with a crowd of `crowd` buyers."""

    crowd: int
    drops: int
    units: int
    in_flight: int  # per drop's crowd
    rate: float = 0.0  # final answers per second, every drop's crowd together
    answers: int = 0
    retries: int = 0
    errors: int = 0
    gave_up: int = 0
    web_cpu: float = 0.0  # seconds
    client_cpu: float = 0.0
    wall: float = 0.0
    rss_before: int = 0  # bytes, every web process together
    rss_peak: int = 0
    rss_after: int = 0
    ceiling: float | None = None  # the bare ASGI callable's answers/s for the same crowd
    overflows: int | None = (
        None  # listen queue overflows while the crowd ran (machine-wide): a 1 s SYN retry each
    )
    # per drop, in drop order
    to_last_hold: list[float | None] = field(default_factory=list)
    no_p99: list[float | None] = field(default_factory=list)
    holds: list[int] = field(default_factory=list)
    drift: list[int | None] = field(default_factory=list)
    # The database's own clock: the drop's start to its last hold's transaction, and how many
    # claim transactions made its holds (batches and single claims): what the store took, apart
    # from how late the client read its answers.
    server_last_hold: list[float | None] = field(default_factory=list)
    transactions: list[int] = field(default_factory=list)

    @property
    def buyers(self) -> int:
        return self.crowd * self.drops

    @property
    def connections(self) -> int:
        return self.in_flight * self.drops

    @property
    def cpu_per_answer(self) -> float | None:
        return self.web_cpu / self.answers if self.answers else None

    @property
    def rss_per_connection(self) -> float:
        return (self.rss_peak - self.rss_before) / self.connections

    def wrong(self) -> list[int]:
        """The drops (0-based) that did not end with exactly their units held and drift 0."""
        return [d for d in range(self.drops) if self.holds[d] != self.units or self.drift[d] != 0]

    def worst(self, values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return max(known) if len(known) == len(values) and known else None


# Measuring -------------------------------------------------------------------------------------


class PeakRss:
    """The web processes' largest RSS while the crowd runs, sampled every 0.2 s in a thread."""

    def __init__(self, pids: list[int]) -> None:
        self.pids, self.peak = pids, crowd.rss_bytes(pids)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.sample, daemon=True)

    def sample(self) -> None:
        while not self.done.wait(0.2):
            self.peak = max(self.peak, crowd.rss_bytes(self.pids))

    def __enter__(self) -> PeakRss:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.done.set()
        self.thread.join()
        self.peak = max(self.peak, crowd.rss_bytes(self.pids))


def run_point(
    stack: Stack,
    bases: list[str],
    p: Point,
    clients: int,
    *,
    break_count: bool,
    lead: float = LEAD,
    profile_to: Path | None = None,
    open_early: bool = False,
) -> tuple[Point, list[Measured]]:
    from django.db.models import Count, Max
    from django.utils import timezone

    from holds.counts import invariant
    from holds.models import Hold

    say(
        f"sweep: {p.drops} drop(s) x {p.crowd:,} buyers, {p.units:,} units each, {p.in_flight} in flight each"
    )
    s = Scenario(1, "sweep rush", p.crowd, p.in_flight, units=p.units)
    tokens = crowd.new_buyers(p.buyers)
    starts_at = timezone.now() + dt.timedelta(seconds=lead)
    made = p.units + 1 if break_count else p.units  # the control: one unit more than the check expects
    drops = [crowd.new_drop(s, starts_at, quantity=made) for _ in range(p.drops)]
    start = starts_at.timestamp()
    spec = {
        "kind": "rush",
        "bases": bases,
        "slug": drops[0].slug,
        "slugs": [d.slug for d in drops],
        "per_drop": p.crowd,  # buyer i is in drop i // crowd's crowd
        "in_flight": p.in_flight,
        "start_at": start + 0.01,
        "deadline": start + DEADLINE,
        "open_early": open_early,
    }
    web = stack.pids("web")
    p.rss_before = crowd.rss_bytes(web)
    cpu_before, overflows = crowd.cpu_seconds(web), crowd.listen_overflows()
    stem = profile_to / f"profile-{p.crowd}x{p.drops}" if profile_to is not None else None
    with PeakRss(web) as peak, profile.recording(web, stem):
        buyers, p.client_cpu = crowd.run_crowd(spec, tokens, clients)
    p.overflows = crowd.listen_overflows() - overflows
    p.rss_peak = peak.peak
    p.web_cpu = crowd.cpu_seconds(web) - cpu_before
    p.rss_after = crowd.rss_bytes(web)
    total = crowd.measure(s, buyers, start)
    p.rate, p.answers, p.retries, p.wall = total.rate, total.answers, total.retries, total.wall
    p.errors, p.gave_up = total.errors, total.gave_up
    each: list[Measured] = []
    for d, drop in enumerate(drops):
        m = crowd.measure(s, [b for b in buyers if b["index"] // p.crowd == d], start)
        m.holds_db = Hold.objects.filter(drop=drop).count()
        # created_at is now() of the claim's transaction: one value per transaction.
        stamps = Hold.objects.filter(drop=drop).aggregate(
            last=Max("created_at"), tx=Count("created_at", distinct=True)
        )
        p.server_last_hold.append(
            (stamps["last"] - drop.starts_at).total_seconds() if stamps["last"] else None
        )
        p.transactions.append(stamps["tx"])
        inv = invariant(drop_id=drop.pk)
        m.drift = inv.drift
        p.to_last_hold.append(m.to_last_hold)
        p.no_p99.append(m.no_p99)
        p.holds.append(m.holds_db)
        p.drift.append(m.drift)
        each.append(m)
    stack.check()
    crowd.retire_old_drops()
    say(
        f"sweep: {p.answers:,} answers at {p.rate:,.0f}/s; last hold after {sec(p.worst(p.to_last_hold))}"
        f" (worst drop); holds {p.holds}, drift {p.drift}, {p.retries} retries"
    )
    return p, each


# The table -------------------------------------------------------------------------------------


def ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{1000 * seconds:,.0f} ms"


def sec(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:,.2f} s"


def count(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def cpu_ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{1000 * seconds:,.2f} ms"


def mb(n: float) -> str:
    return f"{n / 2**20:,.0f}"


def growth(points: list[tuple[float, float | None]]) -> str:
    """How y grows with x: the slope k of log y against log x (least squares), y ~ x^k; k near 0
    is flat, near 1 linear. A reader's one-word answer beside the number."""
    known = [(math.log(x), math.log(y)) for x, y in points if y is not None and y > 0]
    if len(known) < 2 or len({x for x, _ in known}) < 2:
        return "-"
    mx = sum(x for x, _ in known) / len(known)
    my = sum(y for _, y in known) / len(known)
    k = sum((x - mx) * (y - my) for x, y in known) / sum((x - mx) ** 2 for x, _ in known)
    word = (
        "flat"
        if abs(k) < 0.25
        else "falls"
        if k < 0
        else "sub-linear"
        if k < 0.75
        else "linear"
        if k <= 1.25
        else "worse than linear"
    )
    return f"~ n^{k:.2f} ({word})"


def verdict(ratio: float | None) -> str:
    return "-" if ratio is None else ("PASS" if ratio <= 2.0 else "MISS")


def ratio(value: float | None, alone: float | None) -> float | None:
    return value / alone if value is not None and alone else None


def check(p: Point) -> str:
    wrong = p.wrong()
    mark = "ok" if not wrong else "**WRONG**"
    return f"{sum(p.holds):,} / {p.units * p.drops:,}, drift {sum(d or 0 for d in p.drift)} {mark}"


def tables(sizes: list[Point], drops: list[Point], alone: Point | None, header: str) -> str:
    lines = [header, ""]
    if sizes:
        lines += [
            f"**Crowd size** (one drop, {sizes[0].units:,} units on one stock row,"
            f" {sizes[0].in_flight} in flight):",
            "",
            "| buyers | answers/s | bare ASGI answers/s | first request to last hold "
            '| start to last hold (DB clock), claim transactions | "no" p99 '
            "| 503/429 retries | errors / no answer | listen overflows | web CPU per answer "
            "| web RSS before / peak / after (MB) | peak growth per connection | holds (DB) / units, drift |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
        ]
        for p in sizes:
            server = f"{sec(p.server_last_hold[0])}, {p.transactions[0]:,}" if p.server_last_hold else "-"
            ceiling = f"{p.ceiling:,.0f}" if p.ceiling else "-"
            lines.append(
                f"| {p.crowd:,} | {p.rate:,.0f} | {ceiling} | {sec(p.to_last_hold[0])} | {server} "
                f"| {ms(p.no_p99[0])} "
                f"| {p.retries:,} | {p.errors:,} / {p.gave_up:,} | {count(p.overflows)} "
                f"| {cpu_ms(p.cpu_per_answer)} "
                f"| {mb(p.rss_before)} / {mb(p.rss_peak)} / {mb(p.rss_after)} "
                f"| {p.rss_per_connection / 1024:,.0f} KiB | {check(p)} |"
            )
        lines += [
            "",
            "How each grows with the crowd (slope of log y on log x: ~0 flat, ~1 linear):",
            "",
            f"- answers/s: {growth([(p.crowd, p.rate) for p in sizes])}",
            f"- first request to last hold: {growth([(p.crowd, p.to_last_hold[0]) for p in sizes])}",
            f'- "no" p99: {growth([(p.crowd, p.no_p99[0]) for p in sizes])}',
            f"- web CPU per answer: {growth([(p.crowd, p.cpu_per_answer) for p in sizes])}",
            f"- web RSS peak: {growth([(p.crowd, float(p.rss_peak)) for p in sizes])}",
            "",
        ]
    if drops:
        base = alone or drops[0]
        lines += [
            f"**Drops live at once** (each its own crowd of {base.crowd:,} buyers, {base.units:,} units;"
            " the same web processes), against one drop alone:",
            "",
            "| drops | buyers | in flight (all) | answers/s (all) | last hold, worst drop / alone | "
            '| "no" p99, worst drop / alone | | 503/429 retries | listen overflows | web CPU per answer '
            "| web RSS before / peak (MB) | holds (DB) / units, drift |",
            "| ---: | ---: | ---: | ---: | ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | --- |",
        ]
        for p in drops:
            last, no = p.worst(p.to_last_hold), p.worst(p.no_p99)
            r_last, r_no = ratio(last, base.to_last_hold[0]), ratio(no, base.no_p99[0])
            shown_last = f"{sec(last)} / {sec(base.to_last_hold[0])}" + (
                f" = {r_last:.1f}x" if r_last else ""
            )
            shown_no = f"{ms(no)} / {ms(base.no_p99[0])}" + (f" = {r_no:.1f}x" if r_no else "")
            lines.append(
                f"| {p.drops} | {p.buyers:,} | {p.connections:,} | {p.rate:,.0f} | {shown_last} "
                f"| {verdict(r_last)} "
                f"| {shown_no} | {verdict(r_no)} | {p.retries:,} | {count(p.overflows)} "
                f"| {cpu_ms(p.cpu_per_answer)} "
                f"| {mb(p.rss_before)} / {mb(p.rss_peak)} | {check(p)} |"
            )
        lines += ["", "Goal (issue 26, item 3): each drop's figures within 2x of the same crowd alone.", ""]
    return "\n".join(lines) + "\n"


# The picture: an SVG by hand, one panel per measure, log-scale x ---------------------------------

PANEL_W, PANEL_H, LEFT, RIGHT, TOP, BOTTOM = 330, 220, 62, 14, 40, 40
COLUMNS = 3


def nice_ticks(top: float) -> list[float]:
    """0 and round steps up to at least `top` (1, 2 or 5 times a power of ten)."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / 4
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [i * step for i in range(math.ceil(top / step - 1e-9) + 1)]


def label(x: float) -> str:
    if x >= 1000 and x % 1000 == 0:
        return f"{x / 1000:g}k"
    return f"{x:g}"


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


@dataclass
class Series:
    name: str
    points: list[tuple[float, float | None]]
    color: str
    dashed: bool = False


def panel(
    key: str, title: str, unit: str, xname: str, series: list[Series], guides: bool, goal: float | None = None
) -> list[str]:
    """One panel's SVG elements, drawn at the origin (the caller translates it)."""
    xs = sorted({x for s in series for x, y in s.points if y is not None})
    ys = [y for s in series for _, y in s.points if y is not None]
    w, h = PANEL_W - LEFT - RIGHT, PANEL_H - TOP - BOTTOM
    out = [f'<text x="{PANEL_W / 2}" y="16" class="title">{escape(title)}</text>']
    if not xs:
        return [*out, f'<text x="{PANEL_W / 2}" y="{TOP + h / 2}" class="title">not measured</text>']
    lo, hi = math.log(xs[0]), math.log(xs[-1])
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5
    ticks = nice_ticks(max([*ys, goal or 0.0]) * 1.1)

    def px(x: float) -> float:
        return LEFT + 10 + (w - 20) * (math.log(x) - lo) / (hi - lo)

    def py(y: float) -> float:
        return TOP + h - h * y / ticks[-1]

    out.append(f'<clipPath id="clip-{key}"><rect x="{LEFT}" y="{TOP}" width="{w}" height="{h}"/></clipPath>')
    for t in ticks:
        out.append(f'<line x1="{LEFT}" x2="{LEFT + w}" y1="{py(t):.1f}" y2="{py(t):.1f}" class="grid"/>')
        out.append(f'<text x="{LEFT - 5}" y="{py(t) + 4:.1f}" class="ytick">{t:,.6g}</text>')
    for x in xs:
        out.append(
            f'<line x1="{px(x):.1f}" x2="{px(x):.1f}" y1="{TOP + h}" y2="{TOP + h + 4}" class="axis"/>'
        )
        out.append(f'<text x="{px(x):.1f}" y="{TOP + h + 16}" class="xtick">{label(x)}</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{w}" height="{h}" class="frame"/>')
    out.append(f'<text x="{LEFT + w / 2}" y="{PANEL_H - 6}" class="xname">{escape(xname)} (log scale)</text>')
    out.append(
        f'<text transform="translate(14 {TOP + h / 2}) rotate(-90)" class="yname">{escape(unit)}</text>'
    )
    if goal is not None:
        out.append(
            f'<line x1="{LEFT}" x2="{LEFT + w}" y1="{py(goal):.1f}" y2="{py(goal):.1f}" class="goal"/>'
            f'<text x="{LEFT + w - 4}" y="{py(goal) - 4:.1f}" class="guide-label">goal</text>'
        )
    first = series[0].points[0] if series and series[0].points else None
    if guides and first and first[1] is not None and len(xs) > 1:
        # What flat and linear growth from the smallest point would look like.
        x0, y0 = first[0], first[1]
        x1 = xs[-1]
        out.append(f'<g clip-path="url(#clip-{key})">')
        out.append(
            f'<line x1="{px(x0):.1f}" y1="{py(y0):.1f}" x2="{px(x1):.1f}" y2="{py(y0):.1f}" class="guide"/>'
        )
        steps = [x0 * (x1 / x0) ** (i / 40) for i in range(41)]
        path = " ".join(
            f"{'M' if i == 0 else 'L'}{px(x):.1f},{py(y0 * x / x0):.1f}" for i, x in enumerate(steps)
        )
        out.append(f'<path d="{path}" class="guide"/>')
        out.append("</g>")
        out.append(f'<text x="{px(x1) - 2:.1f}" y="{py(y0) - 4:.1f}" class="guide-label">flat</text>')
        linear_top = min(y0 * x1 / x0, ticks[-1])
        at = x0 * linear_top / y0
        where = max(px(at) - 4, LEFT + 40)  # the label ends here: inside the frame on the left
        out.append(f'<text x="{where:.1f}" y="{py(linear_top) + 12:.1f}" class="guide-label">linear</text>')
    for i, s in enumerate(series):
        known = [(x, y) for x, y in s.points if y is not None]
        if len(known) > 1:
            d = " ".join(f"{'M' if j == 0 else 'L'}{px(x):.1f},{py(y):.1f}" for j, (x, y) in enumerate(known))
            dash = ' stroke-dasharray="5 3"' if s.dashed else ""
            out.append(f'<path d="{d}" fill="none" stroke="{s.color}" stroke-width="2"{dash}/>')
        for x, y in known:
            out.append(
                f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill="{s.color}" class="point"'
                f' data-panel="{key}" data-series="{escape(s.name)}" data-x="{x:g}" data-y="{y:.6g}">'
                f"<title>{escape(s.name)}: {label(x)} -&gt; {y:,.4g} {escape(unit)}</title></circle>"
            )
        if len(series) > 1:
            out.append(
                f'<text x="{LEFT + 2 + sum(5.2 * len(t.name) + 14 for t in series[:i]):.0f}" y="{TOP - 5}"'
                f' class="legend" fill="{s.color}">'
                f"{escape(s.name)}</text>"
            )
    return out


def picture(sizes: list[Point], drops: list[Point], alone: Point | None, caption: str, note: str = "") -> str:
    blue, orange, grey = "#1f5fa8", "#d0661c", "#777"
    by = [(float(p.crowd), p) for p in sizes]
    panels = [
        panel(
            "answers",
            "answers/s",
            "answers per second",
            "buyers",
            [
                Series("the store", [(x, p.rate) for x, p in by], blue),
                Series(
                    "bare ASGI (the client's ceiling)", [(x, p.ceiling) for x, p in by], grey, dashed=True
                ),
            ],
            guides=False,
        ),
        panel(
            "last-hold",
            "first request to the last hold",
            "seconds",
            "buyers",
            [Series("last hold", [(x, p.to_last_hold[0]) for x, p in by], blue)],
            guides=True,
        ),
        panel(
            "no-p99",
            '"no" p99',
            "milliseconds",
            "buyers",
            [Series('"no" p99', [(x, ms_or_none(p.no_p99[0])) for x, p in by], blue)],
            guides=True,
            goal=200.0,
        ),
        panel(
            "cpu",
            "web CPU per answer",
            "milliseconds",
            "buyers",
            [Series("web CPU per answer", [(x, ms_or_none(p.cpu_per_answer)) for x, p in by], blue)],
            guides=True,
        ),
        panel(
            "rss",
            "web RSS: peak growth per connection",
            "KiB",
            "buyers",
            [
                Series(
                    "peak - before, per connection", [(x, p.rss_per_connection / 1024) for x, p in by], blue
                )
            ],
            guides=False,
        ),
    ]
    base = alone or (drops[0] if drops else None)
    if drops and base:
        dx = [(float(p.drops), p) for p in drops]
        panels.append(
            panel(
                "drops",
                f"drops at once, {base.crowd:,} buyers each: worst / alone",
                "x alone",
                "drops",
                [
                    Series(
                        "last hold",
                        [(x, ratio(p.worst(p.to_last_hold), base.to_last_hold[0])) for x, p in dx],
                        blue,
                    ),
                    Series(
                        '"no" p99', [(x, ratio(p.worst(p.no_p99), base.no_p99[0])) for x, p in dx], orange
                    ),
                ],
                guides=False,
                goal=2.0,
            )
        )
    rows = math.ceil(len(panels) / COLUMNS)
    width, height = COLUMNS * PANEL_W, rows * PANEL_H + (48 if note else 34)
    body = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}"'
        f' viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        "<style>.title{font-size:12px;font-weight:bold;text-anchor:middle}.ytick{text-anchor:end;fill:#444}"
        ".xtick,.xname,.yname{text-anchor:middle;fill:#444}.grid{stroke:#e4e4e4}.axis{stroke:#444}"
        ".frame{fill:none;stroke:#444}.guide{stroke:#aaa;stroke-dasharray:3 3;fill:none}"
        ".goal{stroke:#2a9d3a;stroke-dasharray:6 3}.guide-label{fill:#888;text-anchor:end;font-size:10px}"
        ".legend{font-size:10px}</style>",
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="8" y="{rows * PANEL_H + 18}" fill="{grey}">{escape(caption)}</text>',
        f'<text x="8" y="{rows * PANEL_H + 34}" fill="#b03030">{escape(note)}</text>' if note else "",
    ]
    for i, elements in enumerate(panels):
        x, y = (i % COLUMNS) * PANEL_W, (i // COLUMNS) * PANEL_H
        body += [f'<g transform="translate({x} {y})">', *elements, "</g>"]
    return "\n".join([*body, "</svg>"]) + "\n"


def ms_or_none(seconds: float | None) -> float | None:
    return None if seconds is None else 1000 * seconds


# The README --------------------------------------------------------------------------------------


def write_readme(text: str, svg: Path) -> None:
    readme = README.read_text()
    if README_BEGIN not in readme or README_END not in readme:
        sys.exit(f"bench crowd --sweep: {README.name} has no {README_BEGIN!r} ... {README_END!r} markers")
    before, rest = readme.split(README_BEGIN, 1)
    _, after = rest.split(README_END, 1)
    shutil.copyfile(svg, PICTURE)
    part = f"{README_BEGIN}\n\n![bench crowd --sweep](sweep.svg)\n\n{text.strip()}\n\n{README_END}"
    README.write_text(before + part + after)
    say(f"the table and picture are in {README.relative_to(ROOT)} and {PICTURE.relative_to(ROOT)}")


# The driver --------------------------------------------------------------------------------------


def numbers(text: str) -> list[int]:
    try:
        values = [int(v.replace("_", "")) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of whole numbers: {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"each must be at least 1: {text!r}")
    return sorted(set(values))


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench crowd --sweep")
    parser.add_argument("--sizes", type=numbers, default=SIZES, help="crowd sizes, e.g. 1000,2000,5000")
    parser.add_argument("--drops", type=numbers, default=DROPS, help="drops live at once, e.g. 1,2,5,10")
    parser.add_argument("--drop-crowd", type=int, help="buyers per drop in the drops series (2,000 or less)")
    parser.add_argument("--units", type=int, default=UNITS, help=f"units per drop (default {UNITS:,})")
    parser.add_argument("--in-flight", type=int, default=IN_FLIGHT, help="requests in flight per crowd")
    parser.add_argument("--clients", type=int, default=1, help="client processes (default 1)")
    parser.add_argument(
        "--split-in-flight", action="store_true", help="drops at once share --in-flight (else each its own)"
    )
    parser.add_argument("--no-ceiling", action="store_true", help="skip the bare ASGI ceiling runs")
    parser.add_argument("--no-warmup", action="store_true", help="skip the unmeasured warm-up crowd")
    parser.add_argument("--lead", type=float, default=LEAD, help=f"seconds to each start (default {LEAD:g})")
    parser.add_argument("--out", type=Path, default=crowd.OUT, help="where the table and picture go")
    parser.add_argument(
        "--write-readme", action="store_true", help="the table and picture into bench/README.md"
    )
    parser.add_argument(
        "--open-early",
        action="store_true",
        help="each rush's connections opened before its start, as the buyers' pages had them",
    )
    parser.add_argument(
        "--profile", action="store_true", help="sample the web processes with py-spy at each measured point"
    )
    parser.add_argument("--note", default="", help="a line printed above the table (how the machine was)")
    parser.add_argument(
        "--break-count",
        action="store_true",
        help="control: each drop gets one unit more than the check expects",
    )
    parser.add_argument(
        "--from", dest="source", type=Path, help="redraw a run's sweep-<time>.json, run nothing"
    )
    args = parser.parse_args(argv)
    if args.source:
        if not args.source.is_file() or args.source.suffix != ".json":
            parser.error(f"--from takes a sweep's .json figures: {args.source}")
        finish(Run.load(args.source), args.source.with_suffix(""), "", args.write_readme)
        return
    if args.units < 1 or args.in_flight < 1 or args.clients < 1:
        parser.error("--units, --in-flight and --clients must be at least 1")
    if not 1.0 <= args.lead <= 60.0:
        parser.error("--lead must be 1 to 60 seconds (beat's tick must publish the drops before they start)")
    drop_crowd = args.drop_crowd or min(2000, max(args.sizes))
    if min(args.sizes) <= args.units or drop_crowd <= args.units:
        parser.error(f"every crowd must be larger than --units ({args.units:,}): the drop must sell out")
    if args.write_readme and args.break_count:
        parser.error("--break-count is a control: its figures do not go into the README")

    crowd.raise_file_limit()
    args.out.mkdir(parents=True, exist_ok=True)
    crowd.OUT.mkdir(parents=True, exist_ok=True)  # the servers' logs
    env = {**os.environ, **crowd.production_env()}
    crowd.setup_django(env)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    began = dt.datetime.now(dt.UTC)
    profiles = args.out / f"sweep-{began:%Y%m%d-%H%M%S}" if args.profile else None
    if profiles is not None:
        profiles.mkdir(parents=True, exist_ok=True)
    stack = Stack(env)
    sizes: list[Point] = []
    series: list[Point] = []
    alone: Point | None = None
    warm: Point | None = None
    failed = ""

    def fresh(n: int, d: int) -> Point:
        # --split-in-flight: D drops' crowds share the one limit (the same connections in all), so
        # what D drops cost is told apart from what D times the connections cost.
        share = max(1, args.in_flight // d) if args.split_in_flight else args.in_flight
        return Point(n, d, args.units, share)

    try:
        ceilings: dict[int, float] = {}
        if not args.no_ceiling:
            say("sweep: the client's ceiling at each size, against a bare ASGI callable")
            bases = stack.web(crowd.BARE_APP)
            for n in args.sizes:
                bare = crowd.run_ceiling(
                    Scenario(0, "bare", n, args.in_flight), bases, args.clients, open_early=args.open_early
                )
                ceilings[n] = bare.rate
            stack.stop()
        say("sweep: starting the store: web, Celery worker and beat (production profile)")
        crowd.retire_old_drops()
        bases = stack.web(crowd.APP)
        stack.celery()
        time.sleep(3)  # beat's first tick, the edges' first snapshots
        # Not measured: the first crowd after the start meets cold caches (the workers' first tokens,
        # the lane's first batches); every point should see a warm store.
        if not args.no_warmup:
            say("sweep: a warm-up crowd (not measured)")
            warm, _ = run_point(stack, bases, fresh(min(args.sizes), 1), args.clients, break_count=False)
        for n in args.sizes:
            crowd.settle(stack)
            p, _ = run_point(
                stack,
                bases,
                fresh(n, 1),
                args.clients,
                break_count=args.break_count,
                lead=args.lead,
                profile_to=profiles,
                open_early=args.open_early,
            )
            p.ceiling = ceilings.get(n)
            sizes.append(p)
            if n == drop_crowd:
                alone = p
        for d in args.drops:
            if d == 1 and alone is not None:
                series.append(alone)
                continue
            crowd.settle(stack)
            p, _ = run_point(
                stack,
                bases,
                fresh(drop_crowd, d),
                args.clients,
                break_count=args.break_count,
                lead=args.lead,
                profile_to=profiles,
                open_early=args.open_early,
            )
            series.append(p)
            if d == 1:
                alone = p
    except KeyboardInterrupt:
        failed = "interrupted"
        say("interrupted; stopping the servers")
    except Exception as error:  # report what was measured before it
        failed = f"stopped by {type(error).__name__}: {error}"
        say(failed)
    finally:
        stack.stop()
    if not sizes and not series:
        sys.exit(f"bench crowd --sweep: FAILED: nothing measured ({failed})")

    load = os.getloadavg()[0]
    header = (
        f"Measured {began:%Y-%m-%d %H:%M} UTC with `bench crowd --sweep --sizes "
        f"{','.join(map(str, args.sizes))} --drops {','.join(map(str, args.drops))} --units {args.units}"
        f" --in-flight {args.in_flight} --drop-crowd {drop_crowd}"
        f"{' --split-in-flight' if args.split_in_flight else ''}{' --open-early' if args.open_early else ''}`"
        f" ({os.cpu_count()} CPUs, load average {load:.1f} at the end; web: {crowd.server_name()}; "
        f"the crowd: aiohttp, {args.clients} process(es), on the same machine)."
    )
    caption = f"bench crowd --sweep, {began:%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs (bench/README.md)"
    run = Run(header + (f" {args.note}" if args.note else ""), caption, args.note, sizes, series, warm)
    stem = args.out / f"sweep-{began:%Y%m%d-%H%M%S}"
    run.save(stem.with_suffix(".json"))
    finish(run, stem, failed, args.write_readme)


@dataclass
class Run:
    """A sweep's figures and how they were taken: what the table, picture and README are made of."""

    header: str
    caption: str
    note: str
    sizes: list[Point]
    drops: list[Point]
    warm: Point | None = None

    @property
    def alone(self) -> Point | None:
        """The drops series' one drop alone (the size series' point of that crowd, when it has one)."""
        return next((p for p in self.drops if p.drops == 1), None)

    def save(self, path: Path) -> None:
        points = {"sizes": [asdict(p) for p in self.sizes], "drops": [asdict(p) for p in self.drops]}
        warm = asdict(self.warm) if self.warm else None
        meta = {"header": self.header, "caption": self.caption, "note": self.note, "warm": warm}
        path.write_text(json.dumps(meta | points, indent=1))

    @classmethod
    def load(cls, path: Path) -> Run:
        data = json.loads(path.read_text())
        warm = Point(**data["warm"]) if data.get("warm") else None
        sizes = [Point(**p) for p in data["sizes"]]
        drops = [Point(**p) for p in data["drops"]]
        return cls(data["header"], data["caption"], data.get("note", ""), sizes, drops, warm)

    def wrong(self) -> list[str]:
        reasons = []
        for p in [*([self.warm] if self.warm else []), *self.sizes, *self.drops]:
            if wrong := p.wrong():
                reasons.append(
                    f"CORRECTNESS at {p.drops} drop(s) x {p.crowd:,} buyers: drop(s) {[d + 1 for d in wrong]}"
                    f" held {[p.holds[d] for d in wrong]} of {p.units:,} units,"
                    f" drift {[p.drift[d] for d in wrong]}"
                )
        return list(dict.fromkeys(reasons))  # the one drop alone may be in both series


def finish(run: Run, stem: Path, failed: str, readme: bool) -> None:
    """Table (stdout and stem.md), picture (stem.svg), figures (stem.json); exit 2 on a wrong count
    or a stopped run, else the README part when asked."""
    text = tables(run.sizes, run.drops, run.alone, run.header)
    table_path, svg_path = stem.with_suffix(".md"), stem.with_suffix(".svg")
    table_path.write_text(text)
    svg_path.write_text(picture(run.sizes, run.drops, run.alone, run.caption, run.note))
    print(text)
    say(f"table: {table_path}; picture: {svg_path}")
    reasons = [failed] if failed else []
    reasons += run.wrong()
    if reasons:
        print(f"bench crowd --sweep: FAILED: {'; '.join(reasons)}", file=sys.stderr)
        sys.exit(2)
    if readme:
        write_readme(text, svg_path)


if __name__ == "__main__":
    main(sys.argv[1:])
