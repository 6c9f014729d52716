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
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


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
        self._batch = batch
        self._kept: dict[K, tuple[V | None, float]] = {}
        self._pending: dict[K, asyncio.Future[V | None]] = {}
        self._task: asyncio.Task[None] | None = None
        self._generation = 0  # bumped by every forget

    async def get(self, key: K) -> V | None:
        kept = self._kept.get(key)
        if kept is not None and kept[1] >= time.monotonic():
            return kept[0]
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = asyncio.get_running_loop().create_future()
            if self._task is None:
                self._task = asyncio.get_running_loop().create_task(self._run())
        return await asyncio.shield(pending)  # a caller gone does not cancel the others' fetch

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
        self._pending, self._task = {}, None

    async def _run(self) -> None:
        try:
            while self._pending:
                keys = list(self._pending)[: self._batch]
                waiting = {key: self._pending.pop(key) for key in keys}
                generation = self._generation
                try:
                    found = await self._fetch(keys)
                except Exception as error:
                    for future in waiting.values():
                        if not future.done():
                            future.set_exception(error)
                    continue
                if generation == self._generation:  # else read before a forget: answered, not kept
                    self._keep(keys, found)
                for key, future in waiting.items():
                    if not future.done():
                        future.set_result(found.get(key))
        finally:
            if self._task is asyncio.current_task():  # else new_loop() has replaced this loop's state
                self._task = None
                for future in self._pending.values():  # the loop is closing: nobody is left to answer
                    future.cancel()
                self._pending.clear()

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
