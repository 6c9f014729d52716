"""The face-value exchange's line: each listed unit goes to the next ticket that never had a unit, in
ticket order, as an offer (a hold for the drop's offer time at the seller's price, checkout/exchange.py
puts units on it and pays sellers).

An offer of a listed unit is a hold like a returned unit's offer (the ticket's offer key, so the
waiting page shows it and the public report counts it), marked `exchange`: it takes no stock and
gives none back. Its listing is sold with it (holds.sql.SELL_LISTING); an offer that ends unpaid gives
the listing back to the next ticket; when the exchange closes what nobody took stays the seller's.
Everything runs under the drop's WAVE lock, the lock returned units are offered under, so the line's
offers of both kinds are made one at a time and in one order.
"""

from __future__ import annotations

import logging

from django.db import OperationalError, connection, transaction
from django.db.backends.utils import CursorWrapper

from admission import services as line
from core import locks
from holds import services as holds
from holds import sql as holds_sql
from sale import sql
from shop.models import Drop

log = logging.getLogger(__name__)

BATCH = 200  # listings offered per transaction; the next tick offers the rest


def offer_listings(drop: Drop, *, wait: bool = False) -> int:
    """Give lapsed offers' listings back, offer the listed units to the next tickets, keep what is left
    once the exchange has closed. Returns the offers made. wait: as sale.offers.offer_returns."""
    holds.reclaim_expired(drop_id=drop.pk)  # offers whose time is up end first
    try:
        with transaction.atomic(durable=True), connection.cursor() as cursor:
            cursor.execute(holds_sql.OFFER_WAIT_TIMEOUT if wait else holds_sql.OFFER_LOCK_TIMEOUT)
            locks.lock(cursor, locks.Namespace.WAVE, drop.pk)
            cursor.execute(holds_sql.OFFER_LOCK_TIMEOUT)
            cursor.execute(sql.KEEP_UNSOLD, {"drop": drop.pk})
            if kept := cursor.fetchall():
                log.info("drop %s: the exchange closed, %s units kept by their sellers", drop.pk, kept)
            cursor.execute(sql.RELIST_LAPSED, {"drop": drop.pk})
            return _offer(cursor, drop)
    except OperationalError as error:  # lock_timeout: a wave or another offerer has the line
        log.info("drop %s: exchange offers wait for the next tick (%s)", drop.pk, error)
        return 0


def _offer(cursor: CursorWrapper, drop: Drop) -> int:
    cursor.execute(sql.WAITING_LISTINGS, {"drop": drop.pk, "limit": BATCH})
    listings = cursor.fetchall()
    queue = line.line_for_offers(drop) if listings else None
    if queue is None:
        return 0
    waiting = line.next_waiting(queue, limit=len(listings))
    if not waiting:
        return 0
    pairs = list(zip(listings, waiting, strict=False))
    cursor.execute(
        sql.INSERT_OFFERS,
        {
            "drop": drop.pk,
            "buyers": [w.buyer_id for _, w in pairs],
            "keys": [line.offer_key(w.ticket) for _, w in pairs],
            "variants": [variant for (_, variant, _), _ in pairs],
            "prices": [price for (_, _, price), _ in pairs],
        },
    )
    made = {buyer: hold for hold, buyer in cursor.fetchall()}
    if not made:
        return 0  # closed or paused since (the insert checks): nobody is passed
    offered = [(listing, made[w.buyer_id]) for (listing, _, _), w in pairs if w.buyer_id in made]
    cursor.execute(
        sql.OFFER_LISTINGS,
        {"drop": drop.pk, "listings": [listing for listing, _ in offered], "holds": [h for _, h in offered]},
    )
    if len(cursor.fetchall()) != len(offered):  # the rows are ours under the lock: cannot happen
        raise RuntimeError(f"drop {drop.pk}: {len(offered)} exchange offers but not every listing moved")
    # Every ticket paired is decided: offered now, or holding a unit of their own meanwhile.
    through = pairs[-1][1].number
    line.mark_offered(queue, through=through)
    log.info("drop %s: %s exchange units offered, through ticket %s", drop.pk, len(offered), through)
    return len(offered)


def exchange_drops() -> list[Drop]:
    """Drops with units listed or offered on their exchange."""
    with connection.cursor() as cursor:
        cursor.execute(sql.EXCHANGE_DROPS)
        ids = [row[0] for row in cursor.fetchall()]
    return list(Drop.objects.filter(pk__in=ids))


def offer_all() -> int:
    """Beat's step for every drop with an exchange (beside the returned units' offers)."""
    total = 0
    for drop in exchange_drops():
        try:
            total += offer_listings(drop)
        except Exception:  # one drop's trouble must not stop the others' offers
            log.exception("exchange offers: drop %s failed", drop.pk)
    return total
