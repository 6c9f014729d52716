"""The asyncio Redis clients the edge and the claim lane open themselves (the rest go through
django-redis, Celery and Channels, configured in settings): at REDIS_URL, or, with
REDIS_SENTINELS, at whichever server the sentinels name master now, so a promoted replica is
followed on the next connection."""

from __future__ import annotations

from typing import Any, cast

import redis.asyncio as aioredis
from django.conf import settings
from redis.asyncio.connection import BlockingConnectionPool
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool

SENTINEL_TIMEOUTS = {"socket_timeout": 1, "socket_connect_timeout": 1}


class BlockingSentinelPool(SentinelConnectionPool, BlockingConnectionPool):
    """The master's connections, waiting up to `timeout` for a free one when all are in use
    (as BlockingConnectionPool does) instead of failing at once."""


def client(*, url: str | None = None, blocking: int | None = None, **options: Any) -> aioredis.Redis:
    """A client of the master; `blocking`: at most that many connections, waited for.
    An explicit `url` (tests) is used as it is."""
    if url is None and settings.REDIS_SENTINELS:
        sentinel = Sentinel(settings.REDIS_SENTINELS, sentinel_kwargs=SENTINEL_TIMEOUTS)  # type: ignore[no-untyped-call, unused-ignore]
        pool: dict[str, Any] = (
            {"connection_pool_class": BlockingSentinelPool, "max_connections": blocking} if blocking else {}
        )
        master = sentinel.master_for(settings.REDIS_SENTINEL_MASTER, db=settings.REDIS_DB, **pool, **options)
        return cast(aioredis.Redis, master)
    if blocking:
        return aioredis.Redis(
            connection_pool=BlockingConnectionPool.from_url(
                url or settings.REDIS_URL, max_connections=blocking, **options
            )
        )
    return aioredis.Redis.from_url(url or settings.REDIS_URL, **options)
