"""Lookups a crowd's first requests share: keys asked for together go to the database together.

A crowd arrives at once with keys nobody has cached yet (its tokens, its tickets). The keys asked
for in the same moment go in one fetch; those asked while it runs wait for the next, which takes
every key waiting (up to `batch`): a few round trips instead of one each. Found answers are kept
`seconds`; a key with no answer is not kept (it may exist a moment later).
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
    ) -> None:
        self._fetch = fetch
        self._seconds = seconds
        self._size = size
        self._batch = batch
        self._kept: dict[K, tuple[V, float]] = {}
        self._pending: dict[K, asyncio.Future[V | None]] = {}
        self._task: asyncio.Task[None] | None = None

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

    def forget(self) -> None:
        """Keep nothing found so far (one swap: safe from another thread)."""
        self._kept = {}

    async def _run(self) -> None:
        try:
            while self._pending:
                keys = list(self._pending)[: self._batch]
                waiting = {key: self._pending.pop(key) for key in keys}
                try:
                    found = await self._fetch(keys)
                except Exception as error:
                    for future in waiting.values():
                        if not future.done():
                            future.set_exception(error)
                    continue
                until = time.monotonic() + self._seconds
                if len(self._kept) + len(found) > self._size:
                    self._kept = {}
                self._kept.update((key, (value, until)) for key, value in found.items())
                for key, future in waiting.items():
                    if not future.done():
                        future.set_result(found.get(key))
        finally:
            self._task = None
            for future in self._pending.values():  # the loop is closing: nobody is left to answer
                future.cancel()
            self._pending.clear()
