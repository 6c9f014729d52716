"""The admission edge: answers most of the crowd before Django (work in progress: passes through)."""

from __future__ import annotations

from typing import Any


class Edge:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)
