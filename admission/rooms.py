"""Which slugs have a waiting room, for the queue's WebSocket: from the snapshot when there is a
fresh one, else one lookup per slug at a time, and a flood of made-up slugs costs no query each.

A rehearsal's copy has none: the socket knows nobody (it opens from the snapshot, no query), the
copy does not exist for anyone but its own buyers, and its crowd polls over HTTP."""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from concurrent.futures import Future
from typing import Any

from admission import state
from admission.background import DB_THREADS, Trouble, close_connections
from admission.published import MAX_ENTRIES, Snapshots
from core.asgi import SLUG

NO_ROOM_SECONDS = 5.0  # a slug a socket found no waiting room for is not looked up again for this long
ROOMS_SECONDS = 5.0  # the list of every waiting room's slug is re-read after this
MISSES_PER_SECOND, MISS_BURST = 2.0, 10  # slugs not in that list looked up on their own, per process
Room = tuple[int, dict[str, Any]]  # the drop's id and its queue message


def _open_room(slug: str) -> Room | None:
    """A waiting-room drop's id and queue message (computed and published when stale), or None."""
    from shop.models import Drop  # the models need Django set up; the edge is imported before

    try:
        drop = (
            Drop.objects.select_related("product")
            .filter(slug=slug, waiting_room=True, rehearsal_of__isnull=True)
            .first()
        )
        if drop is None:
            return None
        return drop.pk, state.current(drop, publish_computed=True).queue_json()
    finally:
        close_connections()


def _waiting_rooms() -> frozenset[str]:
    """The slugs of every drop with a waiting room."""
    from shop.models import Drop  # as _open_room: the models need Django set up

    try:
        rooms = Drop.objects.filter(waiting_room=True, rehearsal_of__isnull=True)
        return frozenset(rooms.values_list("slug", flat=True))
    finally:
        close_connections()


class Rooms:
    def __init__(self, snapshots: Snapshots, *, stats: Counter[str], trouble: Trouble) -> None:
        self.snapshots = snapshots
        self.stats = stats
        self._trouble = trouble
        self._looking: dict[str, asyncio.Future[Room | None]] = {}
        self._no_room: dict[str, float] = {}  # slug -> monotonic time until which it has none
        self._rooms: frozenset[str] = frozenset()  # every waiting room's slug, one query for all
        self._rooms_at = -math.inf  # monotonic time of that read
        self._rooms_reading: Future[frozenset[str]] | None = None
        self._misses = (float(MISS_BURST), -math.inf)  # token bucket: (tokens, monotonic time)

    def new_loop(self) -> None:
        self._looking = {}

    def forget(self) -> None:
        self._no_room.clear()
        self._rooms_at = -math.inf
        self._misses = (float(MISS_BURST), -math.inf)

    def in_flight(self) -> list[asyncio.Future[Any]]:
        return [*self._looking.values()]

    async def waiting_room(self, slug: str) -> Room | None:
        """The drop's id and its first message, or None (no waiting room)."""
        if not SLUG.fullmatch(slug):
            return None
        known = None
        try:
            known = await self.snapshots.known(slug)
        except Exception as error:
            self._trouble("cannot read the snapshot of %r for a socket: %s", slug, error)
        if known is not None and known.drop_id is not None and known.queue is not None:
            if known.rehearsal or known.drop.get("waiting_room") is not True:
                return None
            return known.drop_id, known.queue
        until = self._no_room.get(slug)
        if until is not None and time.monotonic() < until:
            return None
        if not await self._worth_a_lookup(slug):  # a flood of made-up slugs: no query each
            return None
        pending = self._looking.get(slug)
        if pending is None:
            self.stats["lookup"] += 1
            pending = asyncio.get_running_loop().run_in_executor(DB_THREADS, _open_room, slug)
            self._looking[slug] = pending
            pending.add_done_callback(
                lambda done: self._looking.pop(slug) if self._looking.get(slug) is done else None
            )
        found = await asyncio.shield(pending)
        if found is None:
            if len(self._no_room) >= MAX_ENTRIES:
                self._no_room.clear()
            self._no_room[slug] = time.monotonic() + NO_ROOM_SECONDS
        return found

    async def _worth_a_lookup(self, slug: str) -> bool:
        """Whether a slug with no snapshot may cost a lookup of its own.

        A slug in the list of every waiting room (one query for all, re-read after ROOMS_SECONDS)
        may. One not in it may be a drop made since the list was read, or made up: a few a second
        are looked up (MISSES_PER_SECOND, a burst of MISS_BURST), so a new room opens at once, and
        a flood of made-up slugs is refused without a query each.
        """
        now = time.monotonic()
        if now - self._rooms_at >= ROOMS_SECONDS:
            if self._rooms_reading is None or self._rooms_reading.done():
                self.stats["rooms"] += 1
                self._rooms_reading = DB_THREADS.submit(_waiting_rooms)
            self._rooms = await asyncio.wrap_future(self._rooms_reading)
            self._rooms_at = now = time.monotonic()
        if slug in self._rooms:
            return True
        tokens, at = self._misses
        tokens = min(float(MISS_BURST), tokens + (now - at) * MISSES_PER_SECOND)
        if tokens < 1:
            self.stats["refused"] += 1
            self._misses = (tokens, now)
            return False
        self._misses = (tokens - 1, now)
        return True
