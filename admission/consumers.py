"""The waiting room's live mark: one WebSocket per waiting client, one group per drop.

The message is public (the admitted-through mark, the state, the stock); each client knows its
own ticket, so nobody needs to be logged in and one broadcast per wave serves every client.

A crowd opens the waiting room at once, so a socket's life never touches the database or the
one thread Django's sync work shares: the handshake and first message come from the process's
published snapshot (admission.edge), and no handler hops to that thread. Only a drop with no
fresh snapshot costs one lookup, on the edge's own threads; a slug that is no waiting room
costs none (the edge keeps the list of them). One address may hold WS_SOCKETS_PER_ADDRESS
sockets per process: a client opening a thousand is told so, and the next ones cost nothing.
Each socket may send MESSAGE_BURST frames at once and MESSAGES_PER_SECOND after that (the page
sends none; a script's keep-alive ping fits easily): past it the socket closes with TOO_MANY.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from typing import Any

from channels.consumer import get_handler_name
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from admission import edge, state
from core import asgi, clients

log = logging.getLogger(__name__)

NO_SUCH_WAITING_ROOM = 4404  # 4000-4999 are the application's; a client stops reconnecting on it
ABUSE = 4400
MAX_FRAME = 256  # a ping is a dozen bytes; anything big is not a client of this page
MAX_BAD_FRAMES = 3
TRY_AGAIN = 4503  # "try again later" (daphne sends only 1000 and 3000-4999); the page reconnects
TOO_MANY = 4429  # this address holds its share of sockets, or this socket sent too much; the page polls
# Frames per socket: a burst, then a steady rate (a token bucket kept on the socket, which lives in
# one process). 40 sockets sending 1,000 pings each slowed every page of the process tenfold.
MESSAGE_BURST = 20
MESSAGES_PER_SECOND = 1.0

# Open queue sockets per client address in this process (the event loop is one thread).
open_sockets: Counter[str] = Counter()


class NoDatabase(AsyncJsonWebsocketConsumer):
    """A consumer whose handlers never use the database.

    Channels closes stale database connections before every handler, a hop to Django's one
    sync thread: 5,000 sockets opening at once (or hearing a wave) would queue there behind
    each other and behind every view.
    """

    async def dispatch(self, message: dict[str, Any]) -> None:
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)


class QueueConsumer(NoDatabase):
    """Send the mark at once on connect, then every wave and state change of the drop."""

    group: str | None = None
    address: str | None = None  # counted in open_sockets while this socket is open
    bad_frames = 0
    allowance = float(MESSAGE_BURST)  # frames this socket may still send now
    last_frame_at = 0.0  # time.monotonic() of the last frame counted
    closing = False  # closed by this side: frames already on their way are not answered

    async def connect(self) -> None:
        slug = self.scope["url_route"]["kwargs"]["slug"]
        address = _address(self.scope)
        if open_sockets[address] >= settings.WS_SOCKETS_PER_ADDRESS:
            log.debug("queue socket: %s holds %s sockets already", address, open_sockets[address])
            await self.accept()
            await self.close(code=TOO_MANY)
            return
        # Counted before the first await: a thousand handshakes at once are counted, not raced.
        self.address = address
        open_sockets[address] += 1
        try:
            found = await edge.shared().waiting_room(slug)
        except Exception:  # no snapshot and the database away: the page polls and comes back
            log.warning("queue socket: cannot open %r", slug, exc_info=True)
            await self._refuse(TRY_AGAIN)
            return
        if found is None:
            await self._refuse(NO_SUCH_WAITING_ROOM)
            return
        drop_id, message = found
        self.group = state.group(drop_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        # Joined before sending: a wave published meanwhile reaches this client too (in order after it).
        await self.send_json(message)

    async def _refuse(self, code: int) -> None:
        self._uncount()
        # Accepted first: a close before accept is an HTTP 403 and the client never sees the code.
        await self.accept()
        await self.close(code=code)

    def _uncount(self) -> None:
        if self.address is not None:
            open_sockets[self.address] -= 1
            if open_sockets[self.address] <= 0:
                del open_sockets[self.address]
            self.address = None

    async def disconnect(self, code: int) -> None:
        self._uncount()
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """Answer {"type": "ping"} with a pong; a bad frame, an error frame; big or repeated ones close,
        and so does a frame past the socket's budget."""
        if self.closing:
            return
        if not self._within_budget():
            log.debug("queue socket: %s sent more than its budget", self.address)
            await self._close(TOO_MANY)
            return
        if bytes_data is not None or text_data is None or len(text_data) > MAX_FRAME:
            await self._close(ABUSE)
            return
        try:
            content = json.loads(text_data)
        except ValueError:
            content = None
        if content == {"type": "ping"}:
            await self.send_json({"type": "pong"})
            return
        self.bad_frames += 1
        if self.bad_frames >= MAX_BAD_FRAMES:
            await self._close(ABUSE)
            return
        await self.send_json({"error": "bad_frame", "detail": 'This socket only answers {"type": "ping"}.'})

    def _within_budget(self) -> bool:
        """Count one frame against the bucket; False when it is empty."""
        now = time.monotonic()
        refill = (now - self.last_frame_at) * MESSAGES_PER_SECOND
        self.allowance = min(float(MESSAGE_BURST), self.allowance + refill)
        self.last_frame_at = now
        if self.allowance < 1:
            return False
        self.allowance -= 1
        return True

    async def _close(self, code: int) -> None:
        self.closing = True
        await self.close(code=code)

    async def queue_update(self, event: dict[str, object]) -> None:
        text = event.get("text")  # encoded once by the publisher, not once per socket
        if isinstance(text, str):
            await self.send(text_data=text)
        else:
            await self.send_json(event["queue"])


def _address(scope: dict[str, Any]) -> str:
    """The client's address, as the rate limits take it (X-Forwarded-For behind a trusted proxy)."""
    return clients.client_address(
        (scope.get("client") or ("unknown", 0))[0], asgi.header(scope, b"x-forwarded-for")
    )


class NoRoute(NoDatabase):
    """Any other WebSocket path: a clear close instead of a router exception in the log."""

    async def connect(self) -> None:
        await self.accept()
        await self.close(code=NO_SUCH_WAITING_ROOM)
