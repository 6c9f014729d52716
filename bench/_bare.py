"""The clients' ceilings: an ASGI callable that answers at once, with nothing behind it.

Served by the same server command and worker count as the store, it measures what the server
and the bench's own client can do with no application behind them:

- HTTP (bench crowd): a fixed JSON answer.
- WebSocket (bench queue): a socket accepted at once; each message published on WAVES (Redis)
  is sent to every socket of the process, as the store's channel layer hands one PUBLISH per
  wave to each web process and it to its sockets, without Django, Channels or a consumer.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

BODY = b'{"error": "sold_out", "detail": "bare ASGI: a fixed answer"}'
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]
WAVES = "bench:bare:waves"

Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]
_sockets: set[Send] = set()
_relay: asyncio.Task[None] | None = None


async def _relay_waves() -> None:
    """One subscription per process; each message to every socket it holds."""
    import redis.asyncio as aioredis

    pubsub = aioredis.from_url(os.environ["REDIS_URL"]).pubsub()
    await pubsub.subscribe(WAVES)
    async for message in pubsub.listen():
        if message["type"] != "message":
            continue
        text = message["data"].decode()
        for send in list(_sockets):
            try:
                await send({"type": "websocket.send", "text": text})
            except Exception:  # closed meanwhile: the server says how; the socket is gone either way
                _sockets.discard(send)


async def _socket(receive: Callable[[], Awaitable[Message]], send: Send) -> None:
    global _relay
    if _relay is None:
        _relay = asyncio.ensure_future(_relay_waves())
    if (await receive())["type"] != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    _sockets.add(send)
    try:
        while (await receive())["type"] != "websocket.disconnect":
            pass
    finally:
        _sockets.discard(send)


async def app(scope: Message, receive: Callable[[], Awaitable[Message]], send: Send) -> None:
    if scope["type"] == "lifespan":  # servers that ask (uvicorn with lifespan on) get a plain yes
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] == "websocket":
        await _socket(receive, send)
        return
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):  # read the request body, as a real app would
        pass
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": BODY})
