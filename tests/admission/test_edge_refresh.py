"""Beat down: a web process keeps the snapshots fresh itself, one process at a time."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
import redis as redis_lib

from admission import state
from admission.edge import Edge
from holds.services import reserve
from tests import harness
from tests.factories import make_buyer, make_drop
from tests.harness import snapshot_in

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_edge")]

EDGE = harness.EDGE
DjangoWork = harness.DjangoWork
call, run = harness.call, harness.run


def age(redis: redis_lib.Redis, slug: str, seconds: float) -> dict[str, Any]:
    """Make the published snapshot look `seconds` old, as if beat had stopped then."""
    snap = snapshot_in(redis, slug)
    snap["at"] = time.time() - seconds
    redis.set(f"fg:drop:{slug}", json.dumps(snap))
    return snap


@pytest.mark.slow
def test_with_beat_stopped_the_crowd_stays_at_the_edge_for_longer_than_a_snapshot_lives(
    work: DjangoWork, redis: redis_lib.Redis
) -> None:
    drop = make_drop(slug="nobeat", quantity=5)
    state.refresh([drop.pk])
    reserve(drop=drop, buyer_id=make_buyer("quiet").pk, quantity=1, idempotency_key="k")  # unpublished
    age(redis, "nobeat", EDGE.stale_after + 0.5)
    work.reset()

    async def scenario() -> list[tuple[bool, int]]:
        seen = []
        ends = time.monotonic() + 2 * EDGE.max_age  # any snapshot left alone would have died twice
        while time.monotonic() < ends:
            reply = await call("GET", "/api/drops/nobeat")
            seen.append((reply.edge, reply.json()["remaining"]))
            await asyncio.sleep(0.1)
        return seen

    refreshes = EDGE.stats["refresh"]
    seen = run(scenario)
    refreshed = EDGE.stats["refresh"] - refreshes
    published = snapshot_in(redis, "nobeat")

    assert all(edge for edge, _ in seen), seen
    assert work.requests == 0
    assert seen[-1] == (True, 4)  # the database's truth, recomputed here
    assert 2 <= refreshed <= 2 * EDGE.max_age / state.REFRESH_LOCK_SECONDS + 1, refreshed
    assert time.time() - published["at"] < EDGE.stale_after + 1


def test_one_process_refreshes_a_stale_snapshot_while_the_others_wait_for_it(redis: redis_lib.Redis) -> None:
    drop = make_drop(slug="many", quantity=5)
    state.refresh([drop.pk])
    age(redis, "many", EDGE.stale_after + 0.5)

    async def django(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b"django"})

    async def scenario() -> tuple[list[int], list[float]]:
        processes = [Edge(django) for _ in range(4)]  # four web processes, each its own memory
        try:
            replies = await asyncio.gather(*(call("GET", "/api/drops/many", app=p) for p in processes * 5))
            assert all(r.edge for r in replies)  # still young enough to answer from
        finally:
            for process in processes:
                await process.aclose()  # waits for a refresh in flight
        return [p.stats["refresh"] for p in processes], [snapshot_in(redis, "many")["at"]]

    counts, (at,) = asyncio.run(scenario())

    assert sorted(counts) == [0, 0, 0, 1]
    assert time.time() - at < 2
    assert redis.ttl(state.REFRESH_LOCK.format(slug="many")) > 0  # held: nobody else again at once


def test_a_poll_django_had_to_compute_publishes_it_for_the_edge(
    work: DjangoWork, redis: redis_lib.Redis
) -> None:
    """The key expired (beat down for a minute): the first poll through Django puts it back."""
    harness.room(quantity=2)
    auth = harness.bearer("back")
    ticket = harness.join("room", auth)["queue_ticket"]
    redis.delete("fg:drop:room", state.REFRESH_LOCK.format(slug="room"))
    EDGE.forget()
    work.reset()

    first = harness.poll("room", auth, ticket)
    EDGE.forget()
    second = harness.poll("room", auth, ticket)

    assert (first.status, first.edge) == (200, False)
    assert (second.status, second.edge) == (200, True)
    assert work.requests == 1
    assert harness.without(first.json(), *harness.VOLATILE) == harness.without(
        second.json(), *harness.VOLATILE
    )


def test_an_older_read_published_late_never_undoes_a_newer_one(redis: redis_lib.Redis) -> None:
    """A web process's refresh read before a wave, published after it: the wave's mark stays."""
    drop = harness.room(quantity=2)
    for i in range(3):
        harness.join("room", harness.bearer(f"r{i}"))
    older = state.compute([drop])  # read now (mark 0) ...
    assert harness.admit(drop) == 2  # ... then a wave publishes mark 2

    assert state.publish(older) == 0  # ... and the older read arrives last
    published = snapshot_in(redis, "room")
    assert published["queue"]["admitted_through"] == 2
