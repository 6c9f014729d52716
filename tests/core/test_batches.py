"""core.batches.Batches: one batch in flight per key, the requests meanwhile together in the next."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from core.batches import Batches


def test_requests_arriving_while_a_batch_runs_go_together_in_the_next_in_order() -> None:
    calls: list[tuple[int, list[str]]] = []

    async def run(key: int, requests: list[str]) -> list[str]:
        calls.append((key, requests))
        await asyncio.sleep(0.02)
        return [f"{key}:{r}" for r in requests]

    stats: Counter[str] = Counter()
    batches: Batches[str, str] = Batches(run, max_batch=3, stats=stats, counted_as=("runs", "taken"))

    async def scene() -> list[str]:
        first = asyncio.ensure_future(batches.submit(1, "a"))
        other = asyncio.ensure_future(batches.submit(2, "z"))  # another key: its own batch, at once
        await asyncio.sleep(0.005)
        assert batches.running_for(1) is not None
        later = [asyncio.ensure_future(batches.submit(1, r)) for r in "bcdef"]
        await asyncio.sleep(0)
        assert batches.queued(1) == 5
        return await asyncio.gather(first, other, *later)

    assert asyncio.run(scene()) == ["1:a", "2:z", "1:b", "1:c", "1:d", "1:e", "1:f"]
    # key 1: the first alone, then max_batch of the five that waited, then the rest
    assert calls == [(1, ["a"]), (2, ["z"]), (1, ["b", "c", "d"]), (1, ["e", "f"])]
    assert stats == {"runs": 4, "taken": 7}
    assert batches.waiting == 0 and batches.running_for(1) is None


def test_a_batch_that_raises_tells_each_of_its_requests_and_the_next_batch_runs() -> None:
    calls: list[list[int]] = []

    async def run(key: int, requests: list[int]) -> list[int]:
        calls.append(requests)
        await asyncio.sleep(0.01)
        if len(calls) == 1:
            raise ConnectionError("database away")
        return [r * 10 for r in requests]

    batches: Batches[int, int] = Batches(run, max_batch=10)

    async def scene() -> tuple[list[int | BaseException], list[int]]:
        failing = [asyncio.ensure_future(batches.submit(0, r)) for r in (1, 2)]
        await asyncio.sleep(0.001)
        after = [asyncio.ensure_future(batches.submit(0, r)) for r in (3, 4)]
        return await asyncio.gather(*failing, return_exceptions=True), await asyncio.gather(*after)

    failed, answered = asyncio.run(scene())
    assert [type(e) for e in failed] == [ConnectionError, ConnectionError]
    assert answered == [30, 40]
    assert calls == [[1, 2], [3, 4]]


def test_a_client_gone_does_not_cancel_its_batch_for_the_others() -> None:
    async def run(key: int, requests: list[int]) -> list[int]:
        await asyncio.sleep(0.02)
        return requests

    batches: Batches[int, int] = Batches(run, max_batch=10)

    async def scene() -> int:
        gone = asyncio.ensure_future(batches.submit(0, 1))
        staying = asyncio.ensure_future(batches.submit(0, 2))
        await asyncio.sleep(0.005)
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
        return await staying

    assert asyncio.run(scene()) == 2


def test_answer_queued_answers_the_waiting_at_once_and_after_hears_each_batch() -> None:
    told: list[tuple[int, list[str]]] = []

    async def run(key: int, requests: list[str]) -> list[str]:
        await asyncio.sleep(0.02)
        return ["ran"] * len(requests)

    batches: Batches[str, str] = Batches(
        run, max_batch=10, after=lambda key, answers: told.append((key, answers))
    )

    async def scene() -> list[str]:
        running = asyncio.ensure_future(batches.submit(5, "a"))
        await asyncio.sleep(0.005)
        queued = [asyncio.ensure_future(batches.submit(5, r)) for r in "bc"]
        await asyncio.sleep(0)
        batches.answer_queued([5], "gone")
        return await asyncio.gather(running, *queued)

    assert asyncio.run(scene()) == ["ran", "gone", "gone"]
    assert told == [(5, ["ran"])]  # the answered ones needed no batch


def test_a_new_loop_starts_afresh_and_a_closing_loop_cancels_what_waits() -> None:
    async def run(key: int, requests: list[int]) -> list[int]:
        await asyncio.sleep(0.01)
        return requests

    batches: Batches[int, int] = Batches(run, max_batch=1)
    left: list[asyncio.Future[int]] = []

    async def leave_work_behind() -> None:
        batches.enqueue(0, 1)  # its batch runs
        left.append(batches.enqueue(0, 2))  # queued behind it when the loop closes
        await asyncio.sleep(0)

    asyncio.run(leave_work_behind())  # closing cancels the drain: nobody is left to run the queued
    assert left[0].cancelled()

    async def again() -> list[int]:
        batches.new_loop()
        return list(await asyncio.gather(batches.submit(0, 3), batches.submit(0, 4)))

    assert asyncio.run(again()) == [3, 4]
