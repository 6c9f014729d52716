"""Claims for one drop that arrive while its previous batch runs go to PostgreSQL together.

One batch in flight per drop's variant per process (holds.services.reserve_batch: one short
transaction, one conditional claim statement); a claim waits for its batch while the queue ahead of it can be
served within DEADLINE, and beyond that hears 503 with Retry-After at once. When a batch learns
nothing is left at all, the claims queued behind it hear it at once, not a batch later.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass

from django.db import IntegrityError
from django.utils.translation import gettext_lazy

from core.errors import Busy
from holds import services
from holds.services import Ask
from sale import entry
from sale.workers import Workers
from shop.models import Drop

DEADLINE = 0.2  # seconds a claim may wait for its batch before "busy" is the better answer
MAX_BATCH = 200
MAX_WAITING = 4000  # per process, all drops: past this the queue could not be served in time
BUSY = gettext_lazy("The shop is very busy; try again in a second.")


@dataclass
class Waiting:
    ask: Ask
    future: asyncio.Future[services.Answer]


class Batcher:
    def __init__(
        self, workers: Workers, *, stats: Counter[str], spawn: Callable[[Coroutine[None, None, None]], None]
    ) -> None:
        self.workers = workers
        self.stats = stats
        self._spawn = spawn
        self._batch_seconds = 0.005  # moving average of one batch's time, for the deadline
        self.new_loop()

    def new_loop(self) -> None:
        """Futures belong to the loop that made them: a new loop starts with nothing queued."""
        # By variant id (a variant's stock is one batch's): claims waiting, the variants whose
        # batches run, and when each running batch started.
        self._queues: dict[int, list[Waiting]] = {}
        self._draining: set[int] = set()
        self._running_since: dict[int, float] = {}
        self._drop_of: dict[int, int] = {}  # variant -> its drop, for "nothing left at all"
        self._waiting = 0

    def queued(self, variant_id: int) -> int:
        """Claims waiting behind the variant's running batch."""
        return len(self._queues.get(variant_id, ()))

    async def claim(self, drop: Drop, ask: Ask) -> services.Answer:
        """The claim's answer from its batch: a Reservation, a refusal, or None (the single claim's)."""
        assert ask.variant is not None, "the lane's claims name their variant (sale.entry.steps)"
        stock = ask.variant.pk
        self._drop_of[stock] = drop.pk
        queue = self._queues.setdefault(stock, [])
        if self._waiting >= MAX_WAITING or self._expected_wait(stock, len(queue)) > DEADLINE:
            self.stats["busy"] += 1
            raise Busy(BUSY)
        waiting = Waiting(ask, asyncio.get_running_loop().create_future())
        queue.append(waiting)
        self._waiting += 1
        if stock not in self._draining:
            self._draining.add(stock)
            self._spawn(self._drain(drop, stock))
        try:
            return await asyncio.shield(waiting.future)  # a client gone does not cancel the batch
        finally:
            self._waiting -= 1

    def _expected_wait(self, stock: int, queued: int) -> float:
        """Seconds until a claim joining now is answered: nothing runs, it goes at once; else
        the rest of the running batch (one that has run long is taken to run as long again),
        then one batch per MAX_BATCH claims queued ahead, and its own."""
        started = self._running_since.get(stock)
        if started is None:
            return 0.0
        running = time.monotonic() - started
        per_batch = max(self._batch_seconds, running)
        return max(per_batch - running, running) + per_batch * (queued // MAX_BATCH + 1)

    async def _drain(self, drop: Drop, stock: int) -> None:
        """Run the batches of one of the drop's variants one after another while claims keep coming."""
        try:
            while queue := self._queues.pop(stock, None):
                batch, rest = queue[:MAX_BATCH], queue[MAX_BATCH:]
                if rest:
                    self._queues[stock] = rest
                started = self._running_since[stock] = time.monotonic()
                answers: list[services.Answer]
                try:
                    answers = await self.workers.reserve_batch(drop, [w.ask for w in batch])
                except IntegrityError:
                    # A cached row gone since (a deleted account or drop): the whole batch rolled
                    # back. Each claim goes alone, so only the stale one fails (and reaches Django).
                    answers = [None] * len(batch)
                except BaseException as error:
                    for waiting in batch:
                        if not waiting.future.done():
                            waiting.future.set_exception(error)
                    if not isinstance(error, Exception):
                        raise
                    continue
                self._batch_seconds = 0.8 * self._batch_seconds + 0.2 * (time.monotonic() - started)
                self.stats["batches"] += 1
                self.stats["batched"] += len(batch)
                for waiting, answer in zip(batch, answers, strict=True):
                    if not waiting.future.done():
                        waiting.future.set_result(answer)
                gone = next((a for a in answers if entry.sold_out_for_all(a)), None)
                if gone is not None:
                    self._tell_the_queued(drop, gone)
        finally:
            self._draining.discard(stock)
            self._running_since.pop(stock, None)

    def _tell_the_queued(self, drop: Drop, gone: services.Answer) -> None:
        """Nothing left at all: the claims queued meanwhile hear it now, as the edge answers those
        arriving from now on, instead of waiting a batch to learn it."""
        for stock in [stock for stock, of in self._drop_of.items() if of == drop.pk]:
            for waiting in self._queues.pop(stock, []):
                if not waiting.future.done():
                    waiting.future.set_result(gone)
