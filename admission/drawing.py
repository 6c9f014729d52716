"""The draw's writes: what a queue commits to when it is created, the entry list's close, the
beacon round read, the order stored (the rule itself: admission/draw.py; the round: beacon.py).

    queue created (seed hash, drand round named)  ->  start: list closed, its hash published
      ->  round due: read and verified (or not reachable: said, and the seed alone)  ->  order

services.run_wave runs the last two steps inside the wave's transaction, the queue row locked;
the round is read before it, outside any transaction.
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from admission import beacon, sql, state
from admission.draw import draw_order, entries_digest, seed_digest
from admission.models import BeaconStatus, Queue, Ticket
from shop.models import Drop, DropState

log = logging.getLogger(__name__)


def _new_queue(drop: Drop, now: datetime) -> Queue:
    """A queue with its seed and its beacon round chosen now, once: neither changes after the first
    join (recommit_beacon), and both are public from here on (the seed as its hash)."""
    seed = secrets.token_hex(32)
    queue = Queue(drop_id=drop.pk, seed=seed, seed_sha256=seed_digest(seed), beacon_status=BeaconStatus.NONE)
    chain = beacon.CHAINS.get(settings.DRAW_BEACON)
    if chain is not None:
        queue.beacon_chain = chain.hash
        queue.beacon_round = _round_after_close(chain, drop, now)
        queue.beacon_status = BeaconStatus.WAITING
    return queue


def closes_at(drop: Drop) -> datetime:
    """When the entry list closes: the drop's line_close_seconds before its start, so the round it
    names is due, read and drawn by the start (a raffle takes entries until its start)."""
    if drop.raffle:
        return drop.starts_at
    return drop.starts_at - timedelta(seconds=drop.line_close_seconds)


def _round_after_close(chain: beacon.Chain, drop: Drop, now: datetime) -> int:
    """The first round due after the entry list closes (or now, for a queue opened late), plus a
    margin for the close itself."""
    return chain.round_at(max(closes_at(drop), now) + beacon.CLOSE_MARGIN)


def queue_for(drop: Drop, *, now: datetime | None = None) -> Queue:
    queue, _ = Queue.objects.get_or_create(
        drop=drop, defaults=_fields(_new_queue(drop, now or timezone.now()))
    )
    return queue


def _fields(queue: Queue) -> dict[str, object]:
    return {
        "seed": queue.seed,
        "seed_sha256": queue.seed_sha256,
        "beacon_chain": queue.beacon_chain,
        "beacon_round": queue.beacon_round,
        "beacon_status": queue.beacon_status,
    }


def open_queues(drops: list[Drop], *, now: datetime | None = None) -> None:
    """Create the waiting rooms' queues (seeds and rounds committed) ahead of any join: one statement."""
    now = now or timezone.now()
    Queue.objects.bulk_create([_new_queue(d, now) for d in drops if d.waiting_room], ignore_conflicts=True)


@dataclass(frozen=True)
class Recommitted:
    round: int | None
    changed: bool


def recommit_beacon(*, drop: Drop) -> Recommitted:
    """Name the round due after a moved start, while nobody has joined; after the first join the
    round stays what every entrant saw (the draw's page then says the list closed too late)."""
    with transaction.atomic(durable=True):
        # The queue row first: a join in flight (FOR SHARE) finishes before the count below.
        queue = Queue.objects.select_for_update().filter(pk=drop.pk).first()
        if queue is None or queue.beacon_round is None or queue.entries_closed_at is not None:
            return Recommitted(round=queue.beacon_round if queue else None, changed=False)
        chain = beacon.BY_HASH.get(queue.beacon_chain)
        if chain is None or Ticket.objects.filter(drop_id=drop.pk).exists():
            return Recommitted(round=queue.beacon_round, changed=False)
        wanted = _round_after_close(chain, drop, timezone.now())
        if wanted == queue.beacon_round:
            return Recommitted(round=wanted, changed=False)
        queue.beacon_round = wanted
        queue.save(update_fields=["beacon_round"])
        log.info("admission: drop %s names beacon round %s (start moved, nobody joined)", drop.pk, wanted)
        return Recommitted(round=wanted, changed=True)


@dataclass(frozen=True)
class BeaconView:
    """The draw's beacon as the pages say it."""

    status: str
    chain: str
    round: int
    due_at: datetime
    note: str


def beacon_of(queue: Queue) -> BeaconView | None:
    chain = beacon.BY_HASH.get(queue.beacon_chain)
    if chain is None or queue.beacon_round is None:
        return None
    due = chain.time_of(queue.beacon_round)
    return BeaconView(queue.beacon_status, chain.name, queue.beacon_round, due, queue.beacon_note)


def _early_joiners(queue: Queue) -> list[int]:
    return list(
        Ticket.objects.filter(drop_id=queue.drop_id, number__isnull=True)
        .order_by("id")
        .values_list("id", flat=True)
    )


def close_entries(queue: Queue, now: datetime) -> None:
    """Fix the early joiners' list and publish its hash (the queue row locked: joins wait on it).
    Their numbers 1..n are reserved from here: a later join gets the next one after them.

    Never after the named round is public: a close that runs late (every process that closes was
    down) names the first round due after it instead, and the draw's note says so. The shop never
    sees the value of a round the list it closes is drawn with."""
    entries = _early_joiners(queue)
    queue.entries_sha256 = entries_digest(entries)
    queue.drawn_entries = len(entries)
    queue.entries_closed_at = now
    chain = beacon.BY_HASH.get(queue.beacon_chain)
    named = queue.beacon_round
    if chain is not None and named is not None and now + beacon.LATE_GUARD > chain.time_of(named):
        queue.beacon_round = chain.round_at(now + beacon.CLOSE_MARGIN)
        queue.beacon_note = (
            f"round {named} was due before the list closed (the close ran late); "
            f"round {queue.beacon_round}, due after it, was named at the close"
        )
        log.warning(
            "admission: drop %s closed late; round %s replaces %s", queue.drop_id, queue.beacon_round, named
        )
    log.info("admission: drop %s closed its list of %s early joiners", queue.drop_id, len(entries))


Fetched = beacon.Round | beacon.NotReached | None


def round_if_due(drop: Drop, now: datetime) -> Fetched:
    """The queue's beacon round, read from the relays once it is due and the draw still waits for it
    (outside any transaction: an HTTP call never runs under the queue's lock). None: not due."""
    # Only once the list closed: a close that runs late names another round (close_entries).
    queue = Queue.objects.filter(
        pk=drop.pk, drawn_at__isnull=True, entries_closed_at__isnull=False, beacon_status=BeaconStatus.WAITING
    ).first()
    chain = beacon.BY_HASH.get(queue.beacon_chain) if queue is not None else None
    if queue is None or chain is None or queue.beacon_round is None:
        return None
    if now < chain.time_of(queue.beacon_round) or drop.state_at(now) not in DRAWS_IN:
        return None
    try:
        return beacon.fetch(chain, queue.beacon_round, relays=list(settings.DRAW_BEACON_URLS))
    except beacon.NotReached as missed:
        log.warning(
            "admission: beacon round %s for drop %s not read: %s", queue.beacon_round, drop.pk, missed
        )
        return missed


# The draw runs from the close until the sale ends, but not while the drop is paused.
DRAWS_IN = (DropState.SCHEDULED, DropState.LIVE)


def fallback_at(drop: Drop, due: datetime, *, not_yet: bool) -> datetime:
    """The first moment the draw may give up on its round and draw on the seed alone: the relays are
    asked again (each tick) for RETRY_FOR after the round's time (PATIENCE when one said "not yet"),
    with the default close still before the start; where the merchant chose to wait, until
    draw_round_wait_seconds after the start (the line waits with it)."""
    retried = due + (beacon.PATIENCE if not_yet else beacon.RETRY_FOR)
    if drop.draw_round_wait_seconds:
        return max(retried, drop.starts_at + timedelta(seconds=drop.draw_round_wait_seconds))
    return retried


def draw(queue: Queue, drop: Drop, now: datetime, fetched: Fetched) -> bool:
    """Number the closed list in the order of the seed, its hash and the round's randomness (inside
    the wave's transaction, queue row locked). False: its round is not there yet, no wave."""
    if queue.beacon_status == BeaconStatus.WAITING:
        chain = beacon.BY_HASH[queue.beacon_chain]
        assert queue.beacon_round is not None
        if fetched is None or (isinstance(fetched, beacon.Round) and fetched.number != queue.beacon_round):
            return False
        if isinstance(fetched, beacon.NotReached):
            if now < fallback_at(drop, chain.time_of(queue.beacon_round), not_yet=fetched.not_yet):
                return False  # asked again at the next tick: a relay's blip is not a fallback
            queue.beacon_status, queue.beacon, queue.beacon_note = (
                BeaconStatus.UNREACHABLE,
                "",
                fetched.reason[:300],
            )
        else:
            queue.beacon = beacon.randomness(chain, fetched)
            queue.beacon_signature = fetched.signature
            queue.beacon_previous_signature = fetched.previous_signature
            queue.beacon_status = BeaconStatus.VERIFIED
    began = time.monotonic()
    entries = _early_joiners(queue)
    if entries_digest(entries) != queue.entries_sha256:
        raise AssertionError(f"drop {queue.drop_id}: the early joiners changed after their list closed")
    order = draw_order(queue.seed, entries, beacon=queue.beacon)
    number_drawn(queue.drop_id, order)
    queue.drawn_at = now
    transaction.on_commit(lambda: state.publish_draw(queue.drop_id, order))
    log.info(
        "admission: drew %s early joiners of drop %s (beacon %s) in %.3f s",
        len(order),
        queue.drop_id,
        queue.beacon_status,
        time.monotonic() - began,
    )
    return True


def number_drawn(drop_id: int, order: list[int]) -> None:
    """Give each drawn entry its number (the first in `order` gets 1), in one statement. The rows
    go in entry order, the order they lie in: every index but (drop, number) is then written in
    its own order too: a fifth faster at 50,000 entries than writing them in drawn order."""
    numbers = sorted(zip(order, range(1, len(order) + 1), strict=True))
    with connection.cursor() as cursor:
        cursor.execute(
            sql.NUMBER_DRAWN,
            {"drop": drop_id, "ids": [e for e, _ in numbers], "numbers": [n for _, n in numbers]},
        )


DRAW_FIELDS = [
    "drawn_at",
    "drawn_entries",
    "entries_sha256",
    "entries_closed_at",
    "beacon",
    "beacon_status",
    "beacon_round",
    "beacon_signature",
    "beacon_previous_signature",
    "beacon_note",
]


ROUND_WAIT = timedelta(seconds=10)  # the start's task waits this long at most for the draw's round


def round_due_at(drop: Drop) -> datetime | None:
    row = (
        Queue.objects.filter(pk=drop.pk, drawn_at__isnull=True, beacon_status=BeaconStatus.WAITING)
        .values_list("beacon_chain", "beacon_round")
        .first()
    )
    chain = beacon.BY_HASH.get(row[0]) if row else None
    return chain.time_of(row[1]) if chain is not None and row is not None and row[1] else None


PREFLIGHT_AHEAD = timedelta(hours=1)  # how long before a waiting room's start its relays are checked


@dataclass(frozen=True)
class Preflight:
    """One check of the drand relays for a drop's coming draw (the round due before `at`)."""

    drop_id: int
    ok: bool
    round: int
    note: str


def check_relays(*, drop: Drop, now: datetime | None = None) -> Preflight | None:
    """Ask the relays for the chain's latest published round and verify its signature, as the draw
    will (outside any transaction: HTTP). None: nothing to check (no round named, already drawn)."""
    now = now or timezone.now()
    queue = queue_for(drop, now=now)
    chain = beacon.BY_HASH.get(queue.beacon_chain)
    if chain is None or queue.beacon_round is None or queue.drawn_at is not None:
        return None
    number = max(1, chain.round_at(now) - 1)  # the last round published by now
    try:
        beacon.fetch(chain, number, relays=list(settings.DRAW_BEACON_URLS))
    except beacon.NotReached as missed:
        log.warning("admission: preflight of drop %s: round %s not read: %s", drop.pk, number, missed)
        return Preflight(drop.pk, False, number, missed.reason[:300])
    return Preflight(drop.pk, True, number, "")


def record_preflight(checked: Preflight, *, now: datetime) -> bool:
    """Keep the check's result on the queue (the metric reads it); True the first time it fails for
    this drop, once: the caller tells the merchant in the same transaction."""
    assert connection.in_atomic_block, "the result and the merchant's message commit together"
    Queue.objects.filter(pk=checked.drop_id).update(
        preflight_at=now, preflight_ok=checked.ok, preflight_note=checked.note
    )
    if checked.ok:
        return False
    return bool(
        Queue.objects.filter(pk=checked.drop_id, preflight_alerted_at__isnull=True).update(
            preflight_alerted_at=now
        )
    )


@dataclass(frozen=True)
class RelayState:
    drop_id: int
    slug: str
    unreachable: bool


def preflight_states(*, now: datetime | None = None) -> list[RelayState]:
    """Waiting rooms starting within the hour whose draw still waits for its round, as last checked
    (not checked yet: not reported; the duty's own lateness has its alert)."""
    now = now or timezone.now()
    rows = Queue.objects.filter(
        drawn_at__isnull=True,
        beacon_status=BeaconStatus.WAITING,
        preflight_ok__isnull=False,
        drop__starts_at__gt=now - timedelta(minutes=10),
        drop__starts_at__lte=now + PREFLIGHT_AHEAD,
    ).values_list("drop_id", "drop__slug", "preflight_ok")
    return [RelayState(d, slug, not ok) for d, slug, ok in rows]
