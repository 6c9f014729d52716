"""Two live drops share a web process's lane: one drop's batch waiting on its stock row's lock
does not hold up the other drop's claims (issue 26: no drop's crowd delays another's sell-out)."""

from __future__ import annotations

import asyncio

import pytest

from sale.lane import Lane
from tests.factories import make_drop
from tests.harness import BODY, EDGE, bearer, call, in_thread, lock_stock, lock_waits, reserve_headers, run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_edge")]


def claims_side_by_side() -> tuple[bool, int, int]:
    """Drop a's stock row locked elsewhere; a claim on a waits at it. Returns whether b's claim
    was answered while a's still waited, then both statuses once the lock is let go."""
    a = make_drop(slug="drop-a", quantity=5)
    make_drop(slug="drop-b", quantity=5)
    ann, bob = bearer("ann"), bearer("bob")
    blocker = lock_stock(a.pk)

    async def scenario() -> tuple[bool, int, int]:
        first = asyncio.ensure_future(
            call("POST", "/api/drops/drop-a/holds", headers=reserve_headers(ann), body=BODY)
        )
        for _ in range(200):  # a's batch is seen waiting for the lock, not slept for
            if await in_thread(lock_waits):
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("drop a's claim never reached its stock row")
        second = asyncio.ensure_future(
            call("POST", "/api/drops/drop-b/holds", headers=reserve_headers(bob), body=BODY)
        )
        done, _ = await asyncio.wait([second], timeout=10)
        answered_meanwhile = bool(done) and not first.done()
        await in_thread(blocker.rollback)
        return answered_meanwhile, (await first).status, (await second).status

    try:
        return run(scenario)
    finally:
        blocker.close()


def test_a_drop_waiting_on_its_lock_does_not_delay_another_drops_claims() -> None:
    assert claims_side_by_side() == (True, 201, 201)


@pytest.mark.slow
def test_control_a_lane_of_one_thread_serialises_the_drops() -> None:
    """The test above can fail: with one worker thread, b's claim waits behind a's batch."""
    lane, EDGE.lane = EDGE.lane, Lane(threads=1)
    try:
        answered_meanwhile, a_status, b_status = claims_side_by_side()
    finally:
        EDGE.lane = lane
    assert not answered_meanwhile and (a_status, b_status) == (201, 201)
