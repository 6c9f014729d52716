"""The lane's worker threads: each database step of the lane is a named method here, so its path
to SQL reads straight (lane -> batcher -> `Workers.reserve_batch` -> holds.services.reserve_batch).

Each job takes a connection from the process's pool and gives it back when it ends: a thread
that kept one would hold it out of the pool for good once the thread is gone (a settled lane, a
restarted loop), and the pool would run dry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from django.db import close_old_connections, connection

from admission import services as admission
from admission import state as snapshots
from catalogue import selectors as catalogue
from core import asgi
from core.errors import FloodgateError, NotFound
from holds import selectors, services
from holds.services import Ask
from shop.auth import users_of_tokens
from shop.models import Drop

log = logging.getLogger("sale.lane")
T = TypeVar("T")
# The loop's thread holds the GIL while it reads and answers requests; a worker thread back from
# a database round trip waits for it to let go, by default up to 5 ms each time, and a batch
# makes six or seven round trips. In a 20,000-buyer rush a batch's median was 37 ms at 5 ms and
# 23 ms at 0.5 ms (bench/README.md, "Holds at the rate stock allows").
SWITCH_INTERVAL = 0.0005
Reply = tuple[int, dict[str, object]]  # an answer's status and body


@dataclass(frozen=True)
class JoinRequest:
    """A waiting-room join the lane took: who, how they signed in (their queue ticket is bound
    to it) and the proof of work, if the drop asks for one."""

    buyer_id: int
    bound_to: str
    proof: str | None
    challenge: str | None


class Workers:
    """A few threads with their own connections; one pool per lane, started on first use."""

    def __init__(self, threads: int) -> None:
        self._threads = threads
        self._pool: ThreadPoolExecutor | None = None

    async def reserve_batch(self, drop: Drop, asks: list[Ask]) -> list[services.Outcome]:
        """Claims of one variant that arrived together: one transaction, one conditional claim statement."""
        return await self._run(services.reserve_batch, drop=drop, asks=asks)

    async def reserve(self, drop: Drop, ask: Ask, unit: str | None) -> Reply | FloodgateError:
        """One claim on its own (a repeated key, a chosen seat, what a batch left undecided)."""
        return await self._run(_reserve, drop, ask, unit)

    async def join_many(
        self, drop: Drop, requests: list[JoinRequest]
    ) -> list[dict[str, object] | FloodgateError]:
        """Waiting-room joins of one drop that arrived together: each answer's body, or its refusal."""
        return await self._run(_join_many, drop, requests)

    async def users_of_tokens(self, tokens: list[str]) -> dict[str, int]:
        return await self._run(users_of_tokens, tokens)

    async def users_of_sessions(self, keys: list[str]) -> dict[str, int]:
        return await self._run(asgi.session_users, keys)

    async def drops(self, slugs: list[str]) -> dict[str, Drop]:
        return await self._run(_drops, slugs)

    def publish_sold_out(self, drop: Drop) -> None:
        """In the background: the lane's answer does not wait for Redis (the tick publishes anyway)."""
        asyncio.get_running_loop().run_in_executor(self._pool, _job, _publish_sold_out, drop)

    def start(self) -> None:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="claim-lane")

    def warm(self) -> None:
        """At process start: the threads and their database connections ready before the crowd
        (a cold thread's first query waits for a new backend to fork)."""
        sys.setswitchinterval(SWITCH_INTERVAL)
        self.start()
        assert self._pool is not None
        ready = threading.Barrier(self._threads, timeout=10)  # one job per thread, all started
        for _ in range(self._threads):
            self._pool.submit(_warm, ready)

    def settle(self) -> None:
        """Wait for the work in hand; a new pool starts on next use (tests: nothing of one test's
        may still be querying when the next one flushes the tables)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    async def _run(self, work: Callable[..., T], *args: object, **kwargs: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(
            self._pool, lambda: _job(work, *args, **kwargs)
        )


def _job(work: Callable[..., T], *args: object, **kwargs: object) -> T:
    close_old_connections()
    try:
        return work(*args, **kwargs)
    finally:
        connection.close()  # back to the pool (CONN_MAX_AGE is 0: nothing is kept per thread)


def _reserve(drop: Drop, ask: Ask, unit: str | None) -> Reply | FloodgateError:
    """The single claim and its answer's body (a repeated key's hold is read here, off the loop)."""
    try:
        result = services.reserve(
            drop=drop,
            variant=ask.variant,
            buyer_id=ask.buyer_id,
            quantity=ask.quantity,
            idempotency_key=ask.key,
            unit=unit,
            discount_code=ask.discount_code,
        )
    except FloodgateError as error:
        return error
    data = selectors.hold_json(result.hold, units=result.units, new=result.created)
    return (201 if result.created else 200), data


def _join_many(drop: Drop, requests: list[JoinRequest]) -> list[dict[str, object] | FloodgateError]:
    asks = [admission.JoinAsk(r.buyer_id, r.proof, r.challenge) for r in requests]
    places = admission.join_many(drop=drop, asks=asks)
    return [
        place
        if isinstance(place, FloodgateError)
        else place.as_json(queue_ticket=admission.queue_ticket(place, bound_to=request.bound_to))
        for place, request in zip(places, requests, strict=True)
    ]


def _drops(slugs: list[str]) -> dict[str, Drop]:
    found = {}
    for slug in slugs:
        with contextlib.suppress(NotFound):  # no such drop: not in the answer
            found[slug] = catalogue.drop_for_claim(slug=slug)
    return found


def _warm(ready: threading.Barrier) -> None:
    """One per thread: all of them started, and the pool filled to its minimum meanwhile."""
    try:
        ready.wait()
        connection.ensure_connection()
    except Exception as error:  # a database not up yet: the first claim connects instead
        log.warning("lane: could not warm a worker thread: %s", error)
    finally:
        connection.close()


def _publish_sold_out(drop: Drop) -> None:
    try:
        snapshots.note_sold_out(drop)
    except Exception:  # the tick publishes within a second anyway
        log.warning("lane: could not publish the sold-out of drop %s", drop.pk, exc_info=True)
