"""The admission edge: the cheap "no", answered before Django from process-local snapshots.

Most of a drop's crowd asks questions whose answer is already known (is it on? sold out?
paused? admitted?), and most reserve attempts cannot succeed. This raw ASGI layer answers
those from each drop's snapshot (admission.state publishes it to Redis every second, and at
once on pause, resume and sold out) without entering Django or querying PostgreSQL: an
answer from here costs a dict lookup, where Django's handler costs ~10-40x more
(docs/ARCHITECTURE.md, "Admission").

What keeps it honest:

- It only ever says "no" or shows the drop's public state, never "yes": whatever might
  succeed goes through Django to the claim statements, which decide.
- A snapshot it is unsure of (none, older than MAX_AGE, Redis away) is unknown, and
  unknown passes through: Django reads PostgreSQL.
- Claim attempts into Django are bounded per process (CLAIM_CONCURRENCY): beyond the
  bound the answer is 503 with Retry-After at once, so the database pool never drains and
  losers fail fast.
- Trouble of its own (a bad snapshot, a bug) passes the request through; it never fails one.

The waiting room's polls (GET /api/drops/<slug>/queue) are answered here too, for a buyer who
sends back the signed queue ticket the API gave them (cookie or X-Queue-Ticket header): the
position is the ticket's number against the published mark, which only ever lags the
database's, so an admission here is never early. The queue's WebSocket opens from the same
snapshots (`waiting_room`), and a snapshot getting old (beat down) is recomputed by this
process, one process per drop at a time across the fleet (a Redis SET NX lock).
"""

from __future__ import annotations

import asyncio
import dataclasses
import html
import json
import logging
import math
import re
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import redis.asyncio as aioredis
from django.conf import settings
from django.db import connections
from django.http.request import split_domain_port, validate_host

from admission import sql, state, tokens
from core import redis
from core.asgi import (
    PRIVATE_HEADERS,
    Answer,
    ASGIApp,
    Receive,
    Scope,
    Send,
    bearer,
    cookies,
    header,
)
from core.errors import Busy, Ended, FloodgateError, NotAdmitted, NotStarted, Paused, SoldOut
from core.lookups import BatchedLookup

# A ticket signed up to this long after a revocation is Django's too: a request authenticated just
# before the ban may sign its ticket just after it, and hosts' clocks differ a little.
REVOCATION_GRACE = 5.0
# A ticket looked up for a poll with only a bearer token is kept this long: its number comes from
# the draw's map once drawn, and a revoked token is forgotten by the lane at once.
TICKET_SECONDS = 30.0
TicketKey = tuple[int, int]  # (drop, buyer)
TicketHeld = tuple[int, int | None]  # (entry, number: None before the draw)
REDIS_CONNECTIONS = 32  # per process: the edge's Redis reads (a drawn number, a snapshot) are one round trip


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


log = logging.getLogger(__name__)

MAX_AGE = 5.0  # seconds: an older snapshot (by its "at" or its arrival) is unknown
REFRESH_AFTER = 1.0  # seconds: re-read the key after this; the tick only publishes changes
STALE_AFTER = 3.0  # seconds: beat publishes every second; older than this, this process recomputes it
NO_ROOM_SECONDS = 5.0  # a slug a socket found no waiting room for is not looked up again for this long
ROOMS_SECONDS = 5.0  # the list of every waiting room's slug is re-read after this
MISSES_PER_SECOND, MISS_BURST = 2.0, 10  # slugs not in that list looked up on their own, per process
MAX_ENTRIES = 10_000  # snapshots and "no such drop" answers kept; random slugs cannot grow it further

STATE, CLAIM_JSON, CLAIM_PAGE, QUEUE, JOIN = "state", "claim_json", "claim_page", "queue", "join"
STATE_PATH = re.compile(r"/api/drops/([^/]+)")
QUEUE_PATH = re.compile(r"/api/drops/([^/]+)/queue")
CLAIM_JSON_PATH = re.compile(r"/api/drops/([^/]+)/holds")
CLAIM_PAGE_PATH = re.compile(r"/drops/([^/]+)/buy")
SLUG = re.compile(r"[-a-zA-Z0-9_]{1,80}")  # Django's slug converter, within Drop.slug's length

TICKET_HEADER = tokens.TICKET_HEADER.lower().encode()
ADMITTING_STATES = ("live", "paused")  # where Django's place hands out an admission token
# Django's own wording for the same refusals (holds.services, inventory.services).
PAUSED = "This sale is paused. It resumes shortly."
ENDED = "This drop has ended."
SOLD_OUT = "Sold out. Units come back if a buyer does not pay in time."
BUSY = "The shop is very busy; try again in a second."

# The few database reads the edge makes itself (a stale snapshot recomputed, a socket's drop with
# no snapshot looked up) run here: never on the one thread Django's sync work shares, where a
# crowd's handshakes would queue behind each other and behind every view.
DB_THREADS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="admission-edge-db")


@dataclass(frozen=True, slots=True)
class Known:
    """One drop's published snapshot, checked and digested once for the hot path."""

    drop: dict[str, Any]  # the public drop JSON (GET /api/drops/<slug>)
    body: bytes  # ... encoded as Django's JsonResponse would
    drop_id: int | None
    queue: dict[str, Any] | None  # the waiting room's message (admission.state.Snapshot.queue_json)
    at: float  # when it was computed (publisher's wall clock)
    starts_at: datetime
    ends_at: float  # epoch seconds
    rehearsal: bool = False  # a rehearsal's copy: its state is shown by Django, to its buyers only


@dataclass(frozen=True, slots=True)
class Entry:
    known: Known | None  # None: no snapshot (no such drop, key expired, Redis away)
    received: float  # time.monotonic() when it came


def parse(raw: bytes | str) -> Known:
    """A published snapshot; ValueError, KeyError or TypeError for anything else."""
    snap = json.loads(raw)
    drop = snap["drop"]
    drop_id = snap.get("drop_id")
    if not isinstance(drop, dict) or not isinstance(drop["slug"], str) or not isinstance(drop["state"], str):
        raise TypeError("not a drop snapshot")
    if drop_id is not None and (isinstance(drop_id, bool) or not isinstance(drop_id, int)):
        raise TypeError("drop_id is not an integer")
    queue = snap.get("queue")
    if queue is not None and not (isinstance(queue, dict) and isinstance(queue.get("admitted_through"), int)):
        raise TypeError("not a queue message")
    return Known(
        drop=drop,
        body=json.dumps(drop).encode(),
        drop_id=drop_id,
        queue=queue,
        at=float(snap["at"]),
        starts_at=datetime.fromisoformat(drop["starts_at"]).astimezone(UTC),
        ends_at=datetime.fromisoformat(drop["ends_at"]).timestamp(),
        rehearsal=snap.get("rehearsal") is True,
    )


def refusal(known: Known, *, token: str | None, now: float) -> FloodgateError | None:
    """Why a reserve would surely fail now, in the order Django checks; None: let it try.

    Every branch is a "no" that a stale snapshot can only make too early (a buyer turned
    away who might have won), never a "yes".
    """
    drop = known.drop
    current = drop["state"]
    if current == "paused":
        return Paused(PAUSED)
    just_opened = False
    if current == "scheduled":
        if now < known.starts_at.timestamp():
            starts = known.starts_at
            return NotStarted(f"This drop opens at {starts:%H:%M:%S} UTC.", starts_at=starts.isoformat())
        just_opened = True  # the next snapshot says so; only the admission is certain meanwhile
    elif current == "ended" or now >= known.ends_at:
        return Ended(ENDED)
    if drop.get("waiting_room") is True and known.drop_id is not None:
        try:
            tokens.claims(token, drop_id=known.drop_id)  # HMAC only; Django checks the buyer
        except NotAdmitted as error:
            return error
    if just_opened:
        return None  # Django decides
    if drop.get("sold_out") is True:
        return SoldOut(SOLD_OUT)
    return None


def place(known: Known, ticket: tokens.QueueTicket, *, sent: str) -> dict[str, Any] | None:
    """The body Django's queue API gives this ticket's buyer (services.Place.as_json); None: ask Django.

    Before the draw a ticket has no number: while the snapshot says undrawn, its answer is the
    entry's (no place yet); once drawn, the caller looks its number up in the draw's map.
    """
    queue = known.queue
    if queue is None or known.drop.get("waiting_room") is not True or known.drop_id != ticket.drop_id:
        return None
    drawn = queue.get("seed") is not None
    number = ticket.number
    if number is None and drawn:
        return None  # the caller found no number in the draw's map
    if number is not None and number <= int(queue.get("offered_through") or 0):
        return None  # offered a returned unit (or passed): Django reads the offer
    admitted_through = int(queue["admitted_through"])
    token = None
    if number is not None and number <= admitted_through and known.drop["state"] in ADMITTING_STATES:
        token = tokens.issue(drop_id=ticket.drop_id, buyer_id=ticket.buyer_id, ticket=number)
    answer = state.place_json(
        queue, entry=ticket.entry, number=number, admitted_through=admitted_through, drawn=drawn, token=token
    )
    return {**answer, "queue_ticket": sent}


def credential(scope: Scope) -> str | None:
    """What the request is signed in with, hashed as tokens.credential: a bearer token, else the session."""
    sent = [bytes(v).decode("latin-1") for k, v in scope.get("headers", ()) if k.lower() == b"authorization"]
    if sent:  # core.api takes the bearer token when the header is there at all (repeats joined, as Django)
        scheme, _, raw = ",".join(sent).partition(" ")
        return tokens.credential(bearer=raw.strip(), session_key=None) if scheme.lower() == "bearer" else None
    return tokens.credential(bearer=None, session_key=cookies(scope).get(settings.SESSION_COOKIE_NAME))


BUSY_JSON = Answer.error(Busy(BUSY))


def busy_page(slug: str) -> Answer:
    back = f' <a href="/drops/{html.escape(slug)}/">Back to the drop</a>' if SLUG.fullmatch(slug) else ""
    page = (
        '<!doctype html><html lang="en"><meta charset="utf-8"><title>Very busy</title>'
        f"<p>The shop is very busy right now; press the button again in a second.{back}</p></html>"
    )
    return Answer(503, page.encode(), content_type=b"text/html; charset=utf-8", retry_after=1)


def route(scope: Scope) -> tuple[str, str] | None:
    """(what, slug) for the requests the edge looks at; None for everything else."""
    path, method = scope.get("path", ""), scope.get("method", "")
    if method == "POST":
        if found := CLAIM_JSON_PATH.fullmatch(path):
            return CLAIM_JSON, found[1]
        if found := CLAIM_PAGE_PATH.fullmatch(path):
            return CLAIM_PAGE, found[1]
        if found := QUEUE_PATH.fullmatch(path):
            return JOIN, found[1]
    elif method in ("GET", "HEAD") and (found := STATE_PATH.fullmatch(path)):
        return STATE, found[1]
    elif method == "GET" and (found := QUEUE_PATH.fullmatch(path)):
        return QUEUE, found[1]
    return None


def _tickets_of(keys: list[TicketKey]) -> dict[TicketKey, TicketHeld]:
    try:
        with connections["default"].cursor() as cursor:
            cursor.execute(sql.TICKETS_OF, {"drops": [d for d, _ in keys], "buyers": [b for _, b in keys]})
            return {(drop, buyer): (entry, number) for drop, buyer, entry, number in cursor.fetchall()}
    finally:
        connections.close_all()  # this thread's connection back to the pool


def _refresh_drop(drop_id: int) -> None:
    try:
        state.refresh([drop_id])
    finally:
        connections.close_all()  # this thread's connection back to the pool


def _open_room(slug: str) -> tuple[int, dict[str, Any]] | None:
    """A waiting-room drop's id and queue message (computed and published when stale), or None."""
    from shop.models import Drop  # the models need Django set up; this module is imported before

    try:
        drop = Drop.objects.select_related("product").filter(slug=slug, waiting_room=True).first()
        if drop is None:
            return None
        return drop.pk, state.current(drop, publish_computed=True).queue_json()
    finally:
        connections.close_all()


def _waiting_rooms() -> frozenset[str]:
    """The slugs of every drop with a waiting room."""
    from shop.models import Drop  # as _open_room: the models need Django set up

    try:
        return frozenset(Drop.objects.filter(waiting_room=True).values_list("slug", flat=True))
    finally:
        connections.close_all()


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
        self._revoked: dict[int, float] = {}  # buyer -> when their credentials were revoked
        self.claim_limit = claim_limit
        self.redis_url = redis_url
        self.max_age = max_age
        self.refresh_after = refresh_after
        self.stale_after = stale_after
        self.in_flight = 0  # claim requests inside Django now; the event loop is one thread
        self.listening = False  # subscribed to the snapshots channel
        # hit, busy, fetch, message, queue, refresh, lookup, rooms, refused
        self.stats: Counter[str] = Counter()
        self._cache: dict[str, Entry] = {}
        self._fetching: dict[str, asyncio.Future[Entry]] = {}
        self._refreshing: dict[str, asyncio.Task[None]] = {}
        self._looking: dict[str, asyncio.Future[tuple[int, dict[str, Any]] | None]] = {}
        self._no_room: dict[str, float] = {}  # slug -> monotonic time until which it has none
        self._rooms: frozenset[str] = frozenset()  # every waiting room's slug, one query for all
        self._rooms_at = -math.inf  # monotonic time of that read
        self._rooms_reading: Future[frozenset[str]] | None = None
        self._misses = (float(MISS_BURST), -math.inf)  # token bucket: (tokens, monotonic time)
        self._hosts: dict[str, bool] = {}
        # (drop, buyer) -> (entry, number): the ticket of a poll that carries only a bearer token
        self._tickets: BatchedLookup[TicketKey, TicketHeld] = BatchedLookup(
            self._fetch_tickets, seconds=TICKET_SECONDS, size=MAX_ENTRIES
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._redis: aioredis.Redis | None = None
        self._listener: asyncio.Task[None] | None = None
        self._warned = 0.0

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
            return await (BUSY_JSON if kind == CLAIM_JSON else busy_page(slug)).send(send)
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1

    def note_sold_out(self, slug: str) -> None:
        """The arbiter just said "sold out" in this process: answer it here from now on.

        Stamped now, so a re-read of the older published snapshot does not undo it; the next
        one published (units came back, or not) replaces it.
        """
        entry = self._cache.get(slug)
        if entry is None or entry.known is None or entry.known.drop.get("sold_out") is True:
            return
        drop = {**entry.known.drop, "sold_out": True, "remaining": 0}
        known = dataclasses.replace(entry.known, drop=drop, body=json.dumps(drop).encode(), at=time.time())
        self._store(slug, Entry(known, time.monotonic()))

    def forget(self) -> None:
        """Drop every local snapshot and ticket (tests; the next request reads Redis)."""
        self._cache.clear()
        self._tickets.forget()
        self._no_room.clear()
        self._rooms_at = -math.inf
        self._misses = (float(MISS_BURST), -math.inf)

    async def waiting_room(self, slug: str) -> tuple[int, dict[str, Any]] | None:
        """For the queue's WebSocket: the drop's id and its first message, or None (no waiting room).

        From the snapshot when there is a fresh one (no query, no thread); otherwise one lookup
        per slug at a time on the edge's own threads, and a "none" is remembered for a while.
        """
        if not SLUG.fullmatch(slug):
            return None
        known = None
        try:
            known = await self._known(slug)
        except Exception as error:
            self._trouble("cannot read the snapshot of %r for a socket: %s", slug, error)
        if known is not None and known.drop_id is not None and known.queue is not None:
            return (known.drop_id, known.queue) if known.drop.get("waiting_room") is True else None
        until = self._no_room.get(slug)
        if until is not None and time.monotonic() < until:
            return None
        if not await self._worth_a_lookup(slug):  # a flood of made-up slugs: no query each
            return None
        pending = self._looking.get(slug)
        if pending is None:
            self.stats["lookup"] += 1
            pending = asyncio.get_running_loop().run_in_executor(DB_THREADS, _open_room, slug)
            self._looking[slug] = pending
            pending.add_done_callback(
                lambda done: self._looking.pop(slug) if self._looking.get(slug) is done else None
            )
        found = await asyncio.shield(pending)
        if found is None:
            if len(self._no_room) >= MAX_ENTRIES:
                self._no_room.clear()
            self._no_room[slug] = time.monotonic() + NO_ROOM_SECONDS
        return found

    async def _worth_a_lookup(self, slug: str) -> bool:
        """Whether a slug with no snapshot may cost a lookup of its own.

        A slug in the list of every waiting room (one query for all, re-read after ROOMS_SECONDS)
        may. One not in it may be a drop made since the list was read, or made up: a few a second
        are looked up (MISSES_PER_SECOND, a burst of MISS_BURST), so a new room opens at once, and
        a flood of made-up slugs is refused without a query each.
        """
        now = time.monotonic()
        if now - self._rooms_at >= ROOMS_SECONDS:
            if self._rooms_reading is None or self._rooms_reading.done():
                self.stats["rooms"] += 1
                self._rooms_reading = DB_THREADS.submit(_waiting_rooms)
            self._rooms = await asyncio.wrap_future(self._rooms_reading)
            self._rooms_at = now = time.monotonic()
        if slug in self._rooms:
            return True
        tokens, at = self._misses
        tokens = min(float(MISS_BURST), tokens + (now - at) * MISSES_PER_SECOND)
        if tokens < 1:
            self.stats["refused"] += 1
            self._misses = (tokens, now)
            return False
        self._misses = (tokens - 1, now)
        return True

    async def aclose(self) -> None:
        """Stop the subscriber and close the Redis clients (tests; a server just exits)."""
        # Database work in flight finishes first: it must not outlive its caller (a test's data).
        busy: list[asyncio.Future[Any]] = [*self._refreshing.values(), *self._looking.values()]
        if busy:
            await asyncio.wait(busy, timeout=10)
        listener = self._listener
        while listener is not None and not listener.done():
            # redis-py can swallow a cancel that lands while it connects: ask until it stops.
            listener.cancel()
            await asyncio.wait({listener}, timeout=0.1)
        if self._redis is not None:
            await self._redis.aclose()
        self._loop = self._listener = self._redis = None

    async def _answer(self, kind: str, slug: str, scope: Scope) -> Answer | None:
        if not SLUG.fullmatch(slug) or not self._may_answer(scope):
            return None
        known = await self._known(slug)
        if known is None:
            return None
        if kind == STATE:
            return None if known.rehearsal else Answer(200, known.body)
        if kind == QUEUE:
            return await self._place(known, scope)
        why = refusal(known, token=header(scope, b"x-admission-token"), now=time.time())
        return None if why is None else Answer.error(why)

    async def _place(self, known: Known, scope: Scope) -> Answer | None:
        if known.drop_id is None:
            return None
        sent, from_cookie = header(scope, TICKET_HEADER), False
        if sent is None:
            sent = cookies(scope).get(tokens.TICKET_COOKIE)
            from_cookie = sent is not None
        bound_to = credential(scope)
        found = tokens.ticket(sent, drop_id=known.drop_id, bound_to=bound_to)
        if sent is None and bound_to is not None:
            found, sent = await self._ticket_by_bearer(known.drop_id, scope, bound_to) or (None, None)
        if found is None or sent is None or bound_to is None:
            return None
        if found.issued <= self._revoked.get(found.buyer_id, -1.0) + REVOCATION_GRACE:
            return None  # signed before (or as) the buyer's credentials were revoked: Django checks them
        headers: tuple[tuple[bytes, bytes], ...] = PRIVATE_HEADERS
        if found.number is None and known.queue is not None and known.queue.get("seed") is not None:
            # Drawn since the ticket was signed: the whole line asks at the start, so its number
            # comes from the draw's published map, with a ticket that carries it from now on.
            number = await state.drawn_number(self._client(), known.drop_id, found.entry)
            if number is None:
                return None  # the map is gone: Django reads the ticket
            found = dataclasses.replace(found, number=number)
            sent = tokens.issue_ticket(
                drop_id=found.drop_id,
                buyer_id=found.buyer_id,
                entry=found.entry,
                number=number,
                bound_to=bound_to,
                issued=found.issued,
            )
            if from_cookie:
                cookie = tokens.ticket_cookie(known.drop["slug"], sent)[tokens.TICKET_COOKIE].OutputString()
                headers = (*headers, (b"set-cookie", cookie.encode("latin-1")))
        body = place(known, found, sent=sent)
        if body is None:
            return None
        self.stats["queue"] += 1
        return Answer(200, json.dumps(body).encode(), headers=headers)

    async def _ticket_by_bearer(
        self, drop_id: int, scope: Scope, bound_to: str
    ) -> tuple[tokens.QueueTicket, str] | None:
        """A poll with only its bearer token (the ticket is optional in the contract): the lane's
        token cache names the buyer and one batched read their ticket, signed here for the answer.
        None (Django answers): no lane, no bearer token, no such account, or not in this line."""
        token = bearer(scope)
        if token is None or self.lane is None:
            return None
        buyer_id = await self.lane.buyer_of(token)
        if buyer_id is None:
            return None
        held = await self._tickets.get((drop_id, buyer_id))
        if held is None:
            return None
        entry, number = held
        found = tokens.QueueTicket(drop_id, buyer_id, entry, number, issued=time.time())
        signed = tokens.issue_ticket(
            drop_id=drop_id, buyer_id=buyer_id, entry=entry, number=number, bound_to=bound_to,
            issued=found.issued,
        )  # fmt: skip
        self.stats["bearer_poll"] += 1
        return found, signed

    async def _fetch_tickets(self, keys: list[TicketKey]) -> dict[TicketKey, TicketHeld]:
        return await asyncio.get_running_loop().run_in_executor(DB_THREADS, _tickets_of, keys)

    def _may_answer(self, scope: Scope) -> bool:
        """Only where Django would answer too: an allowed Host, and no redirect to HTTPS due."""
        if settings.SECURE_SSL_REDIRECT and not self._secure(scope):
            return False
        host = header(scope, b"host") or ""
        allowed = self._hosts.get(host)
        if allowed is None:
            hosts = settings.ALLOWED_HOSTS
            if settings.DEBUG and not hosts:
                hosts = [".localhost", "127.0.0.1", "[::1]"]  # as HttpRequest.get_host does
            domain, _port = split_domain_port(host)
            allowed = bool(domain) and validate_host(domain, hosts)
            if len(self._hosts) > 256:
                self._hosts.clear()
            self._hosts[host] = allowed
        return allowed

    @staticmethod
    def _secure(scope: Scope) -> bool:
        if scope.get("scheme") == "https":
            return True
        if not settings.SECURE_PROXY_SSL_HEADER:
            return False
        name, value = settings.SECURE_PROXY_SSL_HEADER
        sent = header(scope, name.removeprefix("HTTP_").replace("_", "-").lower().encode())
        return sent is not None and sent.split(",", 1)[0].strip() == value

    # Snapshots ------------------------------------------------------------------------------

    async def _known(self, slug: str) -> Known | None:
        self._start()
        entry = self._cache.get(slug)
        if entry is None or time.monotonic() - entry.received > self.refresh_after:
            entry = await self._fetch(slug)
        known = entry.known
        if known is None:
            return None
        age = time.time() - known.at
        if age > self.stale_after:
            self._refresh_soon(slug, known)
        return None if age > self.max_age else known

    def _refresh_soon(self, slug: str, known: Known) -> None:
        """Beat is late with this drop's snapshot: recompute it here, in the background.

        Only drops that had a snapshot (a made-up slug never costs a query), once per process at
        a time, and once per REFRESH_LOCK_SECONDS across all processes.
        """
        if known.drop_id is None or slug in self._refreshing:
            return
        task = asyncio.get_running_loop().create_task(self._refresh(slug, known.drop_id))
        self._refreshing[slug] = task
        task.add_done_callback(
            lambda done: self._refreshing.pop(slug) if self._refreshing.get(slug) is done else None
        )

    async def _refresh(self, slug: str, drop_id: int) -> None:
        try:
            if not await state.claim_refresh_async(self._client(), slug):
                return  # another process has it (or did it a moment ago)
            self.stats["refresh"] += 1
            await asyncio.get_running_loop().run_in_executor(DB_THREADS, _refresh_drop, drop_id)
            await self._get(slug)  # this process has it at once, whether or not a message is published
        except Exception as error:
            self._trouble("could not refresh the snapshot of %r: %s", slug, error)

    async def _fetch(self, slug: str) -> Entry:
        """One Redis GET per slug at a time, however many requests ask for it."""
        pending = self._fetching.get(slug)
        if pending is None:
            pending = asyncio.ensure_future(self._get(slug))
            self._fetching[slug] = pending
            pending.add_done_callback(
                lambda done: self._fetching.pop(slug) if self._fetching.get(slug) is done else None
            )
        # Shielded: one waiter going away (a client hung up) must not cancel it for the others.
        return await asyncio.shield(pending)

    async def _get(self, slug: str) -> Entry:
        started = time.monotonic()
        self.stats["fetch"] += 1
        latest = self._cache.get(slug)
        known: Known | None = None
        try:
            raw = await self._client().get(state.KEY.format(slug=slug))
            known = parse(raw) if raw is not None else None
        except Exception as error:  # Redis away, or a snapshot we cannot read
            self._trouble("cannot read the snapshot of %r: %s", slug, error)
            # A blip does not send the crowd to Django: keep what we had while its "at" is fresh.
            known = latest.known if latest is not None else None
        latest = self._cache.get(slug)
        if latest is not None and (
            latest.received >= started  # a message came meanwhile: at least as new
            or (latest.known is not None and known is not None and latest.known.at > known.at)
        ):
            return latest
        entry = Entry(known, time.monotonic())
        self._store(slug, entry)
        return entry

    def _receive(self, raw: bytes | str) -> None:
        self.stats["message"] += 1
        try:
            known = parse(raw)
        except (ValueError, KeyError, TypeError) as error:
            self._trouble("ignored a snapshot message: %s", error)
            return
        slug = known.drop["slug"]
        old = self._cache.get(slug)
        if old is not None and old.known is not None and old.known.at > known.at:
            return  # never back in time
        self._store(slug, Entry(known, time.monotonic()))

    def _revocation(self, raw: bytes | str) -> None:
        """A buyer's credentials were revoked (admission.state.revoke): their older tickets go to
        Django from now on, and the lane looks that buyer's tokens and sessions up again."""
        try:
            heard = json.loads(raw)
            buyer, at = int(heard["buyer"]), float(heard["at"])
        except (ValueError, KeyError, TypeError) as error:
            self._trouble("ignored a revocation message: %s", error)
            return
        self._note_revoked(buyer, at)
        if self.lane is not None:
            self.lane.forget_buyer(buyer)

    def _note_revoked(self, buyer: int, at: float) -> None:
        if len(self._revoked) >= MAX_ENTRIES and buyer not in self._revoked:
            # a ticket's life of bans: the oldest half goes (their polls then reach the edge again,
            # and Django's checks still refuse them)
            keep = sorted(self._revoked.items(), key=lambda item: item[1])[MAX_ENTRIES // 2 :]
            self._revoked = dict(keep)
        self._revoked[buyer] = max(at, self._revoked.get(buyer, at))

    def _store(self, slug: str, entry: Entry) -> None:
        if len(self._cache) >= MAX_ENTRIES and slug not in self._cache:
            self._cache.clear()  # rare (a flood of made-up slugs): start over rather than grow
        self._cache[slug] = entry

    def _client(self) -> aioredis.Redis:
        if self._redis is None:
            # A crowd's polls share a bounded pool, waiting briefly for a connection: redis-py's
            # own pool stops at 100 and then refuses at once, and each refusal fell to Django.
            self._redis = redis.client(
                url=self.redis_url,
                blocking=REDIS_CONNECTIONS,
                timeout=0.5,
                socket_timeout=0.5,
                socket_connect_timeout=0.5,
            )
        return self._redis

    def _start(self) -> None:
        """Start the subscriber on first use, again if it died; a new event loop gets new clients."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # clients and futures belong to the loop that made them
            if self.on_start is not None:  # a server that sends no lifespan (daphne): first use
                self.on_start()
            self._loop, self._redis, self._listener, self._fetching = loop, None, None, {}
            self._refreshing, self._looking = {}, {}
            self.listening = False
        if self._listener is None or self._listener.done():
            self._listener = loop.create_task(self._listen(), name="admission-edge-listener")

    async def _listen(self) -> None:
        """Keep the local snapshots fresh from the channel; after any trouble, reconnect."""
        while True:
            client = redis.client(url=self.redis_url, socket_connect_timeout=1, health_check_interval=10)
            try:
                async with client.pubsub(ignore_subscribe_messages=True) as pubsub:
                    await pubsub.subscribe(state.CHANNEL, state.REVOKED_CHANNEL)
                    # what was revoked while this process was not listening (or not yet running)
                    for buyer, at in (await state.revocations(client)).items():
                        self._note_revoked(buyer, at)
                    if self.lane is not None:
                        self.lane.forget_tokens()
                    self.listening = True
                    while True:
                        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                        if message is None:
                            continue
                        if message["channel"] in {state.REVOKED_CHANNEL, state.REVOKED_CHANNEL.encode()}:
                            self._revocation(message["data"])
                        else:
                            self._receive(message["data"])
            except Exception as error:
                self._trouble("snapshot channel lost: %s", error)
            finally:
                self.listening = False
                await client.aclose()
            await asyncio.sleep(1)

    def _trouble(self, message: str, *args: object, exc_info: bool = False) -> None:
        """Log at most every ten seconds: under a crowd the same trouble repeats per request."""
        now = time.monotonic()
        if now - self._warned >= 10:
            self._warned = now
            log.warning("admission edge: " + message, *args, exc_info=exc_info)


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
    await Answer(404, b'{"error": "not_found", "detail": "Nothing here."}').send(send)
