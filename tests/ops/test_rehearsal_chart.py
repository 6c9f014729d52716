"""The rehearsal report's charts: a mark's label never runs into the legend on the right."""

from __future__ import annotations

import re

from devtools import rehearse_report

LEGEND_X = 860 - 200 + 8  # chart(): width minus the legend's column, plus its gap


def test_a_mark_near_the_end_labels_towards_the_middle_and_marks_do_not_share_a_line() -> None:
    series = {"reserve 201": [(float(t), 10.0) for t in range(60)]}

    svg = rehearse_report.chart("a", series, y_label="answers/s", marks={"all taken": 58.0, "sold out": 59.0})

    labels = re.findall(r'<text x="([\d.]+)" y="(\d+)"[^>]*text-anchor="(\w+)"[^>]*>([^<]+)</text>', svg)
    marks = [(float(x), int(y), anchor) for x, y, anchor, text in labels if text.startswith(("all", "sold"))]
    assert len(marks) == 2 and all(anchor == "end" and x < LEGEND_X for x, _, anchor in marks), marks
    assert len({y for _, y, _ in marks}) == 2  # one line each
    early = rehearse_report.chart("b", series, y_label="answers/s", marks={"sold out": 3.0})
    assert 'text-anchor="start"' in early
