"""The claim lane: the reserve API answered without Django's request path, claims batched per drop.

It also takes the API's waiting-room joins (`POST /api/drops/<slug>/queue` with a bearer
token): the crowd joins in the seconds before a start, and the joins of a drop that arrive
together are one read and one insert on the lane's threads instead of Django's whole request
path each.

The admission edge hands it every `POST /api/drops/<slug>/holds` it did not refuse. The lane
takes the reserve steps Django's view takes (sale.entry.steps: the same checks, in the same
order, with the same answers); where the doors differ, it is here:

- who the buyer is: sale.who, through per-process caches (a crowd's new tokens in one query);
- the drop row: cached for DROP_SECONDS (a stale row only refuses early: the claim statement
  checks the sale window itself);
- the rate limit: the same script through one asyncio Redis call;
- the join: batched per drop (sale.joins), as the claim is;
- the claim: batched per drop (sale.batcher); what a batch leaves undecided (a repeated key, a
  chosen seat, another bucket) goes to the single claim on the same threads (sale.workers);
- the first "sold out" flips this process's edge flag at once and is published for the others.

Anything else (another Authorization scheme, no credentials, a drop with a Redis gate or in its
presale window, a row gone since it was cached) goes to Django with its body replayed, so every
request gets an answer either way.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from typing import NoReturn

from django.conf import settings
from django.core.exceptions import BadRequest, SuspiciousOperation
from django.db import DatabaseError, IntegrityError
from django.http.multipartparser import MultiPartParserError

from admission import limits, tokens
from catalogue import selectors as catalogue
from core import clients, redis
from core.api import MAX_BODY, TOO_LARGE, parse_json_body
from core.asgi import (
    PRIVATE_HEADERS,
    Answer,
    Receive,
    Scope,
    Send,
    bearer,
    cookies,
    header,
    language,
    read_body,
    replay,
)
from core.errors import Busy, FloodgateError, TooLarge, Unauthenticated, database_not_now
from core.lookups import BatchedLookup
from holds import selectors
from holds.services import Reservation
from sale import entry
from sale.batcher import BUSY, Batcher
from sale.joins import Joins
from sale.who import CACHE_SIZE, Credentials, Who
from sale.workers import JoinRequest, Workers
from shop.models import Drop

log = logging.getLogger(__name__)

DROP_SECONDS = 1.0
REDIS_CONNECTIONS = 8  # the rate limits' (their checks go together, limits.Limiter)
LANE = b"x-floodgate-lane"  # the header that says the lane answered

Pass = Callable[[Scope, Receive, Send], Awaitable[None]]
Work = Callable[[str, Scope, bytes, Who], Awaitable[Answer | None]]

_lanes: weakref.WeakSet[Lane] = weakref.WeakSet()  # this process's lanes (one in a server)


def forget_buyer(buyer_id: int) -> None:
    """Every lane of this process forgets one buyer's tokens and sessions (theirs were revoked)."""
    for lane in list(_lanes):
        lane.forget_buyer(buyer_id)


def forget_tokens() -> None:
    """Every lane of this process asks the database about each bearer token and session again
    (other processes' lanes hear it through admission.state.revoke)."""
    for lane in list(_lanes):
        lane.forget_tokens()


class Lane:
    """One per web process; its claims run on a few worker threads with their own connections."""

    def __init__(self, *, on_sold_out: Callable[[str], None] | None = None, threads: int = 4) -> None:
        self.on_sold_out = on_sold_out
        # answered, batches, batched, single, passed, busy, joins, join_batches
        self.stats: Counter[str] = Counter()
        self.workers = Workers(threads)
        self.credentials = Credentials(self.workers)
        self.batcher = Batcher(self.workers, stats=self.stats, spawn=self._spawn)
        self.joins = Joins(self.workers, stats=self.stats, spawn=self._spawn)
        self._drops: BatchedLookup[str, Drop] = BatchedLookup(
            self.workers.drops, seconds=DROP_SECONDS, miss_seconds=DROP_SECONDS, size=CACHE_SIZE
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._limits: limits.Limiter | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._published: dict[int, float] = {}
        _lanes.add(self)

    async def __call__(self, slug: str, scope: Scope, receive: Receive, send: Send, django: Pass) -> None:
        """Answer one reserve request, or pass it to Django (its body replayed)."""
        await self._serve(self._reserve, slug, scope, receive, send, django)

    async def join(self, slug: str, scope: Scope, receive: Receive, send: Send, django: Pass) -> None:
        """Answer one waiting-room join (POST /api/drops/<slug>/queue), or pass it to Django."""
        await self._serve(self._join, slug, scope, receive, send, django)

    async def buyer_of(self, token: str) -> int | None:
        """Whose bearer token this is, from the token cache (the edge answers their polls by it)."""
        self._start()
        return await self.credentials.tokens.get(token)

    async def _serve(
        self, work: Work, slug: str, scope: Scope, receive: Receive, send: Send, django: Pass
    ) -> None:
        body, whole = await read_body(receive, limit=MAX_BODY)
        if body is None:
            return  # the client left before its request was whole: nothing to answer
        if not whole:
            return await Answer.error(TooLarge(TOO_LARGE), language=language(scope), by=LANE).send(send)
        token = bearer(scope)
        session = None
        if token is None and header(scope, b"authorization") is None:
            session = cookies(scope).get(settings.SESSION_COOKIE_NAME) or None
        if token is None and session is None:  # no credentials, or another scheme: Django's answer
            self.stats["passed"] += 1
            return await django(scope, replay(body, receive), send)
        who = None
        try:
            self._start()
            who = await self.credentials.who(scope, body, token=token, session=session)
            answer = await work(slug, scope, body, who)
        except IntegrityError:
            # The cached account or drop row is gone: forget both, and Django looks them up.
            if who is not None:
                self.credentials.forget(who)
            self._drops.forget_key(slug)
            answer = None
        except FloodgateError as error:
            answer = Answer.error(error, language=language(scope), by=LANE)
        except (MultiPartParserError, SuspiciousOperation, BadRequest):
            # A form body the CSRF check could not read (malformed multipart, too many fields):
            # Django's own path gives its 400 for it.
            answer = None
        except DatabaseError as error:  # as config.api: the database said "not now"
            if not database_not_now(error):
                raise
            log.warning("lane: database busy: %s", error)
            answer = Answer.error(Busy(BUSY), language=language(scope), by=LANE)
        if answer is None:
            self.stats["passed"] += 1
            return await django(scope, replay(body, receive), send)
        self.stats["answered"] += 1
        await answer.send(send)

    async def _join(self, slug: str, scope: Scope, raw: bytes, who: Who) -> Answer | None:
        """admission.api.queue's POST: batched with the drop's other joins, none of Django's request path."""
        await self._limiter().check(scope="queue", ip=_ip(scope), buyer_id=who.buyer_id)
        drop = await self._drop(slug)
        proof, challenge = header(scope, b"x-join-proof"), header(scope, b"x-join-challenge")
        body = await self.joins.join(drop, JoinRequest(who.buyer_id, who.bound_to, proof, challenge))
        headers: tuple[tuple[bytes, bytes], ...] = PRIVATE_HEADERS
        if ticket := body["queue_ticket"]:
            cookie = tokens.ticket_cookie(drop.slug, str(ticket))[tokens.TICKET_COOKIE]
            headers = (*headers, (b"set-cookie", cookie.OutputString().encode("latin-1")))
        self.stats["joins"] += 1
        return Answer(200, json.dumps(body).encode(), headers=headers, by=LANE)

    async def _reserve(self, slug: str, scope: Scope, raw: bytes, who: Who) -> Answer | None:
        body = parse_json_body(raw)
        drop = await self._drop(slug)
        if drop.redis_gate or drop.in_presale:
            return None  # the gate's count and give-back, and a presale's code spent, live on Django's path
        request = entry.ReserveRequest(
            slug=slug,
            buyer_id=who.buyer_id,
            client_ip=_ip(scope),
            quantity=body.get("quantity"),
            idempotency_key=header(scope, b"idempotency-key"),
            unit=body.get("unit"),
            admission_token=header(scope, b"x-admission-token"),
            variant=body.get("variant"),
            presale_code=body.get("presale_code"),
            discount_code=body.get("discount_code"),
        )
        for step in entry.steps(drop, request):  # sale.entry's sequence: the limit awaited, claims batched
            if isinstance(step, entry.Limit):
                await self._limiter().check(scope=step.scope, ip=step.ip, buyer_id=step.buyer_id)
                continue
            return await self._claim(drop, step, who)
        raise AssertionError("the reserve steps end with a claim")

    async def _claim(self, drop: Drop, step: entry.Claim, who: Who) -> Answer:
        # A discount code is spent by the single claim (its code row is a lock of its own).
        batched = step.unit is None and step.ask.discount_code is None
        result = await self.batcher.claim(drop, step.ask) if batched else None
        if isinstance(result, Unauthenticated):  # the account went away since it was cached
            self.credentials.forget(who)
        if isinstance(result, Reservation):  # new: built from the statements, no query
            return Answer(
                201, selectors.hold_answer(result.hold, units=result.units, new=True).dump_json(), by=LANE
            )
        if isinstance(result, FloodgateError):
            self._refused(drop, result)
        self.stats["single"] += 1  # left to the single claim (also every chosen seat and discount code)
        single = await self.workers.reserve(drop, step.ask, step.unit)
        if isinstance(single, FloodgateError):
            self._refused(drop, single)
        status, data = single
        return Answer(status, json.dumps(data).encode(), by=LANE)

    def _refused(self, drop: Drop, error: FloodgateError) -> NoReturn:
        if entry.sold_out_for_all(error):
            self._sold_out(drop)
        raise error

    def _sold_out(self, drop: Drop) -> None:
        """This process's edge says "sold out" from now on; the others hear it through Redis."""
        if self.on_sold_out is not None:
            try:
                self.on_sold_out(drop.slug)
            except Exception:  # a filter's trouble must not cost the buyer their answer
                log.exception("lane: could not flip the sold-out flag of %r", drop.slug)
        now = time.monotonic()
        if now - self._published.get(drop.pk, 0.0) >= 1.0:
            self._published[drop.pk] = now
            self.workers.publish_sold_out(drop)

    def _limiter(self) -> limits.Limiter:
        assert self._limits is not None, "made by _start"
        return self._limits

    async def _drop(self, slug: str) -> Drop:
        found = await self._drops.get(slug)
        if found is None:
            raise catalogue.unknown_drop(slug)
        return found

    def _spawn(self, work: Coroutine[None, None, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)  # the loop keeps only a weak reference to a running task
        task.add_done_callback(self._tasks.discard)

    # The process's life ------------------------------------------------------------------------

    def warm(self) -> None:
        """At process start: the worker threads and their database connections ready before the crowd."""
        self.workers.warm()

    def settle(self) -> None:
        """Wait for the worker threads' work in hand (tests: nothing of one test's may still be
        querying when the next one flushes the tables)."""
        self.workers.settle()

    def forget(self) -> None:
        """Drop the cached tokens, sessions and drop rows (tests; a server lets them age out)."""
        self.credentials.forget_all()
        self._drops.forget()

    def forget_tokens(self) -> None:
        """Drop every cached token and session. Safe from another thread."""
        self.credentials.forget_all()

    def forget_buyer(self, buyer_id: int) -> None:
        """Drop one buyer's cached tokens and sessions (theirs were revoked). Safe from another thread."""
        self.credentials.forget_buyer(buyer_id)

    def _start(self) -> None:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # clients and futures belong to the loop that made them
            self._loop = loop
            self.batcher.new_loop()
            self.joins.new_loop()
            self.credentials.new_loop()
            self._drops.new_loop()
            self._tasks = set()
            # A rush's first claims all check their rate limit at once: the checks go together
            # (limits.Limiter) over a few connections (the pool waits up to a second for one).
            self._limits = limits.Limiter(
                redis.client(
                    blocking=REDIS_CONNECTIONS, timeout=1, socket_timeout=1, socket_connect_timeout=1
                )
            )
        self.workers.start()


def _ip(scope: Scope) -> str:
    remote = (scope.get("client") or ("unknown", 0))[0]
    return clients.client_address(remote, header(scope, b"x-forwarded-for"))
