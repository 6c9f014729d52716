"""The admission edge: the cheap "no", answered before Django from process-local snapshots.

Most of a drop's crowd asks questions whose answer is already known (is it on? sold out?
paused? admitted?), and most reserve attempts cannot succeed. This raw ASGI layer answers
those from each drop's snapshot (admission.published) without entering Django or querying
PostgreSQL: an answer from here costs a dict lookup, where Django's handler costs ~10-40x more
(admission/__init__.py).

What keeps it honest:

- It only ever says "no" (admission.refusals) or shows the drop's public state, never "yes":
  whatever might succeed goes through Django or the claim lane to the claim statements.
- A snapshot it is unsure of is unknown, and unknown passes through: Django reads PostgreSQL.
- Claim attempts into Django are bounded per process (CLAIM_CONCURRENCY): beyond the
  bound the answer is 503 with Retry-After at once, so the database pool never drains and
  losers fail fast.
- Trouble of its own (a bad snapshot, a bug) passes the request through; it never fails one.

Its parts, one job each: routes (which requests it looks at), published (the snapshots),
listener (the channel), refusals, polls (the waiting room's poll), rooms (the queue's socket
asks which drops have one). This module routes between them and Django, and runs the lifespan.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

import redis.asyncio as aioredis
from django.conf import settings
from django.utils.translation import gettext_lazy

from admission import state
from admission.background import Trouble
from admission.listener import Listener
from admission.polls import Polls
from admission.published import MAX_AGE, REFRESH_AFTER, STALE_AFTER, Known, Snapshots
from admission.refusals import answer, busy_json, busy_page, refusal
from admission.rooms import Room, Rooms
from admission.routes import CLAIM_JSON, CLAIM_PAGE, JOIN, QUEUE, STATE, route
from core.asgi import (
    SLUG,
    Answer,
    ASGIApp,
    Receive,
    Scope,
    Send,
    allowed_host,
    header,
    https_redirect_due,
    language,
)
from core.errors import NotFound


class Lane(Protocol):
    """Who answers the reserve API's claims the edge lets through, and the API's waiting-room
    joins (sale.lane.Lane, wired by config.asgi); `django` is the way into Django for what it
    leaves (for claims, the bounded one)."""

    async def __call__(
        self, slug: str, scope: Scope, receive: Receive, send: Send, django: ASGIApp
    ) -> None: ...

    async def join(self, slug: str, scope: Scope, receive: Receive, send: Send, django: ASGIApp) -> None: ...

    def warm(self) -> None: ...

    async def buyer_of(self, token: str) -> int | None:
        """Whose bearer token this is (the lane's token cache), None for no active account."""
        ...

    def forget_tokens(self) -> None: ...

    def forget_buyer(self, buyer_id: int) -> None: ...


class Edge:
    """Wraps Django's ASGI application (HTTP only); one per process, shared by all its requests."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        lane: Lane | None = None,  # takes the reserve API's claims (sale.lane.Lane)
        claim_limit: int | None = None,  # None: settings.CLAIM_CONCURRENCY, read per request
        redis_url: str | None = None,  # None: settings.REDIS_URL
        max_age: float = MAX_AGE,
        refresh_after: float = REFRESH_AFTER,
        stale_after: float = STALE_AFTER,
        on_start: Callable[[], None] | None = None,  # the server's start (ops' duty keeper)
    ) -> None:
        self.app = app
        self.on_start = on_start
        self.lane = lane
        self.claim_limit = claim_limit
        self.in_flight = 0  # claim requests inside Django now; the event loop is one thread
        # hit, busy, fetch, message, queue, refresh, lookup, rooms, refused, bearer_poll
        self.stats: Counter[str] = Counter()
        trouble = Trouble()
        self.snapshots = Snapshots(
            redis_url=redis_url,
            stats=self.stats,
            trouble=trouble,
            max_age=max_age,
            refresh_after=refresh_after,
            stale_after=stale_after,
        )
        self.polls = Polls(self.snapshots, stats=self.stats)
        self.rooms = Rooms(self.snapshots, stats=self.stats, trouble=trouble)
        self.listener = Listener(
            redis_url=redis_url,
            on_snapshot=self.snapshots.receive,
            on_revocation=self._revocation,
            on_subscribed=self._caught_up,
            trouble=trouble,
        )
        self._trouble = trouble
        self._hosts: dict[str, bool] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listening: asyncio.Task[None] | None = None

    @property
    def listening(self) -> bool:
        """Subscribed to the snapshots channel."""
        return self.listener.listening

    @property
    def max_age(self) -> float:
        return self.snapshots.max_age

    @property
    def stale_after(self) -> float:
        return self.snapshots.stale_after

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            return await self._lifespan(receive, send)
        found = route(scope) if scope["type"] == "http" else None
        if found is None:
            return await self.app(scope, receive, send)
        kind, slug = found
        if kind in (JOIN, CLAIM_JSON) and not self._may_answer(scope):
            # A Host Django refuses, or plain HTTP where it redirects: Django answers (400, 301),
            # never the lane, which would serve what Django turns away (claims still bounded).
            return await (self._claim_in_django if kind == CLAIM_JSON else self.app)(scope, receive, send)
        if kind == JOIN:  # a new ticket: nothing a snapshot could answer
            if self.lane is None:
                return await self.app(scope, receive, send)
            return await self.lane.join(slug, scope, receive, send, self.app)
        answer = None
        if kind != CLAIM_PAGE:  # pages pass through: Django shows the reason on the drop page
            try:
                answer = await self._answer(kind, slug, scope)
            except Exception:
                self._trouble("could not answer %s %r", scope["method"], scope["path"], exc_info=True)
        if answer is not None:
            self.stats["hit"] += 1
            return await answer.send(send, head=scope["method"] == "HEAD")
        if kind in (STATE, QUEUE):
            return await self.app(scope, receive, send)
        if kind == CLAIM_JSON and self.lane is not None:
            return await self.lane(slug, scope, receive, send, self._claim_in_django)
        await self._claim_in_django(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        """ASGI lifespan (granian sends it; daphne does not): warm the lane before any request."""
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                if self.on_start is not None:
                    self.on_start()
                if self.lane is not None:
                    self.lane.warm()  # returns at once; the threads connect in the background
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _claim_in_django(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A claim through Django's request path, bounded per process."""
        kind, slug = route(scope) or (CLAIM_JSON, "")
        limit = settings.CLAIM_CONCURRENCY if self.claim_limit is None else self.claim_limit
        if self.in_flight >= limit:
            self.stats["busy"] += 1
            said = language(scope)
            return await (busy_json(said) if kind == CLAIM_JSON else busy_page(slug, said)).send(send)
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1

    def note_sold_out(self, slug: str) -> None:
        """The arbiter just said "sold out" in this process: answer it here from now on."""
        self.snapshots.note_sold_out(slug)

    def forget(self) -> None:
        """Drop every local snapshot and ticket (tests; the next request reads Redis)."""
        self.snapshots.forget()
        self.polls.forget()
        self.rooms.forget()

    async def waiting_room(self, slug: str) -> Room | None:
        """For the queue's WebSocket: the drop's id and its first message, or None (no waiting room)."""
        self._start()
        return await self.rooms.waiting_room(slug)

    async def aclose(self) -> None:
        """Stop the subscriber and close the Redis clients (tests; a server just exits)."""
        # Database work in flight finishes first: it must not outlive its caller (a test's data).
        busy: list[asyncio.Future[Any]] = [*self.snapshots.in_flight(), *self.rooms.in_flight()]
        if busy:
            await asyncio.wait(busy, timeout=10)
        listening = self._listening
        while listening is not None and not listening.done():
            # redis-py can swallow a cancel that lands while it connects: ask until it stops.
            listening.cancel()
            await asyncio.wait({listening}, timeout=0.1)
        await self.snapshots.aclose()
        self._loop = self._listening = None

    async def _known(self, slug: str) -> Known | None:
        self._start()
        return await self.snapshots.known(slug)

    async def _answer(self, kind: str, slug: str, scope: Scope) -> Answer | None:
        if not SLUG.fullmatch(slug) or not self._may_answer(scope):
            return None
        known = await self._known(slug)
        if known is None:
            return None
        if kind == STATE:
            return None if known.rehearsal else Answer(200, known.body)
        if kind == QUEUE:
            lane = self.lane
            return await self.polls.answer(known, scope, buyer_of=lane.buyer_of if lane is not None else None)
        why = refusal(known, token=header(scope, b"x-admission-token"), now=time.time())
        return None if why is None else answer(why, language(scope))

    def _may_answer(self, scope: Scope) -> bool:
        """Only where Django would answer too: an allowed Host, and no redirect to HTTPS due."""
        if https_redirect_due(scope):
            return False
        host = header(scope, b"host") or ""
        allowed = self._hosts.get(host)
        if allowed is None:
            allowed = allowed_host(host)
            if len(self._hosts) > 256:
                self._hosts.clear()
            self._hosts[host] = allowed
        return allowed

    def _revocation(self, raw: bytes | str) -> None:
        """A buyer's credentials were revoked (admission.state.revoke): their older tickets go to
        Django from now on, and the lane looks that buyer's tokens and sessions up again."""
        try:
            heard = json.loads(raw)
            buyer, at = int(heard["buyer"]), float(heard["at"])
        except (ValueError, KeyError, TypeError) as error:
            self._trouble("ignored a revocation message: %s", error)
            return
        self.polls.note_revoked(buyer, at)
        if self.lane is not None:
            self.lane.forget_buyer(buyer)

    async def _caught_up(self, client: aioredis.Redis) -> None:
        """Just subscribed: what was revoked while this process was not listening (or not yet running)."""
        for buyer, at in (await state.revocations(client)).items():
            self.polls.note_revoked(buyer, at)
        if self.lane is not None:
            self.lane.forget_tokens()

    def _start(self) -> None:
        """Start the subscriber on first use, again if it died; a new event loop gets new clients."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # clients and futures belong to the loop that made them
            if self.on_start is not None:  # a server that sends no lifespan (daphne): first use
                self.on_start()
            self._loop, self._listening = loop, None
            self.snapshots.new_loop()
            self.rooms.new_loop()
            self.polls.new_loop()
            self.listener.listening = False
        if self._listening is None or self._listening.done():
            self._listening = loop.create_task(self.listener.run(), name="admission-edge-listener")


_shared: Edge | None = None


def serve(app: ASGIApp, *, lane: Lane | None = None, on_start: Callable[[], None] | None = None) -> Edge:
    """The process's edge in front of Django (config.asgi); the queue's sockets share its snapshots."""
    global _shared
    _shared = Edge(app, lane=lane, on_start=on_start)
    return _shared


def shared() -> Edge:
    """The process's edge; a bare one (no HTTP behind it) when config.asgi did not make one."""
    global _shared
    if _shared is None:
        _shared = Edge(_nothing)
    return _shared


async def _nothing(scope: Scope, receive: Receive, send: Send) -> None:
    await Answer.error(NotFound(gettext_lazy("Nothing here.")), language=language(scope)).send(send)
