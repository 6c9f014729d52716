"""What each drop's buyers were answered at the door, counted for its public report (fairness/).

Counts live in a Redis hash per drop slug, best effort: a refusal is never slowed or failed by
its count. The web process counts the answers it sends on a drop's paths (429 rate limited, 503
busy, any other 5xx) in memory and adds them to Redis once a second, off the event loop; a proof
of work refused is counted where it is decided (admission/work.py), since the page's join turns
it into a redirect. A process killed loses at most its last second of counts (the report says so).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import Counter

from django_redis import get_redis_connection
from redis.exceptions import RedisError

from core.asgi import ASGIApp, Message, Receive, Scope, Send
from core.errors import Busy

log = logging.getLogger(__name__)

KEY = "fg:tally:{slug}"
KEEP_SECONDS = 30 * 86400  # a report is published when the drop ends; counts of older drops go
DROP_PATH = re.compile(r"/(?:api/)?drops/([-a-zA-Z0-9_]{1,80})(?:/.*)?")
FLUSH_AFTER = 1.0
RATE_LIMITED, BUSY, SERVER_ERROR, PROOF_FAILED = "rate_limited", "busy", "server_error", "proof_failed"
KINDS = (PROOF_FAILED, RATE_LIMITED, BUSY, SERVER_ERROR)


def kind_of(status: int) -> str | None:
    if status == 429:
        return RATE_LIMITED
    if status == 503:
        return BUSY
    return SERVER_ERROR if status >= 500 else None


def add(counts: Counter[tuple[str, str]]) -> None:
    """Add (slug, kind) counts to Redis; a Redis away loses them (logged), never the answer."""
    try:
        with get_redis_connection("default").pipeline(transaction=False) as pipe:
            for (slug, kind), n in counts.items():
                pipe.hincrby(KEY.format(slug=slug), kind, n)
                pipe.expire(KEY.format(slug=slug), KEEP_SECONDS)
            pipe.execute()
    except (RedisError, OSError) as error:
        log.warning("door counts lost (%s): %s", error, dict(counts))


def note(slug: str, kind: str) -> None:
    add(Counter({(slug, kind): 1}))


def counts(slug: str) -> dict[str, int]:
    """The drop's counts so far, every kind named (0 where none); Busy when Redis cannot say."""
    try:
        raw = get_redis_connection("default").hgetall(KEY.format(slug=slug))
    except (RedisError, OSError):
        raise Busy("The door's counts cannot be read right now.") from None
    found = {key.decode(): int(value) for key, value in raw.items()}
    return {kind: found.get(kind, 0) for kind in KINDS}


class Tally:
    """ASGI: counts the refusals and errors answered on each drop's paths, then passes them on."""

    def __init__(self, app: ASGIApp, *, flush_after: float = FLUSH_AFTER) -> None:
        self.app = app
        self.flush_after = flush_after
        self._counts: Counter[tuple[str, str]] = Counter()
        self._due = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = DROP_PATH.fullmatch(scope.get("path", "")) if scope["type"] == "http" else None
        if found is None:
            await self.app(scope, receive, send)
            return
        slug = found[1]

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start" and (kind := kind_of(message["status"])):
                self._count(slug, kind)
            await send(message)

        await self.app(scope, receive, counted)

    def _count(self, slug: str, kind: str) -> None:
        self._counts[(slug, kind)] += 1
        if not self._due:
            self._due = True
            asyncio.get_running_loop().call_later(self.flush_after, self._flush)

    def _flush(self) -> None:
        counts, self._counts, self._due = self._counts, Counter(), False
        asyncio.get_running_loop().run_in_executor(None, add, counts)
