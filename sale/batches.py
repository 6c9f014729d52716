"""The lane's one micro-batcher: requests for one key that arrive while its previous batch runs go to
the database together, one batch in flight per key (the claims of a variant, the joins of a drop).

A batch takes up to `max_batch` of the queue, in arrival order; its answers go back to their requests
in order. A request whose client is gone keeps its place (the batch is not cancelled for one). What
the batch is, and when a request is better told "busy" than queued, is the caller's
(sale.batcher, sale.joins).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Generic, TypeVar

R = TypeVar("R")
A = TypeVar("A")


class Batches(Generic[R, A]):
    def __init__(
        self,
        run: Callable[[int, list[R]], Awaitable[list[A]]],
        *,
        max_batch: int,
        spawn: Callable[[Coroutine[None, None, None]], None],
        stats: Counter[str],
        counted_as: tuple[str, str],
        after: Callable[[int, list[A]], None] | None = None,
    ) -> None:
        self._run = run  # (key, requests) -> their answers, in order
        self._max_batch = max_batch
        self._spawn = spawn
        self._stats = stats
        self._counted_as = counted_as  # the stats' names for the batches run and the requests they took
        self._after = after  # told each batch's answers, once they are given
        self.batch_seconds = 0.005  # moving average of one batch's time
        self.new_loop()

    def new_loop(self) -> None:
        """Futures belong to the loop that made them: a new loop starts with nothing queued."""
        self._queues: dict[int, list[tuple[R, asyncio.Future[A]]]] = {}
        self._draining: set[int] = set()
        self._running_since: dict[int, float] = {}
        self.waiting = 0  # requests of every key waiting for their answer in this process

    def queued(self, key: int) -> int:
        """Requests waiting behind the key's running batch."""
        return len(self._queues.get(key, ()))

    def running_for(self, key: int) -> float | None:
        """Seconds the key's batch has been running; None when none runs."""
        started = self._running_since.get(key)
        return None if started is None else time.monotonic() - started

    async def submit(self, key: int, request: R) -> A:
        """The request's answer from its batch (or what the batch raised)."""
        future: asyncio.Future[A] = asyncio.get_running_loop().create_future()
        self._queues.setdefault(key, []).append((request, future))
        self.waiting += 1
        if key not in self._draining:
            self._draining.add(key)
            self._spawn(self._drain(key))
        try:
            return await asyncio.shield(future)  # a client gone does not cancel the batch
        finally:
            self.waiting -= 1

    def answer_queued(self, keys: Iterable[int], answer: A) -> None:
        """Answer every request still queued under these keys at once, without a batch."""
        for key in keys:
            for _, future in self._queues.pop(key, []):
                if not future.done():
                    future.set_result(answer)

    async def _drain(self, key: int) -> None:
        """Run the key's batches one after another while requests keep coming."""
        try:
            while queue := self._queues.pop(key, None):
                batch, rest = queue[: self._max_batch], queue[self._max_batch :]
                if rest:
                    self._queues[key] = rest
                started = self._running_since[key] = time.monotonic()
                try:
                    answers = await self._run(key, [request for request, _ in batch])
                except BaseException as error:
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(error)
                    if not isinstance(error, Exception):
                        raise
                    continue
                self.batch_seconds = 0.8 * self.batch_seconds + 0.2 * (time.monotonic() - started)
                self._stats[self._counted_as[0]] += 1
                self._stats[self._counted_as[1]] += len(batch)
                for (_, future), answer in zip(batch, answers, strict=True):
                    if not future.done():
                        future.set_result(answer)
                if self._after is not None:
                    self._after(key, answers)
        finally:
            self._draining.discard(key)
            self._running_since.pop(key, None)
