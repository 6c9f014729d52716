"""The edge's subscriber: snapshots and revocations as they are published, reconnecting after
any trouble (a process that missed messages meanwhile reads Redis again on its next request)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import redis.asyncio as aioredis

from admission import state
from admission.background import Trouble
from core import redis

RECONNECT_SECONDS = 1.0


class Listener:
    """Hands each message to its handler; `listening` while subscribed."""

    def __init__(
        self,
        *,
        redis_url: str | None,
        on_snapshot: Callable[[bytes | str], None],
        on_revocation: Callable[[bytes | str], None],
        on_subscribed: Callable[[aioredis.Redis], Awaitable[None]],
        trouble: Trouble,
    ) -> None:
        self.redis_url = redis_url
        self.on_snapshot = on_snapshot
        self.on_revocation = on_revocation
        self.on_subscribed = on_subscribed  # catch up on what was published while not listening
        self._trouble = trouble
        self.listening = False

    async def run(self) -> None:
        revoked = {state.REVOKED_CHANNEL, state.REVOKED_CHANNEL.encode()}
        while True:
            client = redis.client(url=self.redis_url, socket_connect_timeout=1, health_check_interval=10)
            try:
                async with client.pubsub(ignore_subscribe_messages=True) as pubsub:
                    await pubsub.subscribe(state.CHANNEL, state.REVOKED_CHANNEL)
                    await self.on_subscribed(client)
                    self.listening = True
                    while True:
                        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                        if message is None:
                            continue
                        if message["channel"] in revoked:
                            self.on_revocation(message["data"])
                        else:
                            self.on_snapshot(message["data"])
            except Exception as error:
                self._trouble("snapshot channel lost: %s", error)
            finally:
                self.listening = False
                await client.aclose()
            await asyncio.sleep(RECONNECT_SECONDS)
