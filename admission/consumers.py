"""Live queue position over WebSocket (work in progress)."""

from __future__ import annotations

from channels.generic.websocket import AsyncJsonWebsocketConsumer


class QueueConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        await self.close()
