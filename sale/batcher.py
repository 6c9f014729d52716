"""Claims for one drop that arrive while its previous batch runs go to PostgreSQL together.

One batch in flight per drop's variant per process (core.batches; holds.services.reserve_batch: one
short transaction, one conditional claim statement); a claim waits for its batch while the queue
ahead of it can be served within DEADLINE, and beyond that hears 503 with Retry-After at once. When
a batch learns nothing is left at all, the claims queued behind it hear it at once, not a batch later.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Coroutine

from django.db import IntegrityError
from django.utils.translation import gettext_lazy

from core.batches import Batches
from core.errors import Busy
from holds import services
from holds.services import Ask
from sale import entry
from sale.workers import Workers
from shop.models import Drop

DEADLINE = 0.2  # seconds a claim may wait for its batch before "busy" is the better answer
MAX_BATCH = 200
MAX_WAITING = 4000  # per process and kind of request: past this the queue could not be served in time
BUSY = gettext_lazy("The shop is very busy; try again in a second.")


class Batcher:
    def __init__(
        self, workers: Workers, *, stats: Counter[str], spawn: Callable[[Coroutine[None, None, None]], None]
    ) -> None:
        self.workers = workers
        self.stats = stats
        self._batches: Batches[tuple[Drop, Ask], services.Outcome] = Batches(
            self._run_batch,
            max_batch=MAX_BATCH,
            spawn=spawn,
            stats=stats,
            counted_as=("batches", "batched"),
            after=self._tell_the_queued,
        )
        self.new_loop()

    def new_loop(self) -> None:
        """Futures belong to the loop that made them: a new loop starts with nothing queued."""
        self._batches.new_loop()
        self._drop_of: dict[int, int] = {}  # variant -> its drop, for "nothing left at all"

    def queued(self, variant_id: int) -> int:
        """Claims waiting behind the variant's running batch."""
        return self._batches.queued(variant_id)

    async def claim(self, drop: Drop, ask: Ask) -> services.Outcome:
        """The claim's answer from its batch: a Reservation, a refusal, or None (the single claim's)."""
        assert ask.variant is not None, "the lane's claims name their variant (sale.entry.steps)"
        stock = ask.variant.pk  # a variant's stock is one batch's
        self._drop_of[stock] = drop.pk
        if self._batches.waiting >= MAX_WAITING or self._expected_wait(stock) > DEADLINE:
            self.stats["busy"] += 1
            raise Busy(BUSY)
        return await self._batches.submit(stock, (drop, ask))

    def _expected_wait(self, stock: int) -> float:
        """Seconds until a claim joining now is answered: nothing runs, it goes at once; else
        the rest of the running batch (one that has run long is taken to run as long again),
        then one batch per MAX_BATCH claims queued ahead, and its own."""
        running = self._batches.running_for(stock)
        if running is None:
            return 0.0
        per_batch = max(self._batches.batch_seconds, running)
        return max(per_batch - running, running) + per_batch * (self._batches.queued(stock) // MAX_BATCH + 1)

    async def _run_batch(self, stock: int, claims: list[tuple[Drop, Ask]]) -> list[services.Outcome]:
        drop = claims[0][0]  # one variant's claims: one drop's
        try:
            return await self.workers.reserve_batch(drop, [ask for _, ask in claims])
        except IntegrityError:
            # A cached row gone since (a deleted account or drop): the whole batch rolled back.
            # Each claim goes alone, so only the stale one fails (and reaches Django).
            return [None] * len(claims)

    def _tell_the_queued(self, stock: int, answers: list[services.Outcome]) -> None:
        """Nothing left at all: the claims queued meanwhile on any of the drop's variants hear it now,
        as the edge answers those arriving from now on, instead of waiting a batch to learn it."""
        gone = next((a for a in answers if entry.sold_out_for_all(a)), None)
        if gone is not None:
            drop = self._drop_of.get(stock)
            self._batches.answer_queued([s for s, of in self._drop_of.items() if of == drop], gone)
