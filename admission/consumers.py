"""The waiting room's live mark: one WebSocket per waiting client, one group per drop.

The message is public (the admitted-through mark, the state, the stock); each client knows its
own ticket, so nobody needs to be logged in and one broadcast per wave serves every client.
"""

from __future__ import annotations

import json

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from admission import state
from shop.models import Drop

NO_SUCH_WAITING_ROOM = 4404  # 4000-4999 are the application's; a client stops reconnecting on it
ABUSE = 4400
MAX_FRAME = 256  # a ping is a dozen bytes; anything big is not a client of this page
MAX_BAD_FRAMES = 3


def opening(slug: str) -> tuple[int, dict[str, object]] | None:
    """The drop's id and its queue message as of now; None when the slug has no waiting room.

    The published snapshot is used when it is this drop's and fresh; otherwise one statement.
    """
    drop = Drop.objects.select_related("product").filter(slug=slug, waiting_room=True).first()
    if drop is None:
        return None
    return drop.pk, state.current(drop).queue_json()


class QueueConsumer(AsyncJsonWebsocketConsumer):
    """Send the mark at once on connect, then every wave and state change of the drop."""

    group: str | None = None
    bad_frames = 0

    async def connect(self) -> None:
        found = await database_sync_to_async(opening)(self.scope["url_route"]["kwargs"]["slug"])
        if found is None:
            # Accepted first: a close before accept is an HTTP 403 and the client never sees the code.
            await self.accept()
            await self.close(code=NO_SUCH_WAITING_ROOM)
            return
        drop_id, message = found
        self.group = state.group(drop_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        # Joined before sending: a wave published meanwhile reaches this client too (in order after it).
        await self.send_json(message)

    async def disconnect(self, code: int) -> None:
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """Answer {"type": "ping"} with a pong; a bad frame, an error frame; big or repeated ones close."""
        if bytes_data is not None or text_data is None or len(text_data) > MAX_FRAME:
            await self.close(code=ABUSE)
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
            await self.close(code=ABUSE)
            return
        await self.send_json({"error": "bad_frame", "detail": 'This socket only answers {"type": "ping"}.'})

    async def dispatch(self, message: dict[str, object]) -> None:
        # Channels closes stale DB connections before every handler, a hop to its one sync
        # thread; a wave's handler touches no database, and 5,000 hops made the last client
        # of a wave hear it seconds late.
        if message.get("type") == "queue.update":
            await self.queue_update(message)
        else:
            await super().dispatch(message)

    async def queue_update(self, event: dict[str, object]) -> None:
        text = event.get("text")  # encoded once by the publisher, not once per socket
        if isinstance(text, str):
            await self.send(text_data=text)
        else:
            await self.send_json(event["queue"])


class NoRoute(AsyncJsonWebsocketConsumer):
    """Any other WebSocket path: a clear close instead of a router exception in the log."""

    async def connect(self) -> None:
        await self.accept()
        await self.close(code=NO_SUCH_WAITING_ROOM)
