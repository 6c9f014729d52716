"""An HTTP crowd for the tests that send one: many requests in flight at once over real connections.

aiohttp, as the bench's crowd (bench crowd): httpx's async client spends several milliseconds of
CPU a request at 64 connections (measured: 500 queue looks, 4 s of the test process's CPU with
httpx, 0.1 s with aiohttp), and on a machine of two cores that CPU is taken from the server the
crowd is meant to load. The server sees the same requests either way.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp

IN_FLIGHT = 64  # requests at once, each on a connection of its own
T = TypeVar("T")


@dataclass(frozen=True)
class Answer:
    """One answer, read to its end: what the tests ask of an httpx.Response."""

    status_code: int
    text: str

    def json(self) -> Any:
        return json.loads(self.text)


class Session:
    """An aiohttp session bound to the server's address: `await client.post(path, headers=...)`."""

    def __init__(self, session: aiohttp.ClientSession, base: str) -> None:
        self.session = session
        self.base = base

    async def request(self, method: str, path: str, **kwargs: Any) -> Answer:
        async with self.session.request(method, self.base + path, allow_redirects=False, **kwargs) as answer:
            return Answer(answer.status, await answer.text())

    async def get(self, path: str, **kwargs: Any) -> Answer:
        return await self.request("GET", path, **kwargs)

    async def post(self, path: str, **kwargs: Any) -> Answer:
        return await self.request("POST", path, **kwargs)


def crowd(
    base: str, items: Sequence[T], call: Callable[[Session, T], Awaitable[Any]], *, in_flight: int = IN_FLIGHT
) -> list[Any]:
    """`call(client, item)` for every item, `in_flight` at a time; the results in the items' order."""

    async def run() -> list[Any]:
        limit = asyncio.Semaphore(in_flight)
        connector = aiohttp.TCPConnector(limit=in_flight)
        timeout = aiohttp.ClientTimeout(total=60)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            client = Session(session, base)

            async def one(item: T) -> Any:
                async with limit:
                    return await call(client, item)

            return await asyncio.gather(*(one(item) for item in items))

    return asyncio.run(run())
