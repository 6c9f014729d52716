"""Each finished drop's public report: what happened, in figures and entry by entry, committed.

When (fairness/services.py, `report`): the first request after the drop is over (its end passed on
the database's clock), its exchange closed and no buyer holding a unit; its reads run in one
REPEATABLE READ transaction and two first requests both compute it, the first insert winning.
Then it is a row (fairness_report) that is only read; the merchant's note is the one field that
changes.

The figures: units sold, refunded, put back and never sold, holds that ran out, returned units
offered and whether in the line's order, the draw as checked here, each step of the admitted
mark, and the wait to be let in (p50, p99); the mark over time is drawn by fairness/chart.py. The
door's counts come from admission/tally.py, best effort (a process killed loses its last second,
and the report says so).

The commitment (fairness/merkle.py, fairness/outcomes.py): each entry's outcome is one line from
one statement (fairness/sql.py); the lines in entry order are the leaves of an RFC 9162 tree (leaf
and node hashes domain-separated, no last leaf duplicated). A buyer's page walks their inclusion
proof to the published root (static/js/report.js), and `manage.py verify_outcome` does the same
from the API, a file or a URL, against a root copied from elsewhere (`--root`).
tests/fairness/test_report.py, tests/browser/test_report_proof.py.
"""
