"""Rate limits: a token bucket per account and per client address, kept in Redis.

Redis down means the limits cannot be kept, so the answer is "please wait" (503), never
an unlimited door: the admission layer fails closed.
"""

from __future__ import annotations

import asyncio
import hashlib
import math

import redis.asyncio as aioredis
from django.conf import settings
from django.http import HttpRequest
from django.utils.translation import gettext_lazy
from django_redis import get_redis_connection
from redis.exceptions import NoScriptError, RedisError

from core.api import signed_in
from core.clients import client_ip
from core.errors import Busy, RateLimited, fill

# KEYS: the buckets; ARGV: capacity and refill per second of each, in the same order.
# All or nothing: a token is taken from every bucket only when each has one, so a request
# refused by one limit costs nothing from the others (an account hammering alone does not
# drain the address bucket its neighbours share). The clock is Redis's own: app servers'
# clocks disagree, and a bucket must not refill faster for the one that runs ahead.
# Returns "0" when allowed, else the seconds until every bucket would have a token.
TAKE_TOKENS = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local have = {}
local wait = 0
for i, key in ipairs(KEYS) do
  local capacity = tonumber(ARGV[2 * i - 1])
  local rate = tonumber(ARGV[2 * i])
  local state = redis.call('HMGET', key, 'tokens', 'at')
  local tokens = tonumber(state[1]) or capacity
  local at = tonumber(state[2]) or now
  tokens = math.min(capacity, tokens + math.max(0, now - at) * rate)
  have[i] = tokens
  if tokens < 1 then
    wait = math.max(wait, (1 - tokens) / rate)
  end
end
if wait > 0 then
  return tostring(wait)
end
for i, key in ipairs(KEYS) do
  local capacity = tonumber(ARGV[2 * i - 1])
  local rate = tonumber(ARGV[2 * i])
  redis.call('HSET', key, 'tokens', have[i] - 1, 'at', now)
  redis.call('EXPIRE', key, math.ceil(capacity / rate) + 1)
end
return '0'
"""


TAKE_TOKENS_SHA = hashlib.sha1(TAKE_TOKENS.encode()).hexdigest()  # the name Redis gives the script
BATCH = 1000  # checks per round trip at most
BUSY = gettext_lazy("The shop is catching its breath; please wait a moment and try again.")

Bucket = tuple[str, int, float]  # key, burst, per second
Check = tuple[list[Bucket], list[float], "asyncio.Future[float]"]  # the buckets, their arguments, the answer


def _arguments(limits: list[Bucket]) -> list[float]:
    args: list[float] = []
    for _key, burst, per_second in limits:
        if burst < 1 or per_second <= 0:
            raise ValueError(f"a rate limit needs a burst >= 1 and a rate > 0, not {burst}, {per_second}")
        args += [burst, per_second]
    return args


def take(limits: list[Bucket]) -> float:
    """Take one token from each (key, burst, per_second) bucket: 0.0, or the seconds to wait."""
    args = _arguments(limits)
    try:
        client = get_redis_connection("default")
        wait = client.register_script(TAKE_TOKENS)(keys=[key for key, _, _ in limits], args=args)
    except (RedisError, OSError):
        raise Busy(BUSY) from None
    return float(wait)


class Limiter:
    """`take` on an asyncio Redis client, for the claim lane's event loop: the checks that arrive
    while a round trip is out go together in the next one, a pipelined EVALSHA each. A crowd's
    first claims all check at once, and one call each, queued for the client's few connections,
    took longer than the claim itself (bench crowd, 20,000 buyers: p50 120-300 ms)."""

    def __init__(self, client: aioredis.Redis) -> None:
        self._client = client
        self._pending: list[Check] = []
        self._task: asyncio.Task[None] | None = None

    async def check(self, *, scope: str, ip: str, buyer_id: int) -> None:
        """check's RateLimited (or Busy, Redis away) for the lane."""
        _refuse(await self.take(buckets(scope=scope, ip=ip, buyer_id=buyer_id)))

    async def take(self, limits: list[Bucket]) -> float:
        args = _arguments(limits)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[float] = loop.create_future()
        self._pending.append((limits, args, future))
        if self._task is None:
            self._task = loop.create_task(self._run())
        return await asyncio.shield(future)  # a caller gone does not cancel the others' round trip

    async def _run(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending[:BATCH], self._pending[BATCH:]
                try:
                    replies = await self._send(batch)
                    if any(isinstance(reply, NoScriptError) for reply in replies):
                        await self._client.script_load(TAKE_TOKENS)  # a restarted or flushed Redis
                        replies = await self._send(batch)
                except (RedisError, OSError) as error:
                    replies = [error] * len(batch)
                reply: bytes | BaseException
                for (_, _, future), reply in zip(batch, replies, strict=True):
                    if future.done():
                        continue
                    if isinstance(reply, BaseException):
                        future.set_exception(Busy(BUSY))
                    else:
                        future.set_result(float(reply))
        finally:
            self._task = None

    async def _send(self, batch: list[Check]) -> list[bytes | BaseException]:
        async with self._client.pipeline(transaction=False) as pipe:
            for limits, args, _ in batch:
                pipe.evalsha(TAKE_TOKENS_SHA, len(limits), *[key for key, _, _ in limits], *args)
            return list(await pipe.execute(raise_on_error=False))


def check_buyer(request: HttpRequest, *, scope: str) -> None:
    """Raise RateLimited (429 with Retry-After) when the account or its address goes too fast."""
    check(scope=scope, ip=client_ip(request), buyer_id=signed_in(request))


def check(*, scope: str, ip: str, buyer_id: int) -> None:
    """check_buyer for a caller that has the address and account but no Django request."""
    _refuse(take(buckets(scope=scope, ip=ip, buyer_id=buyer_id)))


def buckets(*, scope: str, ip: str, buyer_id: int) -> list[Bucket]:
    return [
        (f"fg:rl:{scope}:ip:{ip}", settings.IP_RATE_LIMIT_BURST, settings.IP_RATE_LIMIT_PER_SECOND),
        (f"fg:rl:{scope}:user:{buyer_id}", settings.RATE_LIMIT_BURST, settings.RATE_LIMIT_PER_SECOND),
    ]


def _refuse(wait: float) -> None:
    if wait:
        seconds = math.ceil(wait)
        raise RateLimited(
            fill(gettext_lazy("Too many attempts; try again in %(seconds)s s."), seconds=seconds),
            retry_after=seconds,
        )
