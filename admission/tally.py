"""What each drop's buyers were answered at the door, counted for its public report (fairness/).

Counts live in a Redis hash per drop slug, best effort: a refusal is never slowed or failed by
its count. Whoever counts (the ASGI wrapper below for the answers sent on a drop's paths: 429 rate
limited, 503 busy, any other 5xx; admission/work.py for a proof of work that failed, since the
page's join turns it into a redirect) adds to this process's pending counts under a lock, and a
timer thread adds them to Redis a second later. Only drops the store is publishing (their snapshot
key exists) are counted, so a crowd of made-up slugs creates no keys. A process killed loses at
most its last second of counts (the report says so).
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter

from django.utils.translation import gettext_lazy
from django_redis import get_redis_connection
from redis.exceptions import RedisError

from admission import state
from core.asgi import ASGIApp, Message, Receive, Scope, Send
from core.errors import Busy

log = logging.getLogger(__name__)

KEY = "fg:tally:{slug}"
KEEP_SECONDS = 30 * 86400  # a report is published when the drop ends; counts of older drops go
DROP_PATH = re.compile(r"/(?:api/)?drops/([-a-zA-Z0-9_]{1,80})(?:/.*)?")
FLUSH_AFTER = 1.0
RATE_LIMITED, BUSY, SERVER_ERROR, PROOF_FAILED = "rate_limited", "busy", "server_error", "proof_failed"
KINDS = (PROOF_FAILED, RATE_LIMITED, BUSY, SERVER_ERROR)
# KEYS: the tally, the drop's snapshot; ARGV: kind, count, seconds to keep. Counts only a drop
# whose snapshot is published (a real drop, live or about to be).
COUNT = """
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('HINCRBY', KEYS[1], ARGV[1], ARGV[2])
  redis.call('EXPIRE', KEYS[1], ARGV[3])
end
"""


def kind_of(status: int) -> str | None:
    if status == 429:
        return RATE_LIMITED
    if status == 503:
        return BUSY
    return SERVER_ERROR if status >= 500 else None


def add(counts: Counter[tuple[str, str]]) -> None:
    """Add (slug, kind) counts to Redis now; a Redis away loses them (logged), never the answer."""
    try:
        client = get_redis_connection("default")
        script = client.register_script(COUNT)
        with client.pipeline(transaction=False) as pipe:
            for (slug, kind), n in counts.items():
                keys = [KEY.format(slug=slug), state.KEY.format(slug=slug)]
                script(keys=keys, args=[kind, n, KEEP_SECONDS], client=pipe)
            pipe.execute()
    except (RedisError, OSError) as error:
        log.warning("door counts lost (%s): %s", error, dict(counts))


class Pending:
    """This process's counts not yet in Redis: counting costs a lock and a dict update."""

    def __init__(self, flush_after: float = FLUSH_AFTER) -> None:
        self.flush_after = flush_after
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str]] = Counter()
        self._due = False

    def count(self, slug: str, kind: str) -> None:
        with self._lock:
            self._counts[(slug, kind)] += 1
            if self._due:
                return
            self._due = True
        timer = threading.Timer(self.flush_after, self.flush)
        timer.daemon = True
        timer.start()

    def flush(self) -> None:
        with self._lock:
            counts, self._counts, self._due = self._counts, Counter(), False
        if counts:
            add(counts)


PENDING = Pending()


def note(slug: str, kind: str) -> None:
    PENDING.count(slug, kind)


def counts(slug: str) -> dict[str, int]:
    """The drop's counts so far, every kind named (0 where none); Busy when Redis cannot say."""
    try:
        raw = get_redis_connection("default").hgetall(KEY.format(slug=slug))
    except (RedisError, OSError):
        raise Busy(
            gettext_lazy("The report cannot be published this second; try again in a moment.")
        ) from None
    found = {key.decode(): int(value) for key, value in raw.items()}
    return {kind: found.get(kind, 0) for kind in KINDS}


class Tally:
    """ASGI: counts the refusals and errors answered on each drop's paths, then passes them on."""

    def __init__(self, app: ASGIApp, *, pending: Pending = PENDING) -> None:
        self.app = app
        self.pending = pending

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = DROP_PATH.fullmatch(scope.get("path", "")) if scope["type"] == "http" else None
        if found is None:
            await self.app(scope, receive, send)
            return
        slug = found[1]

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start" and (kind := kind_of(message["status"])):
                self.pending.count(slug, kind)
            await send(message)

        await self.app(scope, receive, counted)
