"""Returned units go to the line in ticket order, never to whoever clicks first.

In a waiting-room drop a unit given back (released, expired, a payment voided) becomes
'returned' (inventory's GIVE_BACK), which no claim reads. Right after the return (and every
second) such units are offered to the next tickets that never had a unit, each up to the
buyer's limit from one bucket or one variant: a hold made for that buyer, for the drop's
offer_seconds. Paying starts the hold's full time; a lapsed or released offer is returned
again, and goes to the ticket after. With nobody left waiting, returned units open to any
admitted buyer. The offers, the stock they take and the mark they move commit together,
under the drop's WAVE lock (one offerer, and no wave, at a time).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.db import OperationalError, connection, transaction
from django.db.backends.utils import CursorWrapper
from django.utils import timezone
from django_redis import get_redis_connection

from admission import services as line
from admission import state
from admission.models import Queue
from catalogue import selectors as catalogue
from core import locks
from holds import services, sql
from inventory import services as stock
from sale import exchange
from shop.models import Drop, DropState

log = logging.getLogger(__name__)


def offer_returns(drop: Drop, *, wait: bool = False) -> int:
    """Offer the drop's returned units to the next tickets in line; returns the offers made.

    The line's lock is waited for a moment (OFFER_LOCK_TIMEOUT), not tried once: the tick takes
    it every second for its wave, and an offerer on the same period in step with it (two duties a
    web process took over in the same instant) found it taken every time and never offered.
    wait: queue for it longer (OFFER_WAIT_TIMEOUT), behind a wave or another offerer: that one may
    have counted the returned units before ours came back.
    """
    if drop.waiting_room:
        services.reclaim_expired(drop_id=drop.pk)  # lapsed offers and unpaid holds come back first
    try:
        with transaction.atomic(durable=True), connection.cursor() as cursor:
            cursor.execute(sql.OFFER_WAIT_TIMEOUT if wait else sql.OFFER_LOCK_TIMEOUT)
            locks.lock(cursor, locks.Namespace.WAVE, drop.pk)
            cursor.execute(sql.OFFER_LOCK_TIMEOUT)
            if drop.raffle:
                _rank_what_opened(cursor, drop)
            returned = stock.returned_units(cursor, drop_id=drop.pk)
            if not returned:
                return 0
            if not drop.waiting_room:  # the room was turned off: nobody has a place to offer by
                stock.open_returned(cursor, drop_id=drop.pk)
                return 0
            queue = line.line_for_offers(drop)
            if queue is None or drop.state != DropState.LIVE:
                return 0
            waiting = line.next_waiting(queue, limit=returned)
            if not waiting:
                opened = stock.open_returned(cursor, drop_id=drop.pk)
                log.info("drop %s: nobody waiting, %s returned units open to any claim", drop.pk, opened)
                transaction.on_commit(lambda: state.refresh([drop.pk]))  # the open units, published
                return 0
            return _offer(cursor, drop, queue, waiting)
    except OperationalError as error:  # lock_timeout: a long wave, or a buyer's claim had a row it needed
        log.info("drop %s: offers wait for the next tick (%s)", drop.pk, error)
        return 0


def _rank_what_opened(cursor: CursorWrapper, drop: Drop) -> None:
    """A drawn raffle's units go by rank while a ranked entry still waits: units open since the draw
    (stock added) go to the line as the draw's did, not to the winners, whose admission lets them
    claim open units. Once every entry has had its turn, the units open for good (below)."""
    queue = line.line_for_offers(drop)
    if queue is None or queue.last_wave_at is None or drop.state != DropState.LIVE:
        return  # not handed to the offers yet: the draw moves the units itself
    if line.next_waiting(queue, limit=1):
        stock.return_open(cursor, drop_id=drop.pk)


def _offer(cursor: CursorWrapper, drop: Drop, queue: Queue, waiting: list[line.Waiting]) -> int:
    limit = 1 if drop.raffle else drop.per_buyer_limit  # a raffle's win is one unit per entry
    plan = plan_offers(stock.returned_pools(cursor, drop_id=drop.pk), waiting, limit=limit)
    if not plan:
        return 0
    offered = [w for w, _, _ in plan]
    params: dict[str, Any] = {
        "drop": drop.pk,
        "buyers": [w.buyer_id for w in offered],
        "keys": [line.offer_key(w.ticket) for w in offered],
        "qs": [units for _, units, _ in plan],
        "indexes": [pool.bucket_index for _, _, pool in plan],
        "variants": [pool.variant_id for _, _, pool in plan],
    }
    cursor.execute(sql.INSERT_OFFERS, params)
    made = {buyer: hold for hold, buyer in cursor.fetchall()}
    if not made:
        return 0  # paused or over since (the insert checks): nobody is passed
    # The offers made, in ticket order (a buyer who started a hold of their own has none).
    taking = [(made[w.buyer_id], units, pool) for w, units, pool in plan if w.buyer_id in made]
    granted = stock.take_returned(cursor, drop=drop, offers=taking)
    if len(granted) != len(taking):  # only this lock's holder takes returned units: cannot happen
        raise RuntimeError(f"drop {drop.pk}: {len(taking)} offers but {len(granted)} had their units")
    # Every ticket planned for is decided: offered now, or holding a unit it claimed meanwhile.
    through = offered[-1].number
    line.mark_offered(queue, through=through)
    units = sum(n for _, n, _ in taking)
    log.info(
        "drop %s: %s returned units offered to %s tickets, through %s", drop.pk, units, len(taking), through
    )
    return len(taking)


def plan_offers(
    pools: list[stock.Pool], waiting: list[line.Waiting], *, limit: int
) -> list[tuple[line.Waiting, int, stock.Pool]]:
    """Who gets which returned units: the next tickets in order, each up to the buyer's limit from one
    pool (a hold's units are one bucket's, or one variant's), as far as the units go."""
    plan: list[tuple[line.Waiting, int, stock.Pool]] = []
    tickets = iter(waiting)
    for pool in pools:
        left = pool.units
        while left > 0 and (ticket := next(tickets, None)) is not None:
            units = min(limit, left)
            plan.append((ticket, units, pool))
            left -= units
    return plan


def offer_now(drop_id: int) -> int:
    """offer_returns for one drop by id, as soon as units came back (0 for a drop gone since).
    The pending flag is cleared first: a return after this sends the next task."""
    get_redis_connection().delete(services.OFFER_PENDING.format(drop_id))
    drop = Drop.objects.filter(pk=drop_id).first()
    if drop is None:
        return 0
    made = offer_returns(drop, wait=True)
    if drop.exchange_closes_at is not None:  # a unit back from an exchange buyer's cancel
        made += exchange.offer_listings(drop, wait=True)
    return made


def offer_all(drops: list[Drop]) -> int:
    """The beat task's work: every given drop's returned units offered (or opened)."""
    total = 0
    for drop in drops:
        try:
            total += offer_returns(drop)
        except Exception:  # one drop's trouble must not stop the others' offers
            log.exception("offers: drop %s failed", drop.pk)
    return total


def tick(now: datetime | None = None) -> int:
    """Beat's offer step (and a web process's in the worker's place): the returned units of the drops
    on sale (at `now`, default the time it runs), then the exchanges' listed units."""
    return offer_all(catalogue.active_drops(now or timezone.now())) + exchange.offer_all()
