"""Snapshots of each drop on sale: the cheap answers (state, remaining, sold out, the queue's mark).

A periodic tick computes them from PostgreSQL in one statement and publishes them through
Redis: a key per drop (read by any process that starts late) and a pub/sub message (that
keeps every process's copy fresh, see admission.edge), plus one Channels broadcast to a
drop's waiting clients when its queue moved. Pause, resume and a sold-out answer publish at
once. A snapshot is only ever an early answer; the claim statements still decide.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import redis.asyncio as aioredis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection
from django_redis import get_redis_connection
from redis.exceptions import RedisError

from admission import sql
from admission.answers import Offer, Place, QueueState, RaffleResult
from catalogue import selectors as catalogue
from catalogue.selectors import DropView, VariantView
from core.metrics import Gauge
from shop.models import Drop, DropFormat, DropState, Variant

log = logging.getLogger(__name__)

KEY = "fg:drop:{slug}"
CHANNEL = "fg:drops"
KEY_TTL = 60  # a key no tick refreshed for a minute is gone: readers fall back to the database
# Held by whoever recomputes a drop's snapshot outside the tick (beat late or down): one web
# process per drop at a time, and not again before it expires. Never released early on purpose.
REFRESH_LOCK = "fg:drop:{slug}:refreshing"
REFRESH_LOCK_SECONDS = 2
# entry -> number, written once when the draw numbers the early joiners: the edge answers their
# first poll after the draw from it, instead of sending the whole line to Django at the start.
DRAWN = "fg:queue:{drop}:drawn"
DRAWN_TTL = 7 * 24 * 3600  # a flushed or expired map only sends those polls to Django
# A buyer's credentials revoked (a token replaced or revoked, the account deactivated): buyer ->
# when, kept for a queue ticket's life. Every edge hears it on the channel (and reads the set when
# it subscribes): a ticket of that buyer signed before then is Django's to answer, which checks the
# credential itself; and the claim lane forgets the tokens and sessions it had looked up.
REVOKED = "fg:revoked"
REVOKED_CHANNEL = "fg:revocations"


# The normal quantile of 90%: the wait's range is its 10th to its 90th percentile.
WAIT_Z = 1.2816


def wait_range(position: int | None, pace_per_minute: float) -> tuple[int, int] | None:
    """How long until `position` more tickets are let in at the measured pace, as (low, high)
    seconds; None for a buyer who is in, not numbered yet, or a line that has not moved lately.

    Admissions come in bursts (a unit freed by a payment or an expiry lets one more in), so the
    wait is a spread, not a point: read as a Poisson process at the pace of the last two minutes,
    the wait for n admissions is Gamma(n), and its 10th and 90th percentiles (Wilson-Hilferty's
    cube-root approximation of chi-square, within a few percent from n = 1) bound what the buyer
    is told. static/js/queue.js's waitRange is the same formula for the live page."""
    if not position or pace_per_minute <= 0:
        return None
    nu = 2 * position
    shape = 1 - 2 / (9 * nu)
    spread = math.sqrt(2 / (9 * nu))
    per_second = pace_per_minute / 60

    def quantile(z: float) -> float:
        return nu * (shape + z * spread) ** 3 / (2 * per_second)

    return max(1, math.floor(quantile(-WAIT_Z))), max(1, math.ceil(quantile(WAIT_Z)))


def place_answer(
    queue: Mapping[str, Any],
    *,
    entry: int,
    number: int | None,
    admitted_through: int,
    drawn: bool,
    token: str | None,
    offer: Offer | None = None,
    queue_ticket: str | None = None,
) -> Place:
    """The queue API's answer to a buyer (entry, and number once drawn) over a queue message
    (Snapshot.queue_json): Django's Standing.as_json and the edge's place() both return this.
    `admitted_through` is the freshest mark the caller has (Django's queue row, the edge's snapshot)."""
    position = None if number is None else max(0, number - admitted_through)
    pace = float(queue["pace_per_minute"]) / 60  # tickets per second over the last two minutes
    eta = 0 if position == 0 else (math.ceil(position / pace) if position is not None and pace > 0 else None)
    spread = wait_range(position, float(queue["pace_per_minute"]))
    return Place(
        **queue,
        ticket=number,
        entry=entry,
        position=position,
        admitted=position == 0,
        admission_token=token,
        eta_seconds=eta,
        eta_low_seconds=spread[0] if spread else None,
        eta_high_seconds=spread[1] if spread else None,
        drawn=drawn,
        unlikely=unlikely(
            position,
            remaining=int(queue["remaining"]) + int(queue.get("returning") or 0),
            held=int(queue["held"]),
            admitted_unclaimed=int(queue.get("admitted_unclaimed") or 0),
        ),
        offer=offer,
        result=raffle_result(queue, number=number, drawn=drawn, offer=offer),
        rank=number if queue.get("format") == DropFormat.RAFFLE and drawn else None,
        queue_ticket=queue_ticket,
    )


def raffle_result(
    queue: Mapping[str, Any], *, number: int | None, drawn: bool, offer: Offer | None
) -> RaffleResult | None:
    """A raffle entry's result from the queue message, its rank and its offer (None: not a raffle, or
    before the draw). Django and the edge both ask it (through place_answer), so both doors agree."""
    if queue.get("format") != DropFormat.RAFFLE or not drawn or number is None:
        return None
    if offer is not None:
        return RaffleResult.WON if offer.state in ("held", "sold") else RaffleResult.LOST
    if number <= int(queue.get("offered_through") or 0):
        return RaffleResult.LOST  # the wins have gone past this entry (an account closed since)
    if queue["state"] in (QueueState.SOLD_OUT, QueueState.CLOSED):
        return RaffleResult.LOST  # every unit sold and none held: nothing can pass to it
    return RaffleResult.RESERVE


def unlikely(position: int | None, *, remaining: int, held: int, admitted_unclaimed: int = 0) -> bool:
    """Whether a ticket waits behind at least as many buyers as units that could still reach the line
    (the open ones, those returning to the line, and the held ones that may come back; the caller
    adds the first two as `remaining`): the page then says so, early. Ahead of it: the tickets
    still waiting before it, and the admitted who have not had a unit yet (they are let in to claim).
    place_answer asks it for Django and the edge; the page's script computes the same."""
    if not position:
        return False  # admitted, or no place before the draw
    return position - 1 + admitted_unclaimed >= remaining + held


def first_unlikely(*, admitted_through: int, remaining: int, held: int, admitted_unclaimed: int = 0) -> int:
    """The lowest ticket number unlikely() says is unlikely (every number from it on is)."""
    return admitted_through + max(1, remaining + held - admitted_unclaimed + 1)


def revoke(buyer_id: int) -> None:
    """Tell every web process that this buyer's credentials changed. Without Redis it is logged:
    the database refuses them anyway, and the other processes' caches age out."""
    now = time.time()
    try:
        client = get_redis_connection("default")
        pipe = client.pipeline(transaction=False)
        pipe.zadd(REVOKED, {str(buyer_id): now})
        pipe.zremrangebyscore(REVOKED, "-inf", now - settings.QUEUE_TICKET_SECONDS)
        pipe.publish(REVOKED_CHANNEL, json.dumps({"buyer": buyer_id, "at": now}))
        pipe.execute()
    except RedisError as error:
        log.error("could not announce buyer %s's revoked credentials: %s", buyer_id, error)


async def revocations(client: aioredis.Redis) -> dict[int, float]:
    """Every buyer revoked within a ticket's life, and when (an edge that just subscribed)."""
    since = time.time() - settings.QUEUE_TICKET_SECONDS
    found = await client.zrangebyscore(REVOKED, since, "+inf", withscores=True)
    return {int(buyer): float(at) for buyer, at in cast(list[tuple[bytes, float]], found)}


def group(drop_id: int) -> str:
    """The Channels group of a drop's waiting clients."""
    return f"queue.{drop_id}"


@dataclass(frozen=True)
class Cuts:
    """Where a drawn line divides, named by drawn entries (admission/sql.CUTS). An early joiner's
    page knows its entry, not its number: it computes its own draw key (admission/draw.entry_key)
    and compares it with these entries' keys, so the draw's one broadcast tells the whole line
    at once whether each is in, unlikely to get a unit or somewhere between, and only the pages
    that can still buy need to ask for their number at once."""

    admitted_entry: int | None = None  # the highest-numbered drawn entry inside the admitted mark
    unlikely_entry: int | None = None  # the lowest-numbered drawn entry from unlikely_from on
    unlikely_from: int | None = None  # ... its number (first_unlikely, or the next drawn after it)


@dataclass(frozen=True)
class Snapshot:
    drop: Drop
    state: DropState
    available: int
    held: int
    admitted_through: int
    last_ticket: int
    undrawn: int
    seed_sha256: str | None
    seed: str | None
    admitted_recently: int  # in the last two minutes: the measured pace
    returning: int = 0  # returned units (and expired holds' units) on their way to the line's next tickets
    offered_through: int = 0  # tickets up to this one have been offered a returned unit (or had one)
    at: float = 0.0  # when it was read: a later publish of an older read never wins at the edge
    variants: tuple[VariantView, ...] = ()  # each with its units still available
    admitted_unclaimed: int = 0  # admitted tickets whose buyer has had no unit yet: ahead of every waiter
    drawn_entries: int = 0  # the early joiners numbered by the draw (1..drawn_entries)
    entries_sha256: str | None = None  # after the draw: with the seed and the beacon, a page's draw key
    beacon: str | None = None
    cuts: Cuts = Cuts()

    def first_unlikely(self) -> int:
        return first_unlikely(
            admitted_through=self.admitted_through,
            remaining=self.available + self.returning,
            held=self.held,
            admitted_unclaimed=self.admitted_unclaimed,
        )

    @property
    def queue_state(self) -> QueueState:
        """What a waiting buyer is told: admitting, all_held (units may come back), sold_out, ..."""
        if self.state == DropState.PAUSED:
            return QueueState.PAUSED
        if self.state == DropState.SCHEDULED:
            return QueueState.SCHEDULED
        if self.state == DropState.ENDED:
            return QueueState.CLOSED
        if self.available > 0:
            return QueueState.ADMITTING
        return QueueState.ALL_HELD if self.held + self.returning > 0 else QueueState.SOLD_OUT

    def queue_json(self) -> dict[str, Any]:
        """The WebSocket message (and the shared part of the queue API's answer)."""
        return {
            "admitted_through": self.admitted_through,
            "state": self.queue_state,
            "remaining": self.available,
            "returning": self.returning,
            "held": self.held,
            "last_ticket": self.last_ticket,
            "waiting": max(0, self.last_ticket - self.admitted_through) + self.undrawn,
            "offered_through": self.offered_through,
            "pace_per_minute": self.admitted_recently / 2,
            "seed_sha256": self.seed_sha256,
            "seed": self.seed,
            "admitted_unclaimed": self.admitted_unclaimed,
            "format": self.drop.format.value,
            "entries_sha256": self.entries_sha256,
            "beacon": self.beacon,
            "admitted_entry": self.cuts.admitted_entry,
            "unlikely_entry": self.cuts.unlikely_entry,
            "unlikely_from": self.cuts.unlikely_from,
        }

    def as_json(self) -> dict[str, Any]:
        return {
            "drop_id": self.drop.pk,  # for the edge's token check; not part of the public drop JSON
            "rehearsal": self.drop.rehearsal_of_id is not None,  # Django decides who may see it
            "drop": DropView(self.drop, self.state, self.available, self.variants).as_json(),
            "queue": self.queue_json(),
            "at": self.at,
        }


def compute(drops: list[Drop]) -> list[Snapshot]:
    """Snapshots of these drops (products loaded), from one statement."""
    by_id = {d.pk: d for d in drops}
    at = time.time()
    with connection.cursor() as cursor:
        cursor.execute(sql.SNAPSHOTS, {"drops": list(by_id)})
        rows = cursor.fetchall()
    snapshots = [
        Snapshot(
            drop=by_id[row[0]],
            state=DropState(row[2]),
            available=int(row[3]),
            held=int(row[4]),
            admitted_through=int(row[5]),
            last_ticket=int(row[6] or 0),
            undrawn=int(row[7]),
            seed_sha256=row[8],
            seed=row[9],
            admitted_recently=int(row[10]),
            returning=int(row[11]),
            offered_through=int(row[12]),
            at=at,
            variants=_variants(by_id[row[0]], row[13]),
            admitted_unclaimed=int(row[14]),
            drawn_entries=int(row[15] or 0),
            entries_sha256=row[16] if row[9] is not None else None,
            beacon=row[17] if row[9] is not None else None,
        )
        for row in rows
    ]
    return _with_cuts(snapshots)


def _with_cuts(snapshots: list[Snapshot]) -> list[Snapshot]:
    """The drawn waiting rooms' cut entries (Cuts), one statement for all of them."""
    drawn = [s for s in snapshots if s.seed is not None and s.drawn_entries > 0]
    if not drawn:
        return snapshots
    with connection.cursor() as cursor:
        cursor.execute(
            sql.CUTS,
            {
                "drops": [s.drop.pk for s in drawn],
                "admitted": [s.admitted_through for s in drawn],
                "unlikely": [s.first_unlikely() for s in drawn],
                "drawn": [s.drawn_entries for s in drawn],
            },
        )
        cuts = {row[0]: Cuts(*row[1:]) for row in cursor.fetchall()}
    return [dataclasses.replace(s, cuts=cuts.get(s.drop.pk, Cuts())) for s in snapshots]


def _variants(drop: Drop, rows: list[list[Any]]) -> tuple[VariantView, ...]:
    """The snapshot's variant rows ([id, name, position, quantity, price, available]) as views."""
    return tuple(
        VariantView(
            Variant(pk=pk, drop=drop, name=name, position=n, quantity=q, price_minor=price),
            int(left),
            drop.product.price_minor if price is None else price,
        )
        for pk, name, n, q, price, left in rows
    )


# A waiting room's state goes to its sockets when the queue moves, and again when it has not for
# this long: a process whose Channels subscription was away (a Redis failover, a reconnect) missed
# the message, and nothing else would tell its sockets until the line moves again. The key is the
# fleet's timer (many processes publish: the worker's children, the edges' refreshes).
REBROADCAST_SECONDS = 10
TOLD = "fg:queue:{drop}:told"


def publish(snapshots: list[Snapshot], *, force: bool = False) -> int:
    """Store and announce each snapshot; broadcast to a drop's waiting clients when its queue moved.

    Returns how many changed. Raises RedisError when Redis is down (callers decide).
    """
    if not snapshots:
        return 0
    client = get_redis_connection("default")
    keys = [KEY.format(slug=s.drop.slug) for s in snapshots]
    before = client.mget(keys)
    changed = 0
    pipe = client.pipeline(transaction=False)
    broadcasts: list[tuple[int, dict[str, Any]]] = []
    quiet: list[tuple[int, dict[str, Any]]] = []  # waiting rooms whose line did not move
    for key, old, snap in zip(keys, before, snapshots, strict=True):
        body = snap.as_json()
        encoded = json.dumps(body, separators=(",", ":"))
        old_body = json.loads(old) if old else None
        if old_body is not None and float(old_body.get("at") or 0) > snap.at:
            # Read before one already published (a web process's refresh racing a wave's): an
            # older read must not undo the newer one, for the edges or for the waiting sockets.
            continue
        moved = old_body is None or old_body["queue"] != body["queue"]
        if force or old_body is None or moved or old_body["drop"] != body["drop"]:
            changed += 1
            pipe.publish(CHANNEL, encoded)
            if snap.drop.waiting_room and (moved or force):
                broadcasts.append((snap.drop.pk, body["queue"]))
                pipe.set(TOLD.format(drop=snap.drop.pk), "1", ex=REBROADCAST_SECONDS)
        elif snap.drop.waiting_room:
            quiet.append((snap.drop.pk, body["queue"]))
        pipe.set(key, encoded, ex=KEY_TTL)
    pipe.execute()
    if quiet:  # told nothing for REBROADCAST_SECONDS: whichever process sets the timer tells it again
        timers = client.pipeline(transaction=False)
        for drop_id, _queue in quiet:
            timers.set(TOLD.format(drop=drop_id), "1", ex=REBROADCAST_SECONDS, nx=True)
        broadcasts += [entry for entry, due in zip(quiet, timers.execute(), strict=True) if due]
    layer = get_channel_layer()
    for drop_id, message in broadcasts:
        text = json.dumps(message, separators=(",", ":"))
        async_to_sync(layer.group_send)(
            group(drop_id), {"type": "queue.update", "queue": message, "text": text}
        )
    return changed


def publish_draw(drop_id: int, order: list[int]) -> None:
    """The draw's result (entries in drawn order: the first gets 1); Redis away only logs."""
    if not order:
        return
    key = DRAWN.format(drop=drop_id)
    try:
        pipe = get_redis_connection("default").pipeline(transaction=False)
        for start in range(0, len(order), 10_000):
            chunk = order[start : start + 10_000]
            pipe.hset(key, mapping={entry: start + i + 1 for i, entry in enumerate(chunk)})
        pipe.expire(key, DRAWN_TTL)
        pipe.execute()
    except (RedisError, OSError) as error:
        log.warning("admission: could not publish the draw of drop %s: %s", drop_id, error)


async def drawn_number(client: aioredis.Redis, drop_id: int, entry: int) -> int | None:
    """The number the draw gave this entry, from the published map (None: not there)."""
    return (await drawn_numbers(client, [(drop_id, entry)])).get((drop_id, entry))


async def drawn_numbers(client: aioredis.Redis, keys: list[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """The numbers the draws gave these (drop, entry) keys, from the published maps (a key not
    there is left out): one HMGET per drop, pipelined. The whole line asks just after the draw,
    and one command each cost the edge more than the rest of its answer."""
    by_drop: dict[int, list[int]] = {}
    for drop_id, entry in keys:
        by_drop.setdefault(drop_id, []).append(entry)
    async with client.pipeline(transaction=False) as pipe:
        for drop_id, entries in by_drop.items():
            pipe.hmget(DRAWN.format(drop=drop_id), [str(e) for e in entries])
        replies = await pipe.execute()
    found: dict[tuple[int, int], int] = {}
    for (drop_id, entries), values in zip(by_drop.items(), replies, strict=True):
        for entry, raw in zip(entries, values, strict=True):
            if raw is not None:
                found[(drop_id, entry)] = int(raw)
    return found


def cached(slug: str) -> dict[str, Any] | None:
    """The last published snapshot of a drop, or None (never published, expired, or Redis down)."""
    return _read(slug)[0]


def _read(slug: str) -> tuple[dict[str, Any] | None, bool]:
    """(the published snapshot or None, whether Redis answered at all)."""
    try:
        raw = get_redis_connection("default").get(KEY.format(slug=slug))
    except RedisError:
        return None, False
    return (json.loads(raw) if raw else None), True


def claim_refresh(slug: str) -> bool:
    """True for the one caller across all processes that may recompute and publish this drop now."""
    client = get_redis_connection("default")
    return bool(client.set(REFRESH_LOCK.format(slug=slug), "1", nx=True, ex=REFRESH_LOCK_SECONDS))


async def claim_refresh_async(client: aioredis.Redis, slug: str) -> bool:
    """claim_refresh on an asyncio client (the edge's)."""
    return bool(await client.set(REFRESH_LOCK.format(slug=slug), "1", nx=True, ex=REFRESH_LOCK_SECONDS))


def current(drop: Drop, *, max_age: float = 5.0, publish_computed: bool = False) -> Snapshot:
    """The drop's snapshot from the published copy when it is fresh (no query), else computed.

    publish_computed: publish one that had to be computed (one process at a time), so that with
    beat late or down, or the key expired, the next polls and sockets find it at the edge.
    """
    body, reachable = _read(drop.slug)
    if body and body.get("drop_id") == drop.pk and time.time() - float(body.get("at") or 0) <= max_age:
        queue = body["queue"]
        public = body["drop"]
        assert isinstance(queue, dict) and isinstance(public, dict)
        through, last = int(queue["admitted_through"]), int(queue["last_ticket"])
        return Snapshot(
            drop=drop,
            state=DropState(public["state"]),
            available=int(queue["remaining"]),
            held=int(queue["held"]),
            admitted_through=through,
            last_ticket=last,
            undrawn=int(queue["waiting"]) - max(0, last - through),
            seed_sha256=queue["seed_sha256"],
            seed=queue["seed"],
            admitted_recently=round(float(queue["pace_per_minute"]) * 2),
            returning=int(queue.get("returning") or 0),
            offered_through=int(queue.get("offered_through") or 0),
            at=float(body["at"]),
            variants=tuple(
                VariantView(
                    Variant(drop=drop, name=v["name"], position=n, price_minor=v["price_minor"]),
                    v["remaining"],
                    v["price_minor"],
                )
                for n, v in enumerate(public.get("variants") or [])
            ),
            admitted_unclaimed=int(queue.get("admitted_unclaimed") or 0),
            entries_sha256=queue.get("entries_sha256"),
            beacon=queue.get("beacon"),
            cuts=Cuts(queue.get("admitted_entry"), queue.get("unlikely_entry"), queue.get("unlikely_from")),
        )
    snapshot = compute([drop])[0]
    if not (publish_computed and reachable):
        return snapshot  # (Redis away: do not wait for it a second time)
    try:
        if claim_refresh(drop.slug):
            publish([snapshot])
    except (RedisError, OSError) as error:
        log.warning("admission: could not publish drop %s: %s", drop.pk, error)
    return snapshot


def refresh(drop_ids: list[int], *, force: bool = False) -> None:
    """Recompute and publish now (pause, resume, a wave, a sold-out answer); Redis down only logs."""
    drops = list(Drop.objects.select_related("product").filter(pk__in=drop_ids))
    try:
        publish(compute(drops), force=force)
    except (RedisError, OSError) as error:
        log.warning("admission: could not publish drops %s: %s", drop_ids, error)


def note_sold_out(drop: Drop) -> None:
    """The arbiter just said "sold out": publish it unless the published snapshot already says so."""
    snap = cached(drop.slug)
    if snap is None or snap["drop"].get("remaining"):
        refresh([drop.pk])


def snapshot_ages(drops: list[Drop]) -> list[tuple[Drop, float]]:
    """Seconds since each drop's published snapshot was read (+Inf: none published, the key
    expired, or Redis away): beat publishes every second, the edges trust up to five."""
    try:
        raws = get_redis_connection("default").mget([KEY.format(slug=d.slug) for d in drops]) if drops else []
    except (RedisError, OSError):
        raws = [None] * len(drops)
    now = time.time()
    return [
        (drop, now - float(json.loads(raw).get("at") or 0) if raw else float("inf"))
        for drop, raw in zip(drops, raws, strict=True)
    ]


def gauges() -> list[Gauge]:
    """Prometheus gauges: every active drop's snapshot age; every waiting room's mark, line and pace."""
    active = catalogue.active_drops(datetime.now(UTC))
    rooms = [d for d in active if d.waiting_room]
    snaps = compute(rooms) if rooms else []
    return [
        Gauge(
            "floodgate_snapshot_age_seconds",
            "Seconds since the drop's published snapshot was read from the database (+Inf: none).",
            [({"drop": d.slug}, age) for d, age in snapshot_ages(active)],
        ),
        Gauge(
            "floodgate_queue_admitted_through",
            "Tickets up to this number are admitted, per waiting room.",
            [({"drop": s.drop.slug}, s.admitted_through) for s in snaps],
        ),
        Gauge(
            "floodgate_queue_waiting",
            "Buyers in line and not yet admitted (early joiners before the draw included).",
            [({"drop": s.drop.slug}, s.queue_json()["waiting"]) for s in snaps],
        ),
        Gauge(
            "floodgate_queue_returning_units",
            "Units given back and not yet offered to the next ticket (beat's sale.offer_returns "
            "offers them every second; one that stays up means the offers are stuck).",
            [({"drop": s.drop.slug}, s.returning) for s in snaps],
        ),
        Gauge(
            "floodgate_queue_admitted_per_minute",
            "The measured admission pace over the last two minutes.",
            [({"drop": s.drop.slug}, s.admitted_recently / 2) for s in snaps],
        ),
    ]
