"""The lane's waiting-room joins for one drop that arrive while its previous batch runs go to the
database together (core.batches; admission.services.join_many: one read of who may take part and
who has a place already, one insert of the new places), as claims do (sale.batcher). A line of tens
of thousands joins in the seconds before a start; one join at a time was four statements each.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Coroutine

from core.batches import Batches
from core.errors import Busy, FloodgateError
from sale.batcher import BUSY, MAX_WAITING
from sale.workers import JoinRequest, Workers
from shop.models import Drop

MAX_BATCH = 500

Joined = dict[str, object] | FloodgateError  # a join's answer body, or its refusal


class Joins:
    def __init__(
        self, workers: Workers, *, stats: Counter[str], spawn: Callable[[Coroutine[None, None, None]], None]
    ) -> None:
        self.workers = workers
        self.stats = stats
        # An IntegrityError of a batch reaches each of its joins, which then go to Django (sale.lane).
        self._batches: Batches[tuple[Drop, JoinRequest], Joined] = Batches(
            self._join, max_batch=MAX_BATCH, spawn=spawn, stats=stats, counted_as=("join_batches", "joined")
        )

    def new_loop(self) -> None:
        """Futures belong to the loop that made them: a new loop starts with nothing queued."""
        self._batches.new_loop()

    async def join(self, drop: Drop, request: JoinRequest) -> dict[str, object]:
        """The join's answer body from its batch; a refusal is raised."""
        if self._batches.waiting >= MAX_WAITING:
            self.stats["busy"] += 1
            raise Busy(BUSY)
        answer = await self._batches.submit(drop.pk, (drop, request))
        if isinstance(answer, FloodgateError):
            raise answer
        return answer

    async def _join(self, drop_id: int, joins: list[tuple[Drop, JoinRequest]]) -> list[Joined]:
        return await self.workers.join_many(joins[0][0], [request for _, request in joins])
