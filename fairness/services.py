"""A drop's public report: published once the drop is over, then only read (and annotated).

Published by the first request for it after the drop ended and its last hold was paid or ran
out, so no process has to be alive at the end for it to appear; two first requests at once both
compute it, each from one snapshot, and the first insert wins. The
figures and the outcomes are frozen then: a refund issued later shows on the buyer's order, not
here. The merchant's note is the only thing that changes.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise
from typing import Any

from django.db import connection, transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy

from admission import draw, tally
from admission import services as line
from admission.models import Queue, Ticket, Wave
from core.errors import FloodgateError, NotFound, fill
from fairness import merkle, outcomes, sql
from fairness.models import Report
from holds.counts import Invariant, invariant
from holds.models import Listing, ListingState
from sale import exchange
from shop.models import Drop, DropState

# Said beside the door's counts: what they are and what they are not.
COUNTED = (
    "Counted by the web processes as they answered, in Redis: a process killed loses at most its "
    "last second of counts. Accounts are never merged: each account has at most one entry (a "
    "database constraint), and a banned account's entry is skipped by the line."
)


class NotPublished(FloodgateError):
    code, status = "report_not_published", 409


def report(drop: Drop, *, with_leaves: bool = False) -> Report:
    """The drop's report, published now if the drop is over and it was not yet. Its leaves (every
    entry's line: megabytes for a big drop) only when asked for."""
    kept = Report.objects.filter(drop=drop)
    found = (kept if with_leaves else kept.defer("leaves")).first()
    if found is not None:
        return found
    closed = drop.exchange_closes_at is None or drop.exchange_closes_at <= timezone.now()
    if closed and Listing.objects.filter(drop=drop, state__in=[ListingState.LISTED, ListingState.OFFERED]):
        exchange.offer_listings(drop)  # an exchange that closed with units on it: their sellers keep them
    # Every figure and outcome from one snapshot (an enclosing transaction keeps its own level),
    # and "over" by the database's clock, the one the claims read.
    outer = connection.in_atomic_block
    with transaction.atomic(), connection.cursor() as cursor:
        if not outer:
            cursor.execute(sql.SNAPSHOT)
        cursor.execute(sql.NOW)
        (now,) = cursor.fetchone()
        if drop.state != DropState.ENDED and now < drop.ends_at:
            raise NotPublished(
                fill(
                    gettext_lazy("This drop's report is published when it ends, at %(ends)s UTC."),
                    ends=format(drop.ends_at, "%Y-%m-%d %H:%M"),
                )
            )
        if drop.exchange_closes_at is not None and now < drop.exchange_closes_at:
            raise NotPublished(
                fill(
                    gettext_lazy(
                        "This drop's report is published when its exchange closes, at %(ends)s UTC."
                    ),
                    ends=format(drop.exchange_closes_at, "%Y-%m-%d %H:%M"),
                )
            )
        stock = invariant(drop_id=drop.pk)
        if Listing.objects.filter(drop=drop, state=ListingState.SOLD).exists():
            raise NotPublished(  # its fee is not kept until the new buyer's payment is taken
                gettext_lazy("This drop's report is published once the exchange's last sale is paid for.")
            )
        if stock.held or stock.exchange:
            raise NotPublished(
                gettext_lazy(
                    "This drop's report is published once the last buyer holding a unit has paid or run "
                    "out of time."
                )
            )
        every = outcomes.of_drop(drop.pk)
        leaves = [o.leaf for o in every]
        made = Report(
            drop=drop,
            figures=figures(drop, every, stock=stock),
            leaves=leaves,
            root=outcomes.root_of(leaves),
            size=len(leaves),
        )
    Report.objects.bulk_create([made], ignore_conflicts=True)
    return (kept if with_leaves else kept.defer("leaves")).get()


def figures(drop: Drop, every: list[outcomes.Outcome], *, stock: Invariant) -> dict[str, Any]:
    """What the report says in numbers, from the database and the door's counts."""
    with connection.cursor() as cursor:
        cursor.execute(sql.REFUNDS, {"drop": drop.pk})
        refunded, restocked, expired = cursor.fetchone()
        cursor.execute(sql.OFFERS, {"drop": drop.pk})
        made = cursor.fetchall()
    offers = [{"entry": entry, "place": place, "at": at.isoformat()} for entry, place, at in made]
    places = [o["place"] for o in offers]
    body: dict[str, Any] = {
        "drop": drop.slug,
        "units": {
            "quantity": stock.quantity,
            "sold": stock.sold,
            "refunded": refunded,
            "restocked": restocked,
            "left": stock.available,
        },
        "holds_expired": expired,
        "offers": offers,
        "offers_in_line_order": all(a is not None and b is not None and a < b for a, b in pairwise(places)),
        "door": tally.counts(drop.slug) | {"banned": sum(o.banned for o in every), "accounts_merged": 0},
        "counted": COUNTED,
        "entries": len(every),
        "draw": None,
        "admissions": None,
        "waits": None,
    }
    if drop.waiting_room:
        body |= _line(drop, offered_at={place: at for _, place, at in made if place is not None})
    if drop.exchange_closes_at is not None:
        with connection.cursor() as cursor:
            cursor.execute(sql.EXCHANGE, {"drop": drop.pk})
            listed, resold, kept, withdrawn, fees = cursor.fetchone()
        body["exchange"] = {
            "closed_at": drop.exchange_closes_at.isoformat(),
            "fee_minor": drop.exchange_fee_minor,
            "listed": listed,
            "resold": resold,
            "kept": kept,
            "withdrawn": withdrawn,
            "fees_minor": fees,
        }
    return body


def _line(drop: Drop, *, offered_at: dict[int, datetime]) -> dict[str, Any]:
    """The waiting room's part: the draw as checked here, the admissions in ticket order, the waits
    (to the wave that let a place in, or to the offer that reached it past the waves' mark)."""
    queue = Queue.objects.get(drop=drop)
    record = line.draw_entries(drop=drop)
    problems = draw.check(record) if record.get("drawn") else []
    waves = list(Wave.objects.filter(drop=drop).order_by("at", "pk").values_list("at", "admitted_through"))
    # The mark only moves forward: the first wave whose mark reached a place is when it was let in.
    reached, marks = [], 0
    for at, through in waves:
        if through > marks:
            marks = through
            reached.append((through, at))
    passed = Ticket.objects.filter(drop=drop, number__lte=queue.admitted_through, buyer__is_active=True)
    admitted = passed.values_list("number", "joined_at")
    waits = []
    for number, joined_at in admitted:
        assert number is not None  # number__lte leaves out the unnumbered
        i = bisect.bisect_left(reached, (number,))
        let_in = reached[i][1] if i < len(reached) else offered_at.get(number)
        if let_in is not None:
            waits.append(max(0.0, (let_in - max(joined_at, drop.starts_at)).total_seconds()))
    return {
        "draw": {
            "drawn": record.get("drawn") is True,
            "seed": record.get("seed"),
            "seed_sha256": record.get("seed_sha256"),
            "entries_sha256": record.get("entries_sha256"),
            "beacon_round": record.get("beacon_round"),
            "beacon_status": record.get("beacon_status"),
            "verified": record.get("drawn") is True and not problems and draw.unsteerable(record),
            "problems": problems,
        },
        "admissions": {
            "admitted_through": queue.admitted_through,
            "waves": [{"at": at.isoformat(), "admitted_through": through} for through, at in reached],
        },
        "waits": {
            "admitted": len(waits),
            "p50_seconds": _percentile(waits, 0.50),
            "p99_seconds": _percentile(waits, 0.99),
        },
    }


def _percentile(values: list[float], share: float) -> float | None:
    """Nearest rank: the smallest value at least `share` of them are at or below."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[max(0, math.ceil(share * len(ordered)) - 1)], 3)


@dataclass(frozen=True)
class Published:
    """A published report's tree and where each entry's leaf is: built once per process."""

    leaves: list[str]
    tree: merkle.Tree
    index: dict[int, int]  # entry -> its leaf's index


_published: dict[str, Published] = {}  # by root: a root names its leaves
KEPT = 4  # reports' trees kept per process (a big drop's is some 10 MB)


def _published_of(found: Report) -> Published:
    known = _published.get(found.root)
    if known is None:
        leaves = Report.objects.values_list("leaves", flat=True).get(pk=found.pk)
        index = {parsed.entry: i for i, leaf in enumerate(leaves) if (parsed := outcomes.parse(leaf))}
        known = Published(leaves, merkle.Tree([merkle.leaf_hash(leaf) for leaf in leaves]), index)
        while len(_published) >= KEPT:
            _published.pop(next(iter(_published)))
        _published[found.root] = known
    return known


def inclusion(found: Report, *, entry: int) -> dict[str, Any]:
    """One entry's outcome with the path from its leaf to the published root."""
    published = _published_of(found)
    index = published.index.get(entry)
    if index is None:
        raise NotFound(fill(gettext_lazy("Entry %(entry)s is not in this drop's report."), entry=entry))
    return {
        "entry": entry,
        "leaf": published.leaves[index],
        "index": index,
        "size": published.tree.size,
        "proof": [h.hex() for h in published.tree.proof(index)],
        "root": found.root,
    }


def check(document: dict[str, Any], *, entry: int | None = None, root: str | None = None) -> list[str]:
    """What does not add up in an inclusion document; [] = the outcome is in the tree with that root."""
    try:
        leaf, index, size = str(document["leaf"]), int(document["index"]), int(document["size"])
        path = [bytes.fromhex(str(h)) for h in document["proof"]]
        published = str(document["root"])
    except (KeyError, TypeError, ValueError):
        return ["the document lacks its leaf, index, size, proof or root"]
    problems = []
    parsed = outcomes.parse(leaf)
    if parsed is None:
        problems.append("the leaf is not an outcome line")
    elif entry is not None and parsed.entry != entry:
        problems.append(f"the leaf is entry {parsed.entry}'s, not entry {entry}'s")
    computed = merkle.root_from_proof(merkle.leaf_hash(leaf), index, size, path)
    if computed is None:
        problems.append("the proof does not fit a tree of that size")
    elif computed.hex() != published:
        problems.append(f"the proof leads to root {computed.hex()}, not the published {published}")
    if root is not None and published != root:
        problems.append(f"the document's root {published} is not the root you were given ({root})")
    return problems
