"""The claim lane: the reserve API answered without Django's request path, claims batched per drop.

It also takes the API's waiting-room joins (`POST /api/drops/<slug>/queue` with a bearer
token): the crowd joins in the seconds before a start, and each join is two or three short
statements on the lane's threads instead of Django's whole request path.

The admission edge hands it every `POST /api/drops/<slug>/holds` it did not refuse. The lane
checks what Django's view checks, in the same order and with the same answers, and gives the
claim to the arbiter:

- a bearer token is resolved through a per-process cache (AUTH_SECONDS; emptied when any
  buyer's credentials are revoked, admission.state.revoke), the tokens not
  cached yet together in one query (a crowd's first claims are all new tokens); the drop
  row through another (DROP_SECONDS: a stale row only refuses early, the claim statement
  checks the sale window itself);
- the admission token is a signature, the rate limit one asyncio Redis call;
- claims for one drop that arrive while its previous batch runs go to PostgreSQL together
  (holds.services.reserve_batch: one short transaction, one conditional claim statement);
  what a batch leaves undecided (a repeated key, a chosen seat, another bucket) goes to the
  single claim, `holds.services.reserve`, on the same worker threads;
- a claim waits for its batch while the queue ahead of it can be served within DEADLINE;
  beyond that the answer is 503 with Retry-After at once;
- the first "sold out" flips this process's edge flag at once and is published for the others.

A session is taken as core.api takes it (the drop page's buy button posts here with the
session cookie and its CSRF token): the session's user through another per-process cache
(SESSION_SECONDS), and Django's own CsrfViewMiddleware asked about the request.
Anything else (another Authorization scheme, no credentials, a drop with a Redis gate) goes
to Django with its body replayed, so every request gets an answer either way.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import threading
import time
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import import_module
from typing import NoReturn, TypeVar

import redis.asyncio as aioredis
from django.conf import settings
from django.contrib.auth import get_user
from django.core.exceptions import BadRequest, SuspiciousOperation
from django.core.handlers.asgi import ASGIRequest
from django.db import IntegrityError, OperationalError, close_old_connections, connection
from django.http import HttpRequest
from django.http.multipartparser import MultiPartParserError

from admission import limits, tokens
from admission import services as admission
from admission import state as snapshots
from catalogue import selectors as catalogue
from core import redis
from core.api import CSRF_FAILED, LOG_IN, MAX_BODY, TOO_LARGE, csrf_failure, parse_json_body
from core.asgi import PRIVATE_HEADERS, Answer, Message, Receive, Scope, Send, bearer, cookies, header
from core.errors import Busy, CsrfFailed, FloodgateError, NotFound, TooLarge, Unauthenticated
from holds import selectors, services
from holds.services import Ask, Reservation
from sale import entry
from shop.auth import users_of_tokens
from shop.models import Drop

log = logging.getLogger(__name__)
T = TypeVar("T")

# A token or session looked up is trusted this long; a revocation anywhere drops that buyer from every
# process's cache at once (admission.state.revoke -> the edge -> forget_buyer), and every claim statement
# needs the account active whatever is cached.
AUTH_SECONDS = 30.0
SESSION_SECONDS = 10.0  # a session logged out elsewhere still claims for at most this long
DROP_SECONDS = 1.0
DEADLINE = 0.2  # seconds a claim may wait for its batch before "busy" is the better answer
MAX_BATCH = 200
MAX_LOOKUPS = 500  # tokens resolved by one query
REDIS_CONNECTIONS = 8
MAX_WAITING = 4000  # per process, all drops: past this the queue could not be served in time
CACHE_SIZE = 100_000
BUSY = "The shop is very busy; try again in a second."
LANE = b"x-floodgate-lane"  # the header that says the lane answered

Pass = Callable[[Scope, Receive, Send], Awaitable[None]]
Work = Callable[[str, Scope, bytes, "Who"], Awaitable[Answer | None]]


@dataclass(frozen=True, slots=True)
class Who:
    """The buyer of a request and what signed it in (a queue ticket is bound to that)."""

    buyer_id: int
    bound_to: str
    token: str | None = None
    session: str | None = None


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


@dataclass
class Waiting:
    ask: Ask
    future: asyncio.Future[services.Answer]


class Lane:
    """One per web process; its batches run on a few worker threads with their own connections."""

    def __init__(self, *, on_sold_out: Callable[[str], None] | None = None, threads: int = 4) -> None:
        self.on_sold_out = on_sold_out
        self.stats: Counter[str] = Counter()  # answered, batches, batched, single, passed, busy
        self._threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._redis: aioredis.Redis | None = None
        self._users: dict[str, tuple[int | None, float]] = {}
        self._sessions: dict[str, tuple[int | None, float]] = {}
        # bumped by every forget: a lookup that read the database before it caches nothing
        self._generation = 0
        self._lookups: dict[str, asyncio.Future[int | None]] = {}  # tokens waiting for _resolve
        self._resolving = False
        self._drops: dict[str, tuple[Drop | None, float]] = {}
        self._queues: dict[int, list[Waiting]] = {}
        self._draining: set[int] = set()
        self._running_since: dict[int, float] = {}  # drop -> when its running batch started
        self._tasks: set[asyncio.Task[None]] = set()
        self._batch_seconds = 0.005  # moving average of one batch's time, for the deadline
        self._waiting = 0
        self._published: dict[int, float] = {}
        _lanes.add(self)

    async def __call__(self, slug: str, scope: Scope, receive: Receive, send: Send, django: Pass) -> None:
        """Answer one reserve request, or pass it to Django (its body replayed)."""
        await self._serve(self._reserve, slug, scope, receive, send, django)

    async def join(self, slug: str, scope: Scope, receive: Receive, send: Send, django: Pass) -> None:
        """Answer one waiting-room join (POST /api/drops/<slug>/queue), or pass it to Django."""
        await self._serve(self._join, slug, scope, receive, send, django)

    async def _serve(
        self, work: Work, slug: str, scope: Scope, receive: Receive, send: Send, django: Pass
    ) -> None:
        body, whole = await _read(receive)
        if body is None:
            return  # the client left before its request was whole: nothing to answer
        if not whole:
            return await Answer.error(TooLarge(TOO_LARGE), by=LANE).send(send)
        token = bearer(scope)
        session = None
        if token is None and header(scope, b"authorization") is None:
            session = cookies(scope).get(settings.SESSION_COOKIE_NAME) or None
        if token is None and session is None:  # no credentials, or another scheme: Django's answer
            self.stats["passed"] += 1
            return await django(scope, _replay(body, receive), send)
        who = None
        try:
            self._start()
            who = await self._who(scope, body, token=token, session=session)
            answer = await work(slug, scope, body, who)
        except IntegrityError:
            # The cached account or drop row is gone: forget both, and Django looks them up.
            if who is not None:
                self._forget(who)
            self._drops.pop(slug, None)
            answer = None
        except FloodgateError as error:
            answer = Answer.error(error, by=LANE)
        except (MultiPartParserError, SuspiciousOperation, BadRequest):
            # A form body the CSRF check could not read (malformed multipart, too many fields):
            # Django's own path gives its 400 for it.
            answer = None
        except OperationalError as error:  # as core.api: the database said "not now"
            log.warning("lane: database busy: %s", error)
            answer = Answer.error(Busy(BUSY), by=LANE)
        if answer is None:
            self.stats["passed"] += 1
            return await django(scope, _replay(body, receive), send)
        self.stats["answered"] += 1
        await answer.send(send)

    async def _who(self, scope: Scope, body: bytes, *, token: str | None, session: str | None) -> Who:
        """The buyer, as core.api finds them: the bearer token, else the session and its CSRF check."""
        if token is not None:
            buyer_id = await self._user(token)
            if buyer_id is None:
                raise Unauthenticated("That bearer token is not valid.")
            bound_to = tokens.credential(bearer=token, session_key=None)
            assert bound_to is not None  # a token was sent
            return Who(buyer_id, bound_to, token=token)
        assert session is not None
        buyer_id = await self._session_user(session)
        if buyer_id is None:
            raise Unauthenticated(LOG_IN)
        if csrf_failure(ASGIRequest(scope, io.BytesIO(body))) is not None:
            raise CsrfFailed(CSRF_FAILED)
        bound_to = tokens.credential(bearer=None, session_key=session)
        assert bound_to is not None
        return Who(buyer_id, bound_to, session=session)

    async def _join(self, slug: str, scope: Scope, raw: bytes, who: Who) -> Answer | None:
        """admission.api.queue's POST: the join's two or three statements, none of Django's request path."""
        assert self._redis is not None
        await limits.check_async(self._redis, scope="queue", ip=_ip(scope), buyer_id=who.buyer_id)
        drop = await self._drop(slug)
        proof = header(scope, b"x-join-proof")
        body = await self._in_thread(_join, drop, who.buyer_id, who.bound_to, proof)
        headers: tuple[tuple[bytes, bytes], ...] = PRIVATE_HEADERS
        if ticket := body["queue_ticket"]:
            cookie = tokens.ticket_cookie(drop.slug, str(ticket))[tokens.TICKET_COOKIE]
            headers = (*headers, (b"set-cookie", cookie.OutputString().encode("latin-1")))
        self.stats["joins"] += 1
        return Answer(200, json.dumps(body).encode(), headers=headers, by=LANE)

    async def _reserve(self, slug: str, scope: Scope, raw: bytes, who: Who) -> Answer | None:
        body = parse_json_body(raw)
        drop = await self._drop(slug)
        if drop.redis_gate:
            return None  # the gate's count and give-back live on Django's path
        request = entry.ReserveRequest(
            slug=slug,
            buyer_id=who.buyer_id,
            client_ip=_ip(scope),
            quantity=body.get("quantity"),
            idempotency_key=header(scope, b"idempotency-key"),
            unit=body.get("unit"),
            admission_token=header(scope, b"x-admission-token"),
        )
        for step in entry.steps(drop, request):  # sale.entry's sequence: the limit awaited, claims batched
            if isinstance(step, entry.Limit):
                assert self._redis is not None
                await limits.check_async(self._redis, scope=step.scope, ip=step.ip, buyer_id=step.buyer_id)
                continue
            return await self._claim(drop, step, who)
        raise AssertionError("the reserve steps end with a claim")

    async def _claim(self, drop: Drop, step: entry.Claim, who: Who) -> Answer:
        result = await self._batched(drop, step.ask) if step.unit is None else None
        if isinstance(result, Unauthenticated):  # the account went away since it was cached
            self._forget(who)
        if isinstance(result, Reservation):  # new: built from the statements, no query
            data = selectors.hold_json(result.hold, units=result.units, new=True)
            return Answer(201, json.dumps(data).encode(), by=LANE)
        if isinstance(result, FloodgateError):
            self._refused(drop, result)
        self.stats["single"] += 1  # left to the single claim (also every chosen seat)
        single = await self._in_thread(_single, drop, step.ask, step.unit)
        if isinstance(single, FloodgateError):
            self._refused(drop, single)
        status, data = single
        return Answer(status, json.dumps(data).encode(), by=LANE)

    def _refused(self, drop: Drop, error: FloodgateError) -> NoReturn:
        if entry.sold_out_for_all(error):
            self._sold_out(drop)
        raise error

    # Batches -------------------------------------------------------------------------------

    async def _batched(self, drop: Drop, ask: Ask) -> services.Answer:
        queue = self._queues.setdefault(drop.pk, [])
        if self._waiting >= MAX_WAITING or self._expected_wait(drop.pk, len(queue)) > DEADLINE:
            self.stats["busy"] += 1
            raise Busy(BUSY)
        waiting = Waiting(ask, asyncio.get_running_loop().create_future())
        queue.append(waiting)
        self._waiting += 1
        if drop.pk not in self._draining:
            self._draining.add(drop.pk)
            self._spawn(self._drain(drop))
        try:
            return await asyncio.shield(waiting.future)  # a client gone does not cancel the batch
        finally:
            self._waiting -= 1

    def _expected_wait(self, drop_id: int, queued: int) -> float:
        """Seconds until a claim joining now is answered: nothing runs, it goes at once; else
        the rest of the running batch (one that has run long is taken to run as long again),
        then one batch per MAX_BATCH claims queued ahead, and its own."""
        started = self._running_since.get(drop_id)
        if started is None:
            return 0.0
        running = time.monotonic() - started
        per_batch = max(self._batch_seconds, running)
        return max(per_batch - running, running) + per_batch * (queued // MAX_BATCH + 1)

    async def _drain(self, drop: Drop) -> None:
        """Run the drop's batches one after another while claims keep coming."""
        try:
            while queue := self._queues.pop(drop.pk, None):
                batch, rest = queue[:MAX_BATCH], queue[MAX_BATCH:]
                if rest:
                    self._queues[drop.pk] = rest
                started = self._running_since[drop.pk] = time.monotonic()
                try:
                    answers = await self._in_thread(_batch, drop, [w.ask for w in batch])
                except IntegrityError:
                    # A cached row gone since (a deleted account or drop): the whole batch rolled
                    # back. Each claim goes alone, so only the stale one fails (and reaches Django).
                    answers = [None] * len(batch)
                except BaseException as error:
                    for waiting in batch:
                        if not waiting.future.done():
                            waiting.future.set_exception(error)
                    if not isinstance(error, Exception):
                        raise
                    continue
                self._batch_seconds = 0.8 * self._batch_seconds + 0.2 * (time.monotonic() - started)
                self.stats["batches"] += 1
                self.stats["batched"] += len(batch)
                for waiting, answer in zip(batch, answers, strict=True):
                    if not waiting.future.done():
                        waiting.future.set_result(answer)
                gone = next((a for a in answers if entry.sold_out_for_all(a)), None)
                if gone is not None:
                    # Nothing left at all: the claims queued meanwhile hear it now, as the edge
                    # answers those arriving from now on, instead of waiting a batch to learn it.
                    for waiting in self._queues.pop(drop.pk, []):
                        if not waiting.future.done():
                            waiting.future.set_result(gone)
        finally:
            self._draining.discard(drop.pk)
            self._running_since.pop(drop.pk, None)

    def _spawn(self, work: Coroutine[None, None, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)  # the loop keeps only a weak reference to a running task
        task.add_done_callback(self._tasks.discard)

    # Caches ---------------------------------------------------------------------------------

    async def buyer_of(self, token: str) -> int | None:
        """Whose bearer token this is, from the token cache (the edge answers their polls by it)."""
        self._start()
        return await self._user(token)

    async def _user(self, token: str) -> int | None:
        found = self._users.get(token)
        if found is not None and found[1] >= time.monotonic():
            return found[0]
        pending = self._lookups.get(token)
        if pending is None:
            pending = self._lookups[token] = asyncio.get_running_loop().create_future()
            if not self._resolving:
                self._resolving = True
                self._spawn(self._resolve())
        return await asyncio.shield(pending)

    async def _resolve(self) -> None:
        """Tokens not cached yet, resolved together: the first alone at once, then whatever
        arrived meanwhile in one query (a crowd's first claims are all new tokens)."""
        try:
            while self._lookups:
                batch = dict(list(self._lookups.items())[:MAX_LOOKUPS])
                for token in batch:
                    del self._lookups[token]
                generation = self._generation
                try:
                    found = await self._in_thread(_user_ids, list(batch))
                except Exception as error:
                    for future in batch.values():
                        if not future.done():
                            future.set_exception(error)
                    continue
                assert isinstance(found, dict)
                now = time.monotonic()
                if len(self._users) + len(batch) > CACHE_SIZE:
                    self._users.clear()
                for token, future in batch.items():
                    user_id = found.get(token)
                    # An unknown token is remembered briefly too: a flood of it costs one query.
                    if generation == self._generation:  # else read before a revocation: not kept
                        self._users[token] = (
                            user_id,
                            now + (AUTH_SECONDS if user_id is not None else DROP_SECONDS),
                        )
                    if not future.done():
                        future.set_result(user_id)
        finally:
            self._resolving = False

    async def _session_user(self, session: str) -> int | None:
        now = time.monotonic()
        found = self._sessions.get(session)
        if found is None or found[1] < now:
            if len(self._sessions) >= CACHE_SIZE:
                self._sessions.clear()
            generation = self._generation
            user_id = await self._in_thread(_session_user_id, session)
            found = (user_id, now + (SESSION_SECONDS if user_id is not None else DROP_SECONDS))
            if generation == self._generation:  # else read before a revocation: not kept
                self._sessions[session] = found
        return found[0]

    def _forget(self, who: Who) -> None:
        if who.token is not None:
            self._users.pop(who.token, None)
        if who.session is not None:
            self._sessions.pop(who.session, None)

    async def _drop(self, slug: str) -> Drop:
        now = time.monotonic()
        found = self._drops.get(slug)
        if found is None or found[1] < now:
            if len(self._drops) >= CACHE_SIZE:
                self._drops.clear()
            found = (await self._in_thread(_drop_row, slug), now + DROP_SECONDS)
            self._drops[slug] = found
        if found[0] is None:
            raise catalogue.unknown_drop(slug)
        return found[0]

    def settle(self) -> None:
        """Wait for the worker threads' work in hand; a new pool starts on next use (tests: nothing
        of one test's may still be querying when the next one flushes the tables)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def forget(self) -> None:
        """Drop the cached tokens and drop rows (tests; a server lets them age out)."""
        self._users.clear()
        self._sessions.clear()
        self._drops.clear()

    def forget_tokens(self) -> None:
        """Drop every cached token and session. Safe from another thread: one dict swap each."""
        self._generation += 1
        self._users = {}
        self._sessions = {}

    def forget_buyer(self, buyer_id: int) -> None:
        """Drop one buyer's cached tokens and sessions (theirs were revoked); the rest stay cached.
        Safe from another thread: list() copies a dict under the GIL, then one swap each (an entry
        cached meanwhile may be dropped too, and is looked up again)."""
        self._generation += 1
        self._users = {k: v for k, v in list(self._users.items()) if v[0] != buyer_id}
        self._sessions = {k: v for k, v in list(self._sessions.items()) if v[0] != buyer_id}

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
            asyncio.get_running_loop().run_in_executor(self._pool, _job, _publish_sold_out, drop)

    def warm(self) -> None:
        """At process start: the worker threads and their database connections ready before
        the crowd (a cold thread's first query waits for a new backend to fork)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="claim-lane")
        ready = threading.Barrier(self._threads, timeout=10)  # one job per thread, all started
        for _ in range(self._threads):
            self._pool.submit(_warm, ready)

    def _start(self) -> None:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # clients and futures belong to the loop that made them
            self._loop = loop
            self._queues, self._draining, self._running_since, self._waiting = {}, set(), {}, 0
            self._lookups, self._resolving = {}, False
            self._tasks = set()
            # A rush's first claims all check their rate limit at once: they share a few
            # connections instead of each opening its own (the pool waits up to a second).
            self._redis = redis.client(
                blocking=REDIS_CONNECTIONS, timeout=1, socket_timeout=1, socket_connect_timeout=1
            )
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="claim-lane")

    async def _in_thread(self, work: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, _job, work, *args)


# On the worker threads. Each job takes a connection from the process's pool and gives it back
# when it ends (`_job`): a thread that kept one would hold it out of the pool for good once the
# thread is gone (a settled lane, a restarted loop), and the pool would run dry.


def _job(work: Callable[..., T], *args: object) -> T:
    close_old_connections()
    try:
        return work(*args)
    finally:
        connection.close()  # back to the pool (CONN_MAX_AGE is 0: nothing is kept per thread)


def _batch(drop: Drop, asks: list[Ask]) -> list[services.Answer]:
    return services.reserve_batch(drop=drop, asks=asks)


def _single(drop: Drop, ask: Ask, unit: str | None) -> tuple[int, dict[str, object]] | FloodgateError:
    """The single claim and its answer's body (a repeated key's hold is read here, off the loop)."""
    try:
        result = services.reserve(
            drop=drop, buyer_id=ask.buyer_id, quantity=ask.quantity, idempotency_key=ask.key, unit=unit
        )
    except FloodgateError as error:
        return error
    data = selectors.hold_json(result.hold, units=result.units, new=result.created)
    return (201 if result.created else 200), data


def _warm(ready: threading.Barrier) -> None:
    """One per thread: all of them started, and the pool filled to its minimum meanwhile."""
    try:
        ready.wait()
        connection.ensure_connection()
    except Exception as error:  # a database not up yet: the first claim connects instead
        log.warning("lane: could not warm a worker thread: %s", error)
    finally:
        connection.close()


def _join(drop: Drop, buyer_id: int, bound_to: str, proof: str | None) -> dict[str, object]:
    place = admission.join(drop=drop, buyer_id=buyer_id, proof=proof)
    return {**place.as_json(), "queue_ticket": admission.queue_ticket(place, bound_to=bound_to)}


def _user_ids(tokens: list[str]) -> dict[str, int]:
    return users_of_tokens(tokens)


def _session_user_id(session_key: str) -> int | None:
    """The session's user as AuthenticationMiddleware finds them (backend, password hash checked)."""
    request = HttpRequest()
    request.session = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    user = get_user(request)
    return user.pk if user.is_authenticated else None


def _drop_row(slug: str) -> Drop | None:
    try:
        return catalogue.drop_for_claim(slug=slug)
    except NotFound:
        return None


def _publish_sold_out(drop: Drop) -> None:
    try:
        snapshots.note_sold_out(drop)
    except Exception:  # the tick publishes within a second anyway
        log.warning("lane: could not publish the sold-out of drop %s", drop.pk, exc_info=True)


# HTTP ---------------------------------------------------------------------------------------


async def _read(receive: Receive) -> tuple[bytes | None, bool]:
    """The request body (None: the client left), and False when it is longer than any
    reserve body may be."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None, True
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            return b"", False
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), True


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body once more for Django, then the server's own messages (a disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _ip(scope: Scope) -> str:
    remote = (scope.get("client") or ("unknown", 0))[0]
    return limits.address(remote, header(scope, b"x-forwarded-for"))
