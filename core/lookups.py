"""Lookups a crowd's first requests share: keys asked for together go to the database together.

A crowd arrives at once with keys nobody has cached yet (its tokens, its tickets). The keys asked
for in the same moment go in one fetch; those asked while it runs wait for the next, which takes
every key waiting (up to `batch`): a few round trips instead of one each. Found answers are kept
`seconds`; a key with no answer is kept `miss_seconds` (default: not at all, it may exist a
moment later; a short time makes a flood of one unknown key cost one fetch).

The one cache type of the process's hot paths (the lane's tokens, sessions and drop rows, the
edge's tickets): bounded by `size` (past it, everything kept goes at once rather than grow), and
safe to `forget` from another thread. A fetch that began before a forget keeps nothing: what it
read may predate the reason for forgetting (a revoked token).

The fetches are core.batches' batches, all under one key: one fetch in flight per lookup. A key
waiting for a fetch is queued once, however many ask for it, so `batch` counts distinct keys.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from core.batches import Batches

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_ONE_QUEUE = 0  # the Batches key of every fetch: a lookup's keys all wait in one queue


class BatchedLookup(Generic[K, V]):
    def __init__(
        self,
        fetch: Callable[[list[K]], Awaitable[dict[K, V]]],
        *,
        seconds: float,
        size: int,
        batch: int = 500,
        miss_seconds: float | None = None,
    ) -> None:
        self._fetch = fetch
        self._seconds = seconds
        self._miss_seconds = miss_seconds
        self._size = size
        self._kept: dict[K, tuple[V | None, float]] = {}
        self._generation = 0  # bumped by every forget
        self.stats: Counter[str] = Counter()  # fetches, keys
        self._batches: Batches[K, V | None] = Batches(
            self._fetch_together, max_batch=batch, stats=self.stats, counted_as=("fetches", "keys")
        )
        self._asked: dict[K, asyncio.Future[V | None]] = {}  # each key waiting for a fetch: its one future

    async def get(self, key: K) -> V | None:
        kept = self._kept.get(key)
        if kept is not None and kept[1] >= time.monotonic():
            return kept[0]
        asked = self._asked.get(key)
        if asked is None or asked.done():  # done while still asked: cancelled as its loop closed
            asked = self._asked[key] = self._batches.enqueue(_ONE_QUEUE, key)
        return await asyncio.shield(asked)  # a caller gone does not cancel the others' fetch

    def kept(self, key: K) -> V | None:
        """What is kept for the key now, without fetching (None also for nothing kept)."""
        kept = self._kept.get(key)
        return kept[0] if kept is not None and kept[1] >= time.monotonic() else None

    def forget(self) -> None:
        """Keep nothing found so far (one swap: safe from another thread)."""
        self._generation += 1
        self._kept = {}

    def forget_key(self, key: K) -> None:
        self._generation += 1
        self._kept.pop(key, None)

    def forget_where(self, answered: Callable[[V | None], bool]) -> None:
        """Keep nothing whose answer matches; the rest stays. Safe from another thread: list() copies
        the dict under the GIL, then one swap (an answer kept meanwhile may go too, and is fetched
        again)."""
        self._generation += 1
        self._kept = {k: v for k, v in list(self._kept.items()) if not answered(v[0])}

    def new_loop(self) -> None:
        """Futures belong to the loop that made them: a new loop starts with none pending."""
        self._asked = {}
        self._batches.new_loop()

    async def _fetch_together(self, _queue: int, keys: list[K]) -> list[V | None]:
        """One fetch of the keys waiting (each once: `get` queues a key only while it is not)."""
        for key in keys:
            self._asked.pop(key, None)  # asked from now on, it waits for the next fetch
        generation = self._generation
        found = await self._fetch(keys)
        if generation == self._generation:  # else read before a forget: answered, not kept
            self._keep(keys, found)
        return [found.get(key) for key in keys]

    def _keep(self, keys: list[K], found: dict[K, V]) -> None:
        if self._seconds <= 0 and self._miss_seconds is None:
            return  # batched, never kept
        now = time.monotonic()
        kept: dict[K, tuple[V | None, float]] = {
            key: (value, now + self._seconds) for key, value in found.items()
        }
        if self._miss_seconds is not None:
            missing: tuple[V | None, float] = (None, now + self._miss_seconds)
            kept.update((key, missing) for key in keys if key not in found)
        if len(self._kept) + len(kept) > self._size:
            self._kept = {}
        self._kept.update(kept)
