"""The published snapshots as one process knows them, for the edge's answers.

admission.state publishes each drop's snapshot to Redis (every second, and at once on pause,
resume and sold out). Here each is parsed once, kept per slug, refreshed from Redis (one GET per
slug at a time, however many requests ask) and from the channel (admission.listener), and
recomputed by this process when beat is late with it, one process per drop at a time across the
fleet (a Redis SET NX lock). A snapshot it is unsure of (none, older than MAX_AGE, Redis away)
is unknown, and unknown passes the request to Django.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import redis.asyncio as aioredis

from admission import state
from admission.background import DB_THREADS, Trouble, close_connections
from core import redis

MAX_AGE = 5.0  # seconds: an older snapshot (by its "at" or its arrival) is unknown
REFRESH_AFTER = 1.0  # seconds: re-read the key after this; the tick only publishes changes
STALE_AFTER = 3.0  # seconds: beat publishes every second; older than this, this process recomputes it
MAX_ENTRIES = 10_000  # snapshots and "no such drop" answers kept; random slugs cannot grow it further
REDIS_CONNECTIONS = 32  # per process: the edge's Redis reads (a drawn number, a snapshot) are one round trip


@dataclass(frozen=True, slots=True)
class Known:
    """One drop's published snapshot, checked and digested once for the hot path."""

    drop: dict[str, Any]  # the public drop JSON (GET /api/drops/<slug>)
    body: bytes  # ... encoded as Django's JsonResponse would
    drop_id: int | None
    queue: dict[str, Any] | None  # the waiting room's message (admission.state.Snapshot.queue_json)
    at: float  # when it was computed (publisher's wall clock)
    starts_at: datetime
    ends_at: float  # epoch seconds
    rehearsal: bool = False  # a rehearsal's copy: its state is shown by Django, to its buyers only
    presale_starts_at: float | None = None  # epoch seconds; from then until starts_at Django decides


@dataclass(frozen=True, slots=True)
class Entry:
    known: Known | None  # None: no snapshot (no such drop, key expired, Redis away)
    received: float  # time.monotonic() when it came


def parse(raw: bytes | str) -> Known:
    """A published snapshot; ValueError, KeyError or TypeError for anything else."""
    snap = json.loads(raw)
    drop = snap["drop"]
    drop_id = snap.get("drop_id")
    if not isinstance(drop, dict) or not isinstance(drop["slug"], str) or not isinstance(drop["state"], str):
        raise TypeError("not a drop snapshot")
    if drop_id is not None and (isinstance(drop_id, bool) or not isinstance(drop_id, int)):
        raise TypeError("drop_id is not an integer")
    queue = snap.get("queue")
    if queue is not None and not (isinstance(queue, dict) and isinstance(queue.get("admitted_through"), int)):
        raise TypeError("not a queue message")
    return Known(
        drop=drop,
        body=json.dumps(drop).encode(),
        drop_id=drop_id,
        queue=queue,
        at=float(snap["at"]),
        starts_at=datetime.fromisoformat(drop["starts_at"]).astimezone(UTC),
        ends_at=datetime.fromisoformat(drop["ends_at"]).timestamp(),
        rehearsal=snap.get("rehearsal") is True,
        presale_starts_at=_epoch(drop.get("presale_starts_at")),
    )


def _epoch(value: object) -> float | None:
    return datetime.fromisoformat(value).timestamp() if isinstance(value, str) else None


def _refresh_drop(drop_id: int) -> None:
    try:
        state.refresh([drop_id])
    finally:
        close_connections()


class Snapshots:
    """One process's published snapshots, by slug."""

    def __init__(
        self,
        *,
        redis_url: str | None,
        stats: Counter[str],
        trouble: Trouble,
        max_age: float = MAX_AGE,
        refresh_after: float = REFRESH_AFTER,
        stale_after: float = STALE_AFTER,
    ) -> None:
        self.redis_url = redis_url
        self.stats = stats
        self._trouble = trouble
        self.max_age = max_age
        self.refresh_after = refresh_after
        self.stale_after = stale_after
        self._cache: dict[str, Entry] = {}
        self._fetching: dict[str, asyncio.Future[Entry]] = {}
        self._refreshing: dict[str, asyncio.Task[None]] = {}
        self._redis: aioredis.Redis | None = None

    def new_loop(self) -> None:
        """Clients and futures belong to the loop that made them: a new loop starts without them."""
        self._redis, self._fetching, self._refreshing = None, {}, {}

    def entry(self, slug: str) -> Entry | None:
        """What this process holds for the slug now, without reading Redis."""
        return self._cache.get(slug)

    async def known(self, slug: str) -> Known | None:
        """The drop's snapshot if fresh enough to answer from; None: unknown (ask Django)."""
        entry = self._cache.get(slug)
        if entry is None or time.monotonic() - entry.received > self.refresh_after:
            entry = await self._fetch(slug)
        known = entry.known
        if known is None:
            return None
        age = time.time() - known.at
        if age > self.stale_after:
            self._refresh_soon(slug, known)
        return None if age > self.max_age else known

    def note_sold_out(self, slug: str) -> None:
        """The arbiter just said "sold out" in this process: answer it here from now on.

        Stamped now, so a re-read of the older published snapshot does not undo it; the next
        one published (units came back, or not) replaces it.
        """
        entry = self._cache.get(slug)
        if entry is None or entry.known is None or entry.known.drop.get("sold_out") is True:
            return
        gone = [{**v, "remaining": 0, "sold_out": True} for v in entry.known.drop.get("variants", [])]
        drop = {**entry.known.drop, "sold_out": True, "remaining": 0, "variants": gone}
        known = dataclasses.replace(entry.known, drop=drop, body=json.dumps(drop).encode(), at=time.time())
        self._store(slug, Entry(known, time.monotonic()))

    def receive(self, raw: bytes | str) -> None:
        """A snapshot heard on the channel."""
        self.stats["message"] += 1
        try:
            known = parse(raw)
        except (ValueError, KeyError, TypeError) as error:
            self._trouble("ignored a snapshot message: %s", error)
            return
        slug = known.drop["slug"]
        old = self._cache.get(slug)
        if old is not None and old.known is not None and old.known.at > known.at:
            return  # never back in time
        self._store(slug, Entry(known, time.monotonic()))

    def forget(self) -> None:
        self._cache.clear()

    def in_flight(self) -> list[asyncio.Future[Any]]:
        """Database work under way (recomputing a snapshot): it must not outlive its caller."""
        return [*self._refreshing.values()]

    def client(self) -> aioredis.Redis:
        if self._redis is None:
            # A crowd's polls share a bounded pool, waiting briefly for a connection: redis-py's
            # own pool stops at 100 and then refuses at once, and each refusal fell to Django.
            self._redis = redis.client(
                url=self.redis_url,
                blocking=REDIS_CONNECTIONS,
                timeout=0.5,
                socket_timeout=0.5,
                socket_connect_timeout=0.5,
            )
        return self._redis

    async def aclose(self) -> None:
        if self._redis is not None:
            await self._redis.aclose()
        self._redis = None

    def _refresh_soon(self, slug: str, known: Known) -> None:
        """Beat is late with this drop's snapshot: recompute it here, in the background.

        Only drops that had a snapshot (a made-up slug never costs a query), once per process at
        a time, and once per REFRESH_LOCK_SECONDS across all processes.
        """
        if known.drop_id is None or slug in self._refreshing:
            return
        task = asyncio.get_running_loop().create_task(self._refresh(slug, known.drop_id))
        self._refreshing[slug] = task
        task.add_done_callback(
            lambda done: self._refreshing.pop(slug) if self._refreshing.get(slug) is done else None
        )

    async def _refresh(self, slug: str, drop_id: int) -> None:
        try:
            if not await state.claim_refresh_async(self.client(), slug):
                return  # another process has it (or did it a moment ago)
            self.stats["refresh"] += 1
            await asyncio.get_running_loop().run_in_executor(DB_THREADS, _refresh_drop, drop_id)
            await self._get(slug)  # this process has it at once, whether or not a message is published
        except Exception as error:
            self._trouble("could not refresh the snapshot of %r: %s", slug, error)

    async def _fetch(self, slug: str) -> Entry:
        """One Redis GET per slug at a time, however many requests ask for it."""
        pending = self._fetching.get(slug)
        if pending is None:
            pending = asyncio.ensure_future(self._get(slug))
            self._fetching[slug] = pending
            pending.add_done_callback(
                lambda done: self._fetching.pop(slug) if self._fetching.get(slug) is done else None
            )
        # Shielded: one waiter going away (a client hung up) must not cancel it for the others.
        return await asyncio.shield(pending)

    async def _get(self, slug: str) -> Entry:
        started = time.monotonic()
        self.stats["fetch"] += 1
        latest = self._cache.get(slug)
        known: Known | None = None
        try:
            raw = await self.client().get(state.KEY.format(slug=slug))
            known = parse(raw) if raw is not None else None
        except Exception as error:  # Redis away, or a snapshot we cannot read
            self._trouble("cannot read the snapshot of %r: %s", slug, error)
            # A blip does not send the crowd to Django: keep what we had while its "at" is fresh.
            known = latest.known if latest is not None else None
        latest = self._cache.get(slug)
        if latest is not None and (
            latest.received >= started  # a message came meanwhile: at least as new
            or (latest.known is not None and known is not None and latest.known.at > known.at)
        ):
            return latest
        entry = Entry(known, time.monotonic())
        self._store(slug, entry)
        return entry

    def _store(self, slug: str, entry: Entry) -> None:
        if len(self._cache) >= MAX_ENTRIES and slug not in self._cache:
            self._cache.clear()  # rare (a flood of made-up slugs): start over rather than grow
        self._cache[slug] = entry
