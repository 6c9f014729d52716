"""The lane's waiting-room joins for one drop that arrive while its previous batch runs go to the
database together (admission.services.join_many: one read of who may take part and who has a
place already, one insert of the new places), as claims do (sale.batcher). A line of tens of
thousands joins in the seconds before a start; one join at a time was four statements each.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Coroutine

from core.errors import Busy, FloodgateError
from sale.batcher import BUSY, MAX_WAITING
from sale.workers import JoinRequest, Workers
from shop.models import Drop

MAX_BATCH = 500


class Joins:
    def __init__(
        self, workers: Workers, *, stats: Counter[str], spawn: Callable[[Coroutine[None, None, None]], None]
    ) -> None:
        self.workers = workers
        self.stats = stats
        self._spawn = spawn
        self.new_loop()

    def new_loop(self) -> None:
        """Futures belong to the loop that made them: a new loop starts with nothing queued."""
        self._queues: dict[
            int, list[tuple[JoinRequest, asyncio.Future[dict[str, object] | FloodgateError]]]
        ] = {}
        self._running: set[int] = set()
        self._waiting = 0

    async def join(self, drop: Drop, request: JoinRequest) -> dict[str, object]:
        """The join's answer body from its batch; a refusal is raised."""
        if self._waiting >= MAX_WAITING:
            self.stats["busy"] += 1
            raise Busy(BUSY)
        future: asyncio.Future[dict[str, object] | FloodgateError] = (
            asyncio.get_running_loop().create_future()
        )
        self._queues.setdefault(drop.pk, []).append((request, future))
        self._waiting += 1
        if drop.pk not in self._running:
            self._running.add(drop.pk)
            self._spawn(self._drain(drop))
        try:
            answer = await asyncio.shield(future)  # a client gone does not cancel the batch
        finally:
            self._waiting -= 1
        if isinstance(answer, FloodgateError):
            raise answer
        return answer

    async def _drain(self, drop: Drop) -> None:
        """Run the drop's join batches one after another while joins keep coming."""
        try:
            while queue := self._queues.pop(drop.pk, None):
                batch, rest = queue[:MAX_BATCH], queue[MAX_BATCH:]
                if rest:
                    self._queues[drop.pk] = rest
                try:
                    answers = await self.workers.join_many(drop, [request for request, _ in batch])
                except BaseException as error:  # an IntegrityError: each goes to Django (sale.lane)
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(error)
                    if not isinstance(error, Exception):
                        raise
                    continue
                self.stats["join_batches"] += 1
                for (_, future), answer in zip(batch, answers, strict=True):
                    if not future.done():
                        future.set_result(answer)
        finally:
            self._running.discard(drop.pk)
