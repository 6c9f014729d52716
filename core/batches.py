"""The one keyed micro-batcher: requests for one key that arrive while its previous batch runs go
together, one batch in flight per key (the lane's claims of a variant, sale.batcher; its joins of a
drop, sale.joins; a lookup's fetches, core.lookups).

A batch takes up to `max_batch` of the queue, in arrival order; its answers go back to their requests
in order. A request whose client is gone keeps its place (the batch is not cancelled for one). A
batch that raises tells each of its requests, and the next batch still runs. What the batch is, and
when a request is better told "busy" than queued, is the caller's.

Futures belong to the loop that made them: `new_loop()` starts afresh, and a batch of the loop
before touches none of the new loop's queues. When a loop closes under a batch, its requests and
those queued behind it are cancelled, not left waiting.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Generic, TypeVar

R = TypeVar("R")
A = TypeVar("A")


class _Queues(Generic[R, A]):
    """One loop's queues, replaced whole by new_loop()."""

    def __init__(self) -> None:
        self.waiting: dict[int, list[tuple[R, asyncio.Future[A]]]] = {}
        self.draining: set[int] = set()
        self.running_since: dict[int, float] = {}


class Batches(Generic[R, A]):
    def __init__(
        self,
        run: Callable[[int, list[R]], Awaitable[list[A]]],
        *,
        max_batch: int,
        spawn: Callable[[Coroutine[None, None, None]], None] | None = None,
        stats: Counter[str] | None = None,
        counted_as: tuple[str, str] = ("batches", "batched"),
        after: Callable[[int, list[A]], None] | None = None,
    ) -> None:
        self._run = run  # (key, requests) -> their answers, in order
        self._max_batch = max_batch
        self._spawn = spawn or self._task  # default: a task of the running loop, kept till done
        self._stats: Counter[str] = Counter() if stats is None else stats
        self._counted_as = counted_as  # the stats' names for the batches run and the requests they took
        self._after = after  # told each batch's answers, once they are given
        self.batch_seconds = 0.005  # moving average of one batch's time
        self.new_loop()

    def new_loop(self) -> None:
        """Futures belong to the loop that made them: a new loop starts with nothing queued."""
        self._queues: _Queues[R, A] = _Queues()
        self._tasks: set[asyncio.Task[None]] = set()
        self.waiting = 0  # requests of every key waiting for their answer in this process

    def queued(self, key: int) -> int:
        """Requests waiting behind the key's running batch."""
        return len(self._queues.waiting.get(key, ()))

    def running_for(self, key: int) -> float | None:
        """Seconds the key's batch has been running; None when none runs."""
        started = self._queues.running_since.get(key)
        return None if started is None else time.monotonic() - started

    async def submit(self, key: int, request: R) -> A:
        """The request's answer from its batch (or what the batch raised)."""
        future = self.enqueue(key, request)
        self.waiting += 1
        try:
            return await asyncio.shield(future)  # a client gone does not cancel the batch
        finally:
            self.waiting -= 1

    def enqueue(self, key: int, request: R) -> asyncio.Future[A]:
        """Queue the request; its future is answered by its batch. Awaiting it through
        asyncio.shield keeps a caller that goes away from cancelling it for the others."""
        future: asyncio.Future[A] = asyncio.get_running_loop().create_future()
        queues = self._queues
        queues.waiting.setdefault(key, []).append((request, future))
        if key not in queues.draining:
            queues.draining.add(key)
            self._spawn(self._drain(key, queues))
        return future

    def answer_queued(self, keys: Iterable[int], answer: A) -> None:
        """Answer every request still queued under these keys at once, without a batch."""
        for key in keys:
            for _, future in self._queues.waiting.pop(key, []):
                if not future.done():
                    future.set_result(answer)

    async def _drain(self, key: int, queues: _Queues[R, A]) -> None:
        """Run the key's batches one after another while requests keep coming."""
        try:
            while queue := queues.waiting.pop(key, None):
                batch, rest = queue[: self._max_batch], queue[self._max_batch :]
                if rest:
                    queues.waiting[key] = rest
                started = queues.running_since[key] = time.monotonic()
                try:
                    answers = await self._run(key, [request for request, _ in batch])
                except BaseException as error:
                    for _, future in batch:
                        if future.done():
                            continue
                        if isinstance(error, Exception):
                            future.set_exception(error)
                        else:
                            future.cancel()  # the loop is closing under the batch
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
            queues.draining.discard(key)
            queues.running_since.pop(key, None)
            # Only a drain ended early (its loop closing) leaves any queued: nobody is left to run them.
            for _, future in queues.waiting.pop(key, []):
                future.cancel()

    def _task(self, work: Coroutine[None, None, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)  # the loop keeps only a weak reference to a running task
        task.add_done_callback(self._tasks.discard)
