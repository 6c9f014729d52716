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
