"""The lane's rate limits (admission.limits.Limiter): checks that arrive together share one round
trip to Redis and answer exactly as checks made one by one."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from django.conf import settings
from redis.exceptions import NoScriptError

from admission import limits
from core.errors import Busy
from devtools.ports import free_port

SLOW = 0.01  # tokens per second: nothing refills while a test runs


class Counting(aioredis.Redis):
    """A real client that counts its pipelines (each one round trip)."""

    pipelines = 0

    def pipeline(self, *args: Any, **kwargs: Any) -> Any:
        Counting.pipelines += 1
        return super().pipeline(*args, **kwargs)


def client() -> Counting:
    made = Counting.from_url(settings.REDIS_URL)
    assert isinstance(made, Counting)  # from_url makes its own class
    return made


def test_checks_arriving_together_share_a_round_trip_and_answer_as_one_by_one() -> None:
    bucket = [("fg:rl:test:user:1", 10, SLOW)]

    async def together() -> list[float]:
        Counting.pipelines = 0
        limiter = limits.Limiter(client())
        return await asyncio.gather(*(limiter.take(bucket) for _ in range(30)))

    waits = asyncio.run(together())
    assert Counting.pipelines == 1
    assert [w == 0 for w in waits] == [True] * 10 + [False] * 20
    assert all(w > 1 for w in waits[10:])  # the seconds to the next token, at 0.01 a second

    # one by one, on the same kind of bucket: the same ten
    alone = [limits.take([("fg:rl:test:user:2", 10, SLOW)]) for _ in range(30)]
    assert [w == 0 for w in alone] == [w == 0 for w in waits]


def test_a_script_flushed_from_redis_is_loaded_again() -> None:
    redis.Redis.from_url(settings.REDIS_URL).script_flush()
    with pytest.raises(NoScriptError):  # what a restarted Redis says to the script's name
        redis.Redis.from_url(settings.REDIS_URL).evalsha(limits.TAKE_TOKENS_SHA, 0)

    async def check() -> float:
        return await limits.Limiter(client()).take([("fg:rl:test:user:3", 10, SLOW)])

    assert asyncio.run(check()) == 0.0


def test_redis_away_is_busy_for_every_check_waiting() -> None:
    gone = aioredis.Redis(port=free_port(), socket_connect_timeout=0.5)

    async def checks() -> list[object]:
        limiter = limits.Limiter(gone)
        return await asyncio.gather(
            *(limiter.check(scope="reserve", ip="10.0.0.1", buyer_id=n) for n in range(5)),
            return_exceptions=True,
        )

    answers = asyncio.run(checks())
    assert len(answers) == 5 and all(isinstance(a, Busy) for a in answers)
