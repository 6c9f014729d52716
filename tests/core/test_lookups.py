"""core.lookups.BatchedLookup: a crowd's keys fetched together, found answers kept, none invented."""

from __future__ import annotations

import asyncio

import pytest

from core.lookups import BatchedLookup


def test_a_crowds_keys_are_fetched_together_and_found_answers_kept() -> None:
    calls: list[list[int]] = []

    async def fetch(keys: list[int]) -> dict[int, str]:
        calls.append(keys)
        await asyncio.sleep(0.05)
        return {k: f"v{k}" for k in keys if k % 2 == 0}  # odd keys have no answer

    lookup: BatchedLookup[int, str] = BatchedLookup(fetch, seconds=60, size=100)

    async def scene() -> tuple[list[str | None], list[str | None]]:
        first = asyncio.ensure_future(asyncio.gather(*(lookup.get(k) for k in range(4))))
        await asyncio.sleep(0.01)  # a fetch runs: these wait for the next one, together
        later = await asyncio.gather(*(lookup.get(k) for k in range(4, 10)))
        again = await asyncio.gather(*(lookup.get(k) for k in range(10)))
        return [*await first, *later], again

    found, again = asyncio.run(scene())

    assert found == again == [f"v{k}" if k % 2 == 0 else None for k in range(10)]
    # one fetch for the first four, one for the six asked meanwhile; then only the odd ones again
    assert calls == [[0, 1, 2, 3], [4, 5, 6, 7, 8, 9], [1, 3, 5, 7, 9]]


def test_a_failed_fetch_reaches_its_waiters_and_the_next_ask_tries_again() -> None:
    failing = True

    async def fetch(keys: list[str]) -> dict[str, int]:
        if failing:
            raise ConnectionError("database away")
        return dict.fromkeys(keys, 1)

    lookup: BatchedLookup[str, int] = BatchedLookup(fetch, seconds=0, size=10)

    async def scene() -> int | None:
        nonlocal failing
        with pytest.raises(ConnectionError):
            await lookup.get("a")
        failing = False
        return await lookup.get("a")

    assert asyncio.run(scene()) == 1


def test_an_unknown_key_is_kept_only_as_long_as_asked() -> None:
    calls: list[list[str]] = []

    async def fetch(keys: list[str]) -> dict[str, int]:
        calls.append(keys)
        return {}

    remembering: BatchedLookup[str, int] = BatchedLookup(fetch, seconds=60, miss_seconds=60, size=10)
    forgetting: BatchedLookup[str, int] = BatchedLookup(fetch, seconds=60, size=10)

    async def scene() -> list[int | None]:
        return [await lookup.get("nobody") for lookup in (remembering, remembering, forgetting, forgetting)]

    assert asyncio.run(scene()) == [None] * 4
    assert calls == [["nobody"], ["nobody"], ["nobody"]]  # the remembering one asked once


def test_a_fetch_that_began_before_a_forget_answers_but_keeps_nothing() -> None:
    """What it read may predate the reason for forgetting (a token revoked meanwhile)."""
    calls: list[list[str]] = []

    async def scene() -> tuple[int | None, int | None, int | None]:
        reading, go = asyncio.Event(), asyncio.Event()

        async def fetch(keys: list[str]) -> dict[str, int]:
            calls.append(keys)
            reading.set()
            await go.wait()
            return dict.fromkeys(keys, 7)

        lookup: BatchedLookup[str, int] = BatchedLookup(fetch, seconds=60, size=10)
        pending = asyncio.ensure_future(lookup.get("revoked"))
        await reading.wait()
        lookup.forget_where(lambda buyer: buyer == 7)
        go.set()
        answered = await pending
        kept = lookup.kept("revoked")
        go.set()
        return answered, kept, await lookup.get("revoked")

    assert asyncio.run(scene()) == (7, None, 7)
    assert calls == [["revoked"], ["revoked"]]  # asked again, not served from what was read before


def test_a_flood_of_one_key_is_one_fetched_key_and_batch_counts_keys() -> None:
    calls: list[list[str]] = []

    async def fetch(keys: list[str]) -> dict[str, int]:
        calls.append(keys)
        await asyncio.sleep(0.02)
        return dict.fromkeys(keys, 1)

    lookup: BatchedLookup[str, int] = BatchedLookup(fetch, seconds=0, size=10, batch=2)

    async def scene() -> list[int | None]:
        first = asyncio.ensure_future(lookup.get("x"))
        await asyncio.sleep(0.005)  # a fetch runs: the flood waits for the next ones
        flood = [lookup.get(key) for key in ["hot"] * 1000 + ["a", "hot", "b"]]
        return [await first, *await asyncio.gather(*flood)]

    assert asyncio.run(scene()) == [1] * 1004
    # a thousand asks of one key are one key of one fetch; `batch` keys a fetch, in order of asking
    assert calls == [["x"], ["hot", "a"], ["b"]]
    assert lookup.stats == {"fetches": 3, "keys": 4}


def test_a_failed_fetch_reaches_every_waiter_and_the_keys_asked_meanwhile_are_fetched() -> None:
    calls: list[list[str]] = []

    async def fetch(keys: list[str]) -> dict[str, int]:
        calls.append(keys)
        await asyncio.sleep(0.02)
        if len(calls) == 1:
            raise ConnectionError("database away")
        return dict.fromkeys(keys, 2)

    lookup: BatchedLookup[str, int] = BatchedLookup(fetch, seconds=60, size=10)

    async def scene() -> tuple[list[int | BaseException | None], list[int | None]]:
        failing = [asyncio.ensure_future(lookup.get(key)) for key in ("a", "a", "b")]
        await asyncio.sleep(0.005)
        meanwhile = [asyncio.ensure_future(lookup.get(key)) for key in ("a", "c")]
        return await asyncio.gather(*failing, return_exceptions=True), await asyncio.gather(*meanwhile)

    failed, answered = asyncio.run(scene())
    assert [type(e) for e in failed] == [ConnectionError] * 3
    assert answered == [2, 2]
    assert calls == [["a", "b"], ["a", "c"]]


def test_a_caller_gone_does_not_cancel_the_others_fetch() -> None:
    async def fetch(keys: list[str]) -> dict[str, int]:
        await asyncio.sleep(0.02)
        return dict.fromkeys(keys, 3)

    lookup: BatchedLookup[str, int] = BatchedLookup(fetch, seconds=60, size=10)

    async def scene() -> int | None:
        gone = asyncio.ensure_future(lookup.get("k"))
        staying = asyncio.ensure_future(lookup.get("k"))
        await asyncio.sleep(0.005)
        gone.cancel()
        return await staying

    assert asyncio.run(scene()) == 3


def test_a_new_loop_asks_afresh_after_a_loop_closed_with_keys_waiting() -> None:
    calls: list[list[str]] = []

    async def fetch(keys: list[str]) -> dict[str, int]:
        calls.append(keys)
        await asyncio.sleep(0.02)
        return dict.fromkeys(keys, 4)

    lookup: BatchedLookup[str, int] = BatchedLookup(fetch, seconds=60, size=10)
    left: list[asyncio.Future[int | None]] = []

    async def leave() -> None:
        left.append(asyncio.ensure_future(lookup.get("fetching")))
        await asyncio.sleep(0.005)
        left.append(asyncio.ensure_future(lookup.get("waiting")))  # behind the fetch when the loop closes
        await asyncio.sleep(0)

    asyncio.run(leave())
    assert all(ask.cancelled() for ask in left)  # the loop's end left nobody waiting, nor hung it

    async def again() -> list[int | None]:
        lookup.new_loop()
        return list(await asyncio.gather(lookup.get("fetching"), lookup.get("waiting")))

    assert asyncio.run(again()) == [4, 4]
    assert calls == [["fetching"], ["fetching", "waiting"]]
