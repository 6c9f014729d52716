"""Returned units go to the line in ticket order, never to whoever clicks first.

In a waiting-room drop a unit given back (released, expired, a payment voided) becomes
'returned' (inventory's GIVE_BACK), which no claim reads. Every second each such unit is
offered to the next ticket that never had a unit: a hold made for that buyer, for the drop's
offer_seconds. Paying starts the hold's full time; a lapsed or released offer is returned
again, and goes to the ticket after. With nobody left waiting, returned units open to any
admitted buyer. The offers, the stock they take and the mark they move commit together,
under the drop's WAVE lock (one offerer, and no wave, at a time).
"""

from __future__ import annotations

import logging

from django.db import OperationalError, connection, transaction
from django.db.backends.utils import CursorWrapper
from django_redis import get_redis_connection

from admission import services as line
from admission import state
from admission.models import Queue
from core import locks
from holds import services, sql
from inventory import services as stock
from shop.models import Drop, DropState

log = logging.getLogger(__name__)


def offer_returns(drop: Drop, *, wait: bool = False) -> int:
    """Offer the drop's returned units to the next tickets in line; returns the offers made.

    wait: queue for the line behind a wave or another offerer (briefly) instead of leaving it to
    the next tick: that one may have counted the returned units before ours came back.
    """
    if drop.waiting_room:
        services.reclaim_expired(drop_id=drop.pk)  # lapsed offers and unpaid holds come back first
    try:
        with transaction.atomic(durable=True), connection.cursor() as cursor:
            if wait:
                cursor.execute(sql.OFFER_WAIT_TIMEOUT)
                locks.lock(cursor, locks.Namespace.WAVE, drop.pk)
            elif not locks.try_lock(cursor, locks.Namespace.WAVE, drop.pk):
                return 0  # a wave or another offerer has the line; the next tick comes
            cursor.execute(sql.OFFER_LOCK_TIMEOUT)
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
    except OperationalError as error:  # lock_timeout: a buyer's claim had a row it needed, or a long wave
        log.info("drop %s: offers wait for the next tick (%s)", drop.pk, error)
        return 0


def _offer(cursor: CursorWrapper, drop: Drop, queue: Queue, waiting: list[line.Waiting]) -> int:
    buyers, keys = [w.buyer_id for w in waiting], [line.offer_key(w.ticket) for w in waiting]
    cursor.execute(sql.INSERT_OFFERS, {"drop": drop.pk, "buyers": buyers, "keys": keys})
    made = {buyer: hold for hold, buyer in cursor.fetchall()}
    if not made:
        return 0  # paused or over since (the insert checks): nobody is passed
    holds = [made[w.buyer_id] for w in waiting if w.buyer_id in made]  # in ticket order
    granted = stock.take_returned(cursor, drop=drop, holds=holds) if holds else {}
    if len(granted) != len(holds):  # only this lock's holder takes returned units: cannot happen
        raise RuntimeError(f"drop {drop.pk}: {len(holds)} offers but {len(granted)} returned units")
    claims = granted.values()
    got = {"indexes": [c.bucket_index for c in claims], "variants": [c.variant_id for c in claims]}
    cursor.execute(sql.SET_OFFERED, {"drop": drop.pk, "holds": list(granted), **got})
    # Every ticket read is decided: offered now, or holding a unit it claimed meanwhile.
    through = waiting[-1].number
    line.mark_offered(queue, through=through)
    log.info("drop %s: %s returned units offered, through ticket %s", drop.pk, len(holds), through)
    return len(holds)


def offer_now(drop_id: int) -> int:
    """offer_returns for one drop by id, as soon as units came back (0 for a drop gone since).
    The pending flag is cleared first: a return after this sends the next task."""
    get_redis_connection().delete(services.OFFER_PENDING.format(drop_id))
    drop = Drop.objects.filter(pk=drop_id).first()
    return offer_returns(drop, wait=True) if drop is not None else 0


def offer_all(drops: list[Drop]) -> int:
    """The beat task's work: every given drop's returned units offered (or opened)."""
    total = 0
    for drop in drops:
        try:
            total += offer_returns(drop)
        except Exception:  # one drop's trouble must not stop the others' offers
            log.exception("offers: drop %s failed", drop.pk)
    return total
