"""The rehearsal's report: one self-contained HTML file, charts as inline SVG (no script, no CDN).

Answers are (seconds, step, status, code, ms) rows from the crowd; samples are the database's
view of the copy every half second (available, held, sold, quantity, drift, waiting).
"""

from __future__ import annotations

import html
from collections import defaultdict
from typing import Any

Answer = tuple[float, str, int, str, float]
COLOURS = [
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#7f7f7f",
    "#bcbd22",
]


def label(answer: Answer) -> str:
    _, step, status, code, _ = answer
    return f"{step} {status}{' ' + code if code else ''}"


def is_error(answer: Answer) -> bool:
    """No answer, or a 5xx other than 503 (the store's "busy, come back": a designed answer)."""
    return answer[2] == 0 or (answer[2] >= 500 and answer[2] != 503)


def percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def summarise(
    answers: list[Answer],
    samples: list[dict[str, float]],
    database: dict[str, object],
    meta: dict[str, object],
) -> dict[str, object]:
    """The numbers the report and the console show; `database` is what PostgreSQL says at the end."""
    by_label: dict[str, list[float]] = defaultdict(list)
    for a in answers:
        by_label[label(a)].append(a[4])
    sold_out_at = next((s["t"] for s in samples if s["sold"] == s["quantity"]), None)
    all_taken_at = next((s["t"] for s in samples if s["available"] == 0), None)
    drifts = sorted({s["drift"] for s in samples})
    duration = max((a[0] for a in answers), default=0.0)
    return {
        **meta,
        "answers": len(answers),
        "duration_s": round(duration, 1),
        "answers_per_s": round(len(answers) / duration, 1) if duration else 0.0,
        "by_answer": {
            k: {"count": len(v), "p50_ms": round(percentile(v, 50), 1), "p99_ms": round(percentile(v, 99), 1)}
            for k, v in sorted(by_label.items(), key=lambda kv: -len(kv[1]))
        },
        "errors": sum(1 for a in answers if is_error(a)),
        "busy_503": sum(1 for a in answers if a[2] == 503),
        "created_201": sum(1 for a in answers if a[1] == "reserve" and a[2] == 201),
        "all_taken_at_s": all_taken_at,
        "sold_out_at_s": sold_out_at,
        "invariant_samples": len(samples),
        "invariant_drifts_seen": drifts,
        "database": database,
    }


def console_lines(summary: dict[str, object]) -> list[str]:
    db = summary["database"]
    assert isinstance(db, dict)
    lines = [
        f"{summary['answers']} answers in {summary['duration_s']}s ({summary['answers_per_s']}/s), "
        f"{summary['errors']} errors, {summary['busy_503']} told 503 busy",
        f"holds made {summary['created_201']}; database: sold {db['sold']}, held {db['held']}, "
        f"available {db['available']} of {db['quantity']}, orders confirmed {db['orders_confirmed']}, "
        f"drift {db['drift']}; real drop unchanged: {db['real_drop_unchanged']}",
        f"all units taken at {summary['all_taken_at_s']}s, sold out at {summary['sold_out_at_s']}s; "
        f"invariant drifts seen in {summary['invariant_samples']} samples: "
        f"{summary['invariant_drifts_seen']}",
    ]
    by_answer = summary["by_answer"]
    assert isinstance(by_answer, dict)
    lines += [
        f"  {k:32s} {v['count']:7d}  p50 {v['p50_ms']:7.1f} ms  p99 {v['p99_ms']:7.1f} ms"
        for k, v in by_answer.items()
    ]
    return lines


def tick(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:.2g}"


def chart(
    title: str,
    series: dict[str, list[tuple[float, float]]],
    *,
    y_label: str,
    marks: dict[str, float | None] | None = None,
    log_y: bool = False,
) -> str:
    """A line chart as inline SVG: one polyline per series, vertical marks (e.g. the sell-out)."""
    import math

    w, h, left, bottom, top, right = 860, 260, 70, 30, 24, 200
    points = [p for s in series.values() for p in s]
    if not points:
        return f"<h3>{html.escape(title)}</h3><p>(nothing to draw)</p>"
    x_max = max(p[0] for p in points) or 1.0
    fy = (lambda v: math.log10(max(v, 0.1))) if log_y else (lambda v: v)
    y_min = min(fy(p[1]) for p in points) if log_y else 0.0
    y_max = max(fy(p[1]) for p in points)
    y_max = y_max if y_max > y_min else y_min + 1

    def xy(x: float, y: float) -> str:
        px = left + (w - left - right) * x / x_max
        py = top + (h - top - bottom) * (1 - (fy(y) - y_min) / (y_max - y_min))
        return f"{px:.1f},{py:.1f}"

    parts = [
        f'<svg viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{html.escape(title)}">',
        f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" stroke="#999"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="#999"/>',
    ]
    for frac in (0, 0.5, 1):
        v = y_min + (y_max - y_min) * frac
        shown = 10**v if log_y else v
        py = top + (h - top - bottom) * (1 - frac)
        parts.append(
            f'<text x="{left - 4}" y="{py + 4:.0f}" text-anchor="end" font-size="11">{tick(shown)}</text>'
        )
    for frac in (0, 0.25, 0.5, 0.75, 1):
        px = left + (w - left - right) * frac
        parts.append(
            f'<text x="{px:.0f}" y="{h - 12}" text-anchor="middle" font-size="11">{x_max * frac:.0f}s</text>'
        )
    parts.append(f'<text x="4" y="14" font-size="11">{html.escape(y_label)}</text>')
    shown_marks = [(name, at) for name, at in (marks or {}).items() if at is not None]
    for row, (name, at) in enumerate(shown_marks):
        px = left + (w - left - right) * at / x_max
        # A mark's label reads towards the middle of the plot and each on its own line, so none runs
        # into the legend on the right (a sell-out near the end used to) or into another mark's.
        late = at > x_max / 2
        anchor, tx = ("end", px - 3) if late else ("start", px + 3)
        parts.append(
            f'<line x1="{px:.1f}" y1="{top}" x2="{px:.1f}" y2="{h - bottom}" stroke="#000" '
            f'stroke-dasharray="4 3"/><text x="{tx:.1f}" y="{top + 10 + 13 * row}" font-size="11" '
            f'text-anchor="{anchor}" paint-order="stroke" stroke="#fff" stroke-width="3">'
            f"{html.escape(name)} {at:.1f}s</text>"
        )
    for i, (name, pts) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" '
            f'points="{" ".join(xy(x, y) for x, y in pts)}"/>'
        )
        parts.append(
            f'<text x="{w - right + 8}" y="{top + 14 * i + 10}" font-size="11" fill="{colour}">'
            f"{html.escape(name)}</text>"
        )
    parts.append("</svg>")
    return f"<h3>{html.escape(title)}</h3>" + "".join(parts)


def per_second(answers: list[Answer], top: int = 8) -> tuple[dict, dict, dict]:
    """Answers/s, p50 and p99 per one-second bucket, for the `top` most frequent answers."""
    buckets: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for a in answers:
        buckets[label(a)][int(a[0])].append(a[4])
    chosen = sorted(buckets, key=lambda k: -sum(len(v) for v in buckets[k].values()))[:top]
    end = int(max((a[0] for a in answers), default=0)) + 1
    rate = {k: [(s + 0.5, float(len(buckets[k].get(s, [])))) for s in range(end)] for k in chosen}
    p50 = {k: [(s + 0.5, percentile(v, 50)) for s, v in sorted(buckets[k].items())] for k in chosen}
    p99 = {k: [(s + 0.5, percentile(v, 99)) for s, v in sorted(buckets[k].items())] for k in chosen}
    return rate, p50, p99


def render(answers: list[Answer], samples: list[dict[str, float]], summary: dict[str, Any]) -> str:
    rate, p50, p99 = per_second(answers)
    marks = {"all taken": summary["all_taken_at_s"], "sold out": summary["sold_out_at_s"]}
    stock = {k: [(s["t"], s[k]) for s in samples] for k in ("available", "held", "sold")}
    line = {
        "available+held+sold": [(s["t"], s["available"] + s["held"] + s["sold"]) for s in samples],
        "quantity": [(s["t"], s["quantity"]) for s in samples],
    }
    db = summary["database"]
    assert isinstance(db, dict)
    by_answer = summary["by_answer"]
    assert isinstance(by_answer, dict)
    rows = "".join(
        f"<tr><td>{html.escape(k)}</td><td>{v['count']}</td><td>{v['p50_ms']}</td><td>{v['p99_ms']}</td></tr>"
        for k, v in by_answer.items()
    )
    errors = [a for a in answers if is_error(a)]
    error_rows = "".join(
        f"<tr><td>{a[0]:.1f}s</td><td>{html.escape(label(a))}</td><td>{a[4]:.0f}</td></tr>"
        for a in errors[:50]
    )
    facts = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>"
        for k, v in {
            "drop (only read)": summary["drop"],
            "rehearsal copy": summary["copy"],
            "store": summary["base"],
            "buyers": summary["buyers"],
            "waiting room": summary["waiting_room"],
            "made at": summary["made_at"],
            "answers": f"{summary['answers']} in {summary['duration_s']} s ({summary['answers_per_s']}/s)",
            "holds made (201)": summary["created_201"],
            "database at the end": f"sold {db['sold']}, held {db['held']}, available {db['available']} of "
            f"{db['quantity']}; orders confirmed {db['orders_confirmed']}",
            "invariant": f"drift {db['drift']} at the end; drifts seen in {summary['invariant_samples']} "
            f"samples: {summary['invariant_drifts_seen']}",
            "all units taken at": summary["all_taken_at_s"],
            "sold out at": summary["sold_out_at_s"],
            "errors (no answer, 5xx but 503)": summary["errors"],
            "503 busy (told to come back)": summary["busy_503"],
            "real drop unchanged": db["real_drop_unchanged"],
        }.items()
    )
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Rehearsal of {html.escape(str(summary["drop"]))}</title>
<style>body{{font:14px system-ui,sans-serif;margin:2em;max-width:1100px}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left}}svg{{background:#fafafa}}</style></head><body>
<h1>Rehearsal of {html.escape(str(summary["drop"]))}</h1>
<table>{facts}</table>
{chart("Answers per second, by answer", rate, y_label="answers/s", marks=marks)}
{chart("p50 by answer (ms, log scale)", p50, y_label="ms", marks=marks, log_y=True)}
{chart("p99 by answer (ms, log scale)", p99, y_label="ms", marks=marks, log_y=True)}
{chart("Stock: available, held, sold (from the database)", stock, y_label="units", marks=marks)}
{chart("The invariant line: available+held+sold against quantity", line, y_label="units", marks=marks)}
{
        chart(
            "The queue draining: buyers waiting, not yet admitted",
            {"waiting": [(s["t"], s["waiting"]) for s in samples]},
            y_label="buyers",
            marks=marks,
        )
    }
<h3>Answers</h3><table><tr><th>answer</th><th>count</th><th>p50 ms</th><th>p99 ms</th></tr>{rows}</table>
<h3>Errors ({len(errors)}; first 50)</h3>
<table><tr><th>at</th><th>answer</th><th>ms</th></tr>{error_rows}</table>
</body></html>
"""
