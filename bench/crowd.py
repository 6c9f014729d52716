"""bench crowd: an HTTP crowd against the production shape, measured as the crowd lives it.

    python3 floodgate.py bench crowd            # the four scenarios at full size
    python3 floodgate.py bench crowd --quick    # 500 buyers each: a smoke run
    python3 floodgate.py bench crowd --only 3   # one scenario (repeatable)
    python3 floodgate.py bench crowd --sweep    # how the costs grow with crowd and drops: bench/sweep.py

The store runs as in production: web processes serving config.asgi:application (production
profile, DEBUG off), a Celery worker and beat, PostgreSQL and Redis. The crowd is aiohttp
in one asyncio process (`--clients K` splits it), with a connection limit equal to the
requests in flight, one request per buyer, retrying 503/429 after Retry-After. The same
client against a bare ASGI callable (bench/_bare.py), served the same way, gives the
client's own ceiling in the same run.

Scenarios (each a fresh drop of 100 units, `--units` to change, each buyer an account with a bearer token):
1. 2,000 buyers, 128 in flight, buckets mode, 1 stock row;
2. 5,000 buyers, 256 in flight, units mode (seats);
3. waiting room, polling: join before the start, poll the queue every ~2 s, reserve with the
   admission token once admitted (beat's admission.tick runs the waves);
4. waiting room over the WebSocket, as static/js/queue.js runs it;
5. scenario 3 by a client that ignores the optional X-Queue-Ticket (its bearer token only).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import errno
import functools
import json
import os
import random
import resource
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devtools.ports import free_port, wait_for_port

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
BIN = Path(sys.executable).parent
SLUG_PREFIX = "crowd-"
APP = "config.asgi:application"
BARE_APP = "bench._bare:app"
QUANTITY = 100
BODY = b'{"quantity": 1}'

MAX_TRIES = 30  # per request of a buyer: 503/429/connection errors, then the buyer gives up
REQUEST_TIMEOUT = 30.0  # seconds, one request
ROOM_SECONDS = 60.0  # a waiting room scenario stops waiting this long after the start
RESERVE_GRACE = 15.0  # seconds past that deadline an admitted buyer may still reserve
WS_TRIES = 6  # WebSocket opens per buyer (the page retries with backoff)
# static/js/queue.js: how the page spreads its asks after a broadcast, and its backoff.
PAGE_POLL = 4.0
ASKS_PER_SECOND, SPREAD_MIN, SPREAD_MAX = 5000, 0.1, 5.0  # static/js/queue.js's spread()
# ... and its later ask for the exact number of a page its key told it is unlikely to get a unit
LATER_DELAY, LATER_ASKS_PER_SECOND, LATER_SPREAD_MAX = 5.0, 1000, 60.0
BACKOFF_MIN, BACKOFF_MAX = 0.5, 15.0
POLL_EVERY = 2.0  # scenario 3's pollers, +-25% jitter
OPEN_BEFORE = 1.0  # seconds before the start a rush opens its connections (--open-early)
ROOM_DONE = {"all_held", "sold_out", "closed"}  # with nothing left: a waiting buyer's final "no"
LINE_TOLD = {"unlikely", *ROOM_DONE}  # scenario 7: a loser told, whatever is left
LINES = {"line", "line_sale"}  # the whole line joins in one rush before the start
ROUND_DUE = "the draw's drand round due, after the start (the draw waits for it)"


@dataclass(frozen=True)
class Scenario:
    number: int
    title: str
    buyers: int
    in_flight: int
    mode: str = "buckets"  # buckets | units
    room: str = ""  # "" | poll | ws | line (joins only: the line, its draw and its snapshot) | line_sale
    ticket: bool = True  # pollers send X-Queue-Ticket; False: only their bearer token, as the contract allows
    units: int = QUANTITY  # the drop's stock; the run must sell exactly this many


def scenarios(quick: bool, units: int = QUANTITY) -> list[Scenario]:
    n = 500 if quick else 0
    return [
        Scenario(1, "buckets, 1 stock row", n or 2000, 128, units=units),
        Scenario(2, "units (seats)", n or 5000, 256 if not quick else 128, mode="units", units=units),
        Scenario(3, "waiting room, polling", n or 2000, 128, room="poll", units=units),
        Scenario(4, "waiting room, WebSocket", n or 2000, 128, room="ws", units=units),
        Scenario(
            5,
            "waiting room, polling, bearer token only",
            n or 2000,
            128,
            room="poll",
            ticket=False,
            units=units,
        ),
        # Issue 26's line: 50,000 join before the start of a 1,000-unit drop (nobody buys here).
        Scenario(
            6,
            "waiting room, a line of 50,000 joining",
            2000 if quick else 50000,
            256,
            room="line",
            units=1000,
        ),
        # The same line through its sale: told of the draw by the push, each page asks, the first
        # wave buys, the rest are told they are unlikely (or sold out).
        Scenario(
            7,
            "waiting room, a line of 50,000 through the sale",
            2000 if quick else 50000,
            256,
            room="line_sale",
            units=1000,
        ),
    ]


def say(message: str) -> None:
    print(f"bench crowd: {message}", file=sys.stderr, flush=True)


def spread(askers: object) -> float:
    """Seconds within which pages told the same news ask the queue API (static/js/queue.js)."""
    count = askers if isinstance(askers, int) else 0
    return min(SPREAD_MAX, max(SPREAD_MIN, count / ASKS_PER_SECOND))


def later(askers: object) -> float:
    """When a page told "unlikely" by its key asks for its number (static/js/queue.js)."""
    count = askers if isinstance(askers, int) else 0
    window = min(LATER_SPREAD_MAX, max(SPREAD_MIN, count / LATER_ASKS_PER_SECOND))
    return LATER_DELAY + random.random() * window


def side_by_key(msg: dict[str, Any], entry: int | None) -> str:
    """Where an early joiner's draw key falls against the broadcast's cut entries, as the page
    finds it (static/js/queue.js, placeByKey): "in", "unlikely", "between", or "" (no cuts)."""
    from admission.draw import entry_key

    seed, listed = msg.get("seed"), msg.get("entries_sha256")
    admitted, unlikely = msg.get("admitted_entry"), msg.get("unlikely_entry")
    if entry is None or not (isinstance(seed, str) and isinstance(listed, str) and (admitted or unlikely)):
        return ""
    beacon = msg.get("beacon") or ""
    own = entry_key(seed, listed, beacon, entry)
    if admitted and own <= entry_key(seed, listed, beacon, admitted):
        return "in"
    if unlikely and own >= entry_key(seed, listed, beacon, unlikely):
        return "unlikely"
    return "between"


def raise_file_limit() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def production_env() -> dict[str, str]:
    """The production profile (devstack sets dev for the bench), as a deployment behind a TLS proxy.

    The client plays the proxy: X-Forwarded-Proto https and one X-Forwarded-For address per
    buyer, so the per-address limits see a crowd of addresses, not one.
    """
    return {
        "FLOODGATE_PROFILE": "production",
        "DEBUG": "0",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "SECRET_KEY": os.environ.get("CROWD_SECRET_KEY") or secrets.token_urlsafe(40),
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "TRUST_X_FORWARDED_FOR": "1",
        "WS_SOCKETS_PER_ADDRESS": "1000000",  # the crowd's sockets all come from this machine
        "PUBLIC_BASE_URL": "https://127.0.0.1",
        "PAYMENT_PROVIDER_URL": "http://127.0.0.1:8701",
        # a rehearsal: made-up buyers pay with the simulator, which production refuses otherwise
        "ALLOW_SIMULATED_PAYMENTS_FOR_REHEARSAL": "1",
        "PAYMENT_PROVIDER_SECRET": "bench-crowd-provider",
        "PAYMENT_WEBHOOK_SECRET": "bench-crowd-webhook",
        "EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend",  # nothing is mailed here
        "LOG_LEVEL": "WARNING",
    }


# The client (child processes) ---------------------------------------------------------------


async def guarded(job: Callable[[Buyer, str], Awaitable[None]], buyer: Buyer, token: str) -> None:
    """One buyer's bug (a client one) is that buyer's error, not the end of the whole crowd."""
    try:
        await job(buyer, token)
    except Exception as error:
        buyer.errors += 1
        say(f"buyer {buyer.index}: client error {type(error).__name__}: {error}")


def finished(buyer: Buyer) -> bool:
    """A final answer, or a reserve under way (admitted)."""
    return bool(buyer.status or buyer.admitted_seen)


def done_waiting(place: dict[str, Any]) -> bool:
    """Nothing left to wait for: the line says all held, sold out or closed, with none remaining."""
    return place.get("state") in ROOM_DONE and not place.get("remaining")


@dataclass
class Buyer:
    """One buyer's journey as the client saw it; times are epoch seconds."""

    index: int
    requests: int = 0  # HTTP requests sent (polls and retries included)
    retries: int = 0  # 503 and 429 answers
    errors: int = 0  # connection trouble and unexpected answers
    status: int = 0  # the final answer's status (0: gave up, or never got one)
    code: str = ""
    first: float = 0.0  # first request of the buyer's reserve (or of the crowd phase)
    final: float = 0.0  # when the final answer came
    latency: float = 0.0  # of the request that got the final answer
    admitted_seen: float = 0.0  # the ask that brought the admission token
    joined: bool = False
    join_latency: float = 0.0
    ticket: int | None = None  # the waiting room's number, once drawn
    entry: int | None = None  # the waiting room's entry (what the draw sorts)
    mark: int = 0  # the admitted-through mark last pushed to this page
    queue_ticket: str | None = None  # the signed ticket the join (and each Django answer) gives
    handshakes: list[float] = field(default_factory=list)  # seconds, each successful open
    ws_failed: int = 0
    ws_errors: list[str] = field(default_factory=list)  # why each failed try failed
    ws_opened: bool = False
    drawn_seen: float = 0.0  # scenario 7: the drawn broadcast reached this buyer's page
    told: float = 0.0  # scenario 7: the first answer that said admitted, unlikely or sold out
    told_state: str = ""  # ... and what it said ("admitted", or the line's state)
    numbered: float = 0.0  # scenario 7: the page learned its exact number


class Client:
    """The crowd of one child process: requests, retries and what each buyer saw."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.bases: list[str] = spec["bases"]
        # Several drops live at once (bench/sweep.py): buyer i is in drop i // per_drop's crowd,
        # and each crowd has its own in-flight limit, as independent crowds would.
        self.slugs: list[str] = spec.get("slugs") or [spec["slug"]]
        self.per_drop: int = spec.get("per_drop") or sys.maxsize
        self.gates = [asyncio.Semaphore(spec["in_flight"]) for _ in self.slugs]
        self.deadline: float = spec["deadline"]  # epoch: nothing is sent after it
        self.session: Any = None
        self.ws_session: Any = None

    def base(self, i: int) -> str:
        return self.bases[i % len(self.bases)]  # one port per server process group: spread over all

    def drop(self, i: int) -> int:
        return min(i // self.per_drop, len(self.slugs) - 1)

    def slug(self, i: int) -> str:
        return self.slugs[self.drop(i)]

    def headers(self, i: int, token: str) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "X-Forwarded-For": f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}",
            "X-Forwarded-Proto": "https",
        }

    async def request(
        self, i: int, method: str, url: str, headers: dict[str, str], body: bytes | None
    ) -> tuple[int, dict[str, Any], float, float]:
        """(status, JSON body, latency, Retry-After) of buyer i's request, in its crowd's in-flight limit."""
        async with self.gates[self.drop(i)]:
            began = time.perf_counter()
            async with self.session.request(method, url, headers=headers, data=body) as response:
                raw = await response.read()
            latency = time.perf_counter() - began
        try:
            payload = json.loads(raw) if raw else {}
        except ValueError:
            payload = {}
        try:
            wait = float(response.headers.get("Retry-After", "1"))
        except ValueError:
            wait = 1.0
        return response.status, payload if isinstance(payload, dict) else {}, latency, wait

    async def call(
        self,
        buyer: Buyer,
        method: str,
        url: str,
        headers: dict[str, str],
        body: bytes | None = None,
        *,
        grace: float = 0.0,
    ) -> tuple[int, dict[str, Any], float] | None:
        """A request retried like a real client: after Retry-After on 503/429, 1 s on trouble."""
        import aiohttp

        for _ in range(MAX_TRIES):
            if time.time() > self.deadline + grace:
                return None
            try:
                buyer.requests += 1
                status, payload, latency, wait = await self.request(buyer.index, method, url, headers, body)
            except (aiohttp.ClientError, TimeoutError, OSError):
                buyer.errors += 1
                await asyncio.sleep(1.0)
                continue
            if status in (429, 503):
                buyer.retries += 1
                await asyncio.sleep(min(max(wait, 0.0), 10.0))
                continue
            return status, payload, latency
        return None

    async def reserve(self, buyer: Buyer, token: str, admission: str | None = None) -> None:
        headers = self.headers(buyer.index, token) | {"Idempotency-Key": str(uuid.uuid4())}
        if admission:
            headers["X-Admission-Token"] = admission
        url = f"{self.base(buyer.index)}/api/drops/{self.slug(buyer.index)}/holds"
        if not buyer.first:
            buyer.first = time.time()
        # An admitted buyer still reserves a little past the deadline: the waiting stops, not the buying.
        got = await self.call(buyer, "POST", url, headers, BODY, grace=RESERVE_GRACE)
        if got is None:
            return
        status, payload, latency = got
        buyer.status, buyer.code, buyer.latency, buyer.final = (
            status,
            payload.get("error", ""),
            latency,
            time.time(),
        )
        if status >= 500 or status in (400, 401, 422):
            buyer.errors += 1  # not an answer a buyer of this bench should get

    # Scenarios 1, 2 and the ceiling: everyone reserves at the start ---------------------------

    async def rush(self, buyers: list[Buyer], tokens: list[str]) -> None:
        if self.spec.get("open_early"):
            await asyncio.sleep(max(0.0, self.spec["start_at"] - OPEN_BEFORE - time.time()))
            await self.open_connections()
        await asyncio.sleep(max(0.0, self.spec["start_at"] - time.time()))
        await asyncio.gather(*(self.reserve(b, t) for b, t in zip(buyers, tokens, strict=True)))

    async def open_connections(self) -> None:
        """Before the start, each connection of the in-flight limit reads the drop's state once,
        as the buyers' pages did while counting down: the rush then finds them open (kept alive),
        as a crowd's browsers would, instead of this one process opening them all in its first
        instant. Nothing is measured here."""

        async def read(d: int, j: int) -> None:
            url = f"{self.bases[j % len(self.bases)]}/api/drops/{self.slugs[d]}"
            with contextlib.suppress(Exception):
                async with self.gates[d], self.session.get(url) as response:
                    await response.read()

        limit = self.spec["in_flight"]
        await asyncio.gather(*(read(d, j) for d in range(len(self.slugs)) for j in range(limit)))

    # Scenario 3: join, then poll the queue until admitted ------------------------------------

    async def join(self, buyer: Buyer, token: str) -> dict[str, Any] | None:
        url = f"{self.base(buyer.index)}/api/drops/{self.slug(buyer.index)}/queue"
        got = await self.call(buyer, "POST", url, self.headers(buyer.index, token), b"")
        if got is None or got[0] != 200:
            buyer.errors += 1
            return None
        buyer.joined = True
        buyer.join_latency = got[2]
        buyer.entry = got[1].get("entry")
        buyer.ticket = got[1].get("ticket")  # a number already: joined after the list closed
        buyer.queue_ticket = got[1].get("queue_ticket") or buyer.queue_ticket
        return got[1]

    async def ask(self, buyer: Buyer, token: str) -> dict[str, Any] | None:
        """GET the queue API: the buyer's place, and the admission token once admitted."""
        url = f"{self.base(buyer.index)}/api/drops/{self.slug(buyer.index)}/queue"
        headers = self.headers(buyer.index, token)
        if buyer.queue_ticket and self.spec.get("ticket", True):  # as the page's cookie carries it
            headers["X-Queue-Ticket"] = buyer.queue_ticket
        got = await self.call(buyer, "GET", url, headers)
        if got is None:
            return None
        status, payload, latency = got
        buyer.queue_ticket = payload.get("queue_ticket") or buyer.queue_ticket
        if status != 200:
            buyer.errors += 1
            return None
        if payload.get("admission_token") is None and done_waiting(payload):
            buyer.status, buyer.code, buyer.latency, buyer.final = (
                status,
                payload["state"],
                latency,
                time.time(),
            )
        return payload

    async def arrive(self) -> None:
        """Buyers arrive over the join window before the start, not all in the same instant."""
        await asyncio.sleep(random.random() * self.spec["arrivals"])

    async def joiner(self, buyer: Buyer, token: str) -> None:
        """Scenario 6: join the line before the start, and only that (its answer is the final one)."""
        await self.arrive()
        buyer.first = time.time()
        place = await self.join(buyer, token)
        if place is not None:
            buyer.status, buyer.code, buyer.final = 200, "joined", time.time()
            buyer.latency = buyer.join_latency

    async def poller(self, buyer: Buyer, token: str) -> None:
        await self.arrive()
        if await self.join(buyer, token) is None:
            return
        while time.time() < self.deadline:
            await asyncio.sleep(POLL_EVERY * random.uniform(0.75, 1.25))
            if time.time() >= self.spec["start_at"] and not buyer.first:
                buyer.first = time.time()  # the crowd phase starts at the drop's start
            place = await self.ask(buyer, token)
            if place is None:
                if buyer.status or time.time() >= self.deadline:
                    return
                continue
            if place.get("admission_token"):
                buyer.admitted_seen = time.time()
                await self.reserve(buyer, token, place["admission_token"])
                return
            if buyer.status:  # nothing left to wait for
                return

    # Scenario 7: the line through its sale ---------------------------------------------------

    async def watch_draw(self, drawn: asyncio.Future[dict[str, Any]]) -> None:
        """One socket for this process's pages: the drawn broadcast is one message to every page
        (the fan-out to many sockets is `bench queue`'s), so each buyer learns of it from here."""
        url = self.base(0).replace("http://", "ws://") + f"/ws/drops/{self.slugs[0]}/queue/"
        try:
            async with self.ws_session.ws_connect(url, origin="https://127.0.0.1", heartbeat=None) as ws:
                while time.time() < self.deadline:
                    message = await ws.receive(timeout=max(0.1, self.deadline - time.time()))
                    if message.type != 1:  # aiohttp.WSMsgType.TEXT
                        break
                    msg = json.loads(message.data)
                    if msg.get("seed"):
                        drawn.set_result(msg)
                        return
        except Exception as error:  # the pages poll instead: the figures say so (drawn_seen)
            say(f"scenario 7: the draw watcher's socket failed: {type(error).__name__}: {error}")
        if not drawn.done():
            drawn.set_result({})

    async def line_buyer(self, buyer: Buyer, token: str, drawn: asyncio.Future[dict[str, Any]]) -> None:
        """Join in the rush; told of the draw, place the page by its draw key as the page does:
        in, ask within the wave's spread; between, within the spread of those between; unlikely,
        told at once and ask for the exact number later. Then reserve once admitted, stop once
        told unlikely or sold out (the page sits on its socket then), and poll while still
        waiting for a wave."""
        await self.arrive()
        if await self.join(buyer, token) is None:
            return
        msg = await drawn
        if msg:
            buyer.drawn_seen = time.time()
        buyer.first = time.time()
        side = side_by_key(msg, buyer.entry) if buyer.ticket is None else ""  # a late joiner has its number
        mark = int(msg.get("admitted_through") or 0)
        if side == "unlikely":
            buyer.told, buyer.told_state = time.time(), "unlikely"
            buyer.status, buyer.code, buyer.final = 200, "unlikely", time.time()
            await asyncio.sleep(later(msg.get("last_ticket")))
            while time.time() < self.deadline:
                place = await self.ask(buyer, token)
                if place is not None and place.get("ticket") is not None:
                    buyer.numbered = time.time()
                    return
                await asyncio.sleep(PAGE_POLL)
            return
        between = int(msg.get("unlikely_from") or msg.get("last_ticket") or 0) - mark
        askers = mark if side == "in" else between if side == "between" else msg.get("last_ticket")
        await asyncio.sleep(random.random() * spread(askers))
        while time.time() < self.deadline:
            place = await self.ask(buyer, token)
            if place is not None and place.get("ticket") is not None:
                buyer.numbered = buyer.numbered or time.time()
                told = (
                    "admitted"
                    if place.get("admission_token")
                    else "unlikely"
                    if place.get("unlikely")
                    else str(place.get("state"))
                    if done_waiting(place)
                    else "waiting"
                )
                if not buyer.told and (told == "admitted" or told in LINE_TOLD):
                    buyer.told, buyer.told_state = time.time(), told
                if told in LINE_TOLD and not buyer.status:
                    buyer.status, buyer.code, buyer.final = 200, told, time.time()
                if buyer.status or await self.on_place(buyer, token, place):
                    return
            await asyncio.sleep(POLL_EVERY * random.uniform(0.75, 1.25))

    # Scenario 4: join, then follow the WebSocket as the page does ----------------------------

    async def page(self, buyer: Buyer, token: str) -> None:
        import aiohttp

        await self.arrive()
        place = await self.join(buyer, token)
        if place is None:
            return
        buyer.ticket = place.get("ticket")
        ws_url = (
            self.base(buyer.index).replace("http://", "ws://") + f"/ws/drops/{self.slug(buyer.index)}/queue/"
        )
        origin = "https://127.0.0.1"  # the page's origin behind the TLS proxy
        down, stop = asyncio.Event(), asyncio.Event()
        poller = asyncio.create_task(self.poll_while_down(buyer, token, down, stop))
        backoff = BACKOFF_MIN
        try:
            for _ in range(WS_TRIES):
                if finished(buyer) or time.time() >= self.deadline:
                    return
                began = time.perf_counter()
                try:
                    ws = await asyncio.wait_for(
                        self.ws_session.ws_connect(ws_url, origin=origin, heartbeat=None), REQUEST_TIMEOUT
                    )
                except (aiohttp.ClientError, TimeoutError, OSError) as error:
                    buyer.ws_failed += 1
                    # An HTTP status, or the errno (a reset: the server dropped the handshake).
                    code = getattr(error, "status", None) or errno.errorcode.get(
                        getattr(error, "errno", 0) or 0
                    )
                    buyer.ws_errors.append(type(error).__name__ + (f" {code}" if code else ""))
                else:
                    buyer.handshakes.append(time.perf_counter() - began)
                    buyer.ws_opened = True
                    backoff = BACKOFF_MIN
                    down.clear()
                    try:
                        if await self.follow(buyer, token, ws):
                            return
                    finally:
                        with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
                            await ws.close()
                down.set()
                # Jittered backoff: thousands of pages must not come back in step.
                await asyncio.sleep(backoff / 2 + random.random() * backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)
            await poller  # out of tries: the page goes on polling
        finally:
            stop.set()  # the poller ends after what it is doing (a reserve runs to its answer)
            await poller

    async def poll_while_down(
        self, buyer: Buyer, token: str, down: asyncio.Event, stop: asyncio.Event
    ) -> None:
        """While the socket is down the page polls the queue API every 4 s (static/js/queue.js)."""
        while not stop.is_set() and time.time() < self.deadline:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), PAGE_POLL)
            if stop.is_set() or not down.is_set() or finished(buyer):
                continue
            place = await self.ask(buyer, token)
            if place is not None and await self.on_place(buyer, token, place):
                return

    async def follow(self, buyer: Buyer, token: str, ws: Any) -> bool:
        """Read pushed marks until this buyer is done (True) or the socket closes (False)."""
        import aiohttp

        while time.time() < self.deadline and not finished(buyer):
            try:
                message = await ws.receive(timeout=1.0)  # then look whether the poller finished
            except TimeoutError:
                continue
            except (aiohttp.ClientError, OSError):
                return False  # reset under us (a pong to a closing socket): the page reconnects
            if message.type != aiohttp.WSMsgType.TEXT:
                return False
            msg = json.loads(message.data)
            if not isinstance(msg.get("admitted_through"), int):
                continue
            if time.time() >= self.spec["start_at"] and not buyer.first:
                buyer.first = time.time()
            jump_from, buyer.mark = buyer.mark, max(buyer.mark, msg["admitted_through"])
            if buyer.ticket is None:
                if not msg.get("seed"):
                    continue  # before the draw the page knows only its entry
                await asyncio.sleep(random.random() * spread(msg.get("last_ticket")))
            elif msg["admitted_through"] < buyer.ticket:
                if done_waiting(msg):
                    buyer.status, buyer.code, buyer.final = 200, msg["state"], time.time()
                    return True
                continue
            else:
                jump = msg["admitted_through"] - jump_from
                await asyncio.sleep(random.random() * spread(jump))
            place = await self.ask(buyer, token)
            if place is not None and await self.on_place(buyer, token, place):
                return True
        return True

    async def on_place(self, buyer: Buyer, token: str, place: dict[str, Any]) -> bool:
        """Act on the queue API's answer: reserve once admitted; True when this buyer is done."""
        if place.get("ticket") is not None:
            buyer.ticket = place["ticket"]
        if buyer.admitted_seen:
            return True  # the socket's path or the poller's is reserving already
        if place.get("admission_token"):
            buyer.admitted_seen = time.time()
            await self.reserve(buyer, token, place["admission_token"])
            return True
        return bool(buyer.status)

    async def run(self) -> list[Buyer]:
        import aiohttp

        kind = self.spec["kind"]
        indices: list[int] = self.spec["indices"]
        tokens: list[str] = self.spec["tokens"]
        buyers = [Buyer(i) for i in indices]
        timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)
        # The connection limit is the in-flight limit: the client never queues inside aiohttp.
        connector = aiohttp.TCPConnector(limit=self.spec["in_flight"] * len(self.slugs), limit_per_host=0)
        async with contextlib.AsyncExitStack() as stack:
            self.session = await stack.enter_async_context(
                aiohttp.ClientSession(connector=connector, timeout=timeout)
            )
            # Open sockets hold no HTTP slot: the page's socket is apart from its requests.
            self.ws_session = await stack.enter_async_context(
                aiohttp.ClientSession(
                    connector=aiohttp.TCPConnector(limit=0), timeout=aiohttp.ClientTimeout()
                )
            )
            if kind == "rush":
                await self.rush(buyers, tokens)
            elif kind == "line":
                await asyncio.gather(
                    *(guarded(self.joiner, b, t) for b, t in zip(buyers, tokens, strict=True))
                )
            elif kind == "line_sale":
                drawn: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
                watcher = asyncio.create_task(self.watch_draw(drawn))
                buyer_job = functools.partial(self.line_buyer, drawn=drawn)
                await asyncio.gather(*(guarded(buyer_job, b, t) for b, t in zip(buyers, tokens, strict=True)))
                watcher.cancel()
            else:
                job = self.poller if kind == "poll" else self.page
                await asyncio.gather(*(guarded(job, b, t) for b, t in zip(buyers, tokens, strict=True)))
        return buyers


def child_main(spec_path: str, out_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    raise_file_limit()
    began = time.time()
    buyers = asyncio.run(Client(spec).run())
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result = {
        "buyers": [vars(b) for b in buyers],
        "cpu": usage.ru_utime + usage.ru_stime,
        "wall": time.time() - began,
    }
    Path(out_path).write_text(json.dumps(result))


# Processes -------------------------------------------------------------------------------


def web_servers(app: str) -> list[tuple[list[str], int]]:
    """(command, port) of each web server process group serving `app`; the client spreads over all.

    floodgate-web (uvicorn, two workers) when the venv has it, else two daphne processes.
    floodgate-web serves config.asgi:application only; for another app the same module runs
    with its APP swapped, so the bare ceiling gets the very same server and workers.
    """
    script = BIN / "floodgate-web"
    if script.exists():
        port = free_port()
        flags = ["--host", "127.0.0.1", "--port", str(port), "--workers", "2"]
        if app == APP:
            return [([str(script), *flags], port)]
        swap = "import sys, config.web as web; web.APP = sys.argv.pop(1); web.main()"
        return [([sys.executable, "-c", swap, app, *flags], port)]
    ports = [free_port() for _ in range(2)]
    return [([str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(p), app], p) for p in ports]


# Exec'd through this, a child gets SIGTERM when the bench dies, even by SIGKILL (devstack
# kills the bench 0.25 s after a Ctrl-C): no server outlives its run. prctl 1 = PR_SET_PDEATHSIG.
TIE = (
    "import ctypes, os, signal, sys; ctypes.CDLL(None).prctl(1, signal.SIGTERM); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


def tied(command: list[str]) -> list[str]:
    return [sys.executable, "-c", TIE, *command]


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path


class Stack:
    """Server processes of one phase; each in its own session so its whole group stops."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.processes: list[Process] = []
        self.ports: list[int] = []

    def start(self, name: str, command: list[str]) -> Process:
        log = OUT / f"crowd-{name}.log"
        out = open(log, "wb")  # noqa: SIM115 (the server's log, open while it runs)
        popen = subprocess.Popen(
            tied(command),
            env=self.env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        process = Process(name, popen, log)
        self.processes.append(process)
        return process

    def web(self, app: str) -> list[str]:
        for i, (command, port) in enumerate(web_servers(app)):
            process = self.start(f"web{i + 1}", command)
            self.ports.append(port)
            wait_listening(port, process)
        return [f"http://127.0.0.1:{p}" for p in self.ports]

    def celery(self) -> None:
        celery = str(BIN / "celery")
        self.start(
            "worker", [celery, "-A", "shop.celery:app", "worker", "-l", "warning", "--concurrency", "2"]
        )
        schedule = OUT / "crowd-celerybeat-schedule"
        self.start("beat", [celery, "-A", "shop.celery:app", "beat", "-l", "warning", "-s", str(schedule)])

    def pids(self, *names: str) -> list[int]:
        return [p.popen.pid for p in self.processes if p.name.startswith(names) and p.popen.poll() is None]

    def check(self) -> None:
        for p in self.processes:
            if p.popen.poll() is not None:
                raise RuntimeError(f"{p.name} exited ({p.popen.returncode}); see {p.log}")

    def stop(self) -> None:
        for p in self.processes:
            if p.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.popen.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for p in self.processes:
            try:
                p.popen.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.popen.pid, signal.SIGKILL)
                p.popen.wait(5)
        self.processes.clear()
        self.ports.clear()


def wait_listening(port: int, process: Process) -> None:
    wait_for_port(
        port,
        process=process.popen,
        seconds=60,
        failed=lambda: f"{process.name} did not start on :{port}; see {process.log}",
    )


def process_tree(pids: list[int]) -> set[int]:
    """These processes and all their descendants (uvicorn's workers, celery's pool)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), list(pids)
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo += parents.get(pid, [])
    return found


def cpu_seconds(pids: list[int]) -> float:
    """utime + stime (plus reaped children's) of these processes and their descendants."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in process_tree(pids):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return total / ticks


def rss_bytes(pids: list[int]) -> int:
    """Resident memory of these processes and their descendants (uvicorn's workers)."""
    total = 0
    for pid in process_tree(pids):
        with contextlib.suppress(OSError, ValueError, IndexError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
    return total


# The driver (Django, in this process) -------------------------------------------------------


def setup_django(env: dict[str, str]) -> None:
    os.environ.update(env)
    import django

    django.setup()


def query(statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def database_transactions() -> int:
    # Backends report to pg_stat_database up to a second late: let the last ones land first.
    time.sleep(1.5)
    query("SELECT pg_stat_clear_snapshot()")
    (n,), *_ = query(
        "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"
    )
    return int(n)


def listen_overflows() -> int:
    """Connections the kernel turned away because a listen queue was full (each costs the client a
    1 s SYN retransmit). Machine-wide: other programs' servers count too."""
    lines = Path("/proc/net/netstat").read_text().splitlines()
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if names.startswith("TcpExt:"):
            return int(dict(zip(names.split(), values.split(), strict=True)).get("ListenOverflows", 0))
    return 0


def postgres_pids() -> list[int]:
    """The postmaster (parent of this connection's backend) when PostgreSQL runs on this machine."""
    (backend,), *_ = query("SELECT pg_backend_pid()")
    try:
        stat = Path(f"/proc/{backend}/stat").read_text()
        return [int(stat.rsplit(")", 1)[1].split()[1])]
    except (OSError, ValueError, IndexError):
        return []


def redis_cpu() -> float:
    from django_redis import get_redis_connection

    info = get_redis_connection("default").info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def retire_old_drops() -> None:
    """Move earlier crowd drops out of the tick's window, so each tick looks after this run only."""
    from django.utils import timezone

    from shop.models import Drop

    past = timezone.now() - dt.timedelta(days=1)
    Drop.objects.filter(slug__startswith=SLUG_PREFIX, ends_at__gt=past).update(
        starts_at=past - dt.timedelta(hours=1), ends_at=past
    )


def new_drop(s: Scenario, starts_at: dt.datetime, quantity: int | None = None) -> Any:
    """A fresh drop of `quantity` units (the scenario's by default) for scenario s."""
    from catalogue.services import create_drop
    from shop.models import InventoryMode

    return create_drop(
        slug=f"{SLUG_PREFIX}{s.number}-{time.time_ns()}",
        quantity=s.units if quantity is None else quantity,
        starts_at=starts_at,
        ends_at=starts_at + dt.timedelta(hours=1),
        product_sku="BENCH-CROWD",
        product_name="Crowd benchmark item",
        price_minor=100,
        inventory_mode=InventoryMode.UNITS if s.mode == "units" else InventoryMode.BUCKETS,
        bucket_count=1,
        per_buyer_limit=1,
        waiting_room=bool(s.room),
        admission_wave_seconds=1,
        join_work_bits=0,  # the line is measured here; `bench work` measures what a join costs
    )


def run_crowd(spec: dict[str, Any], tokens: list[str], clients: int) -> tuple[list[dict[str, Any]], float]:
    """Run the crowd in `clients` child processes (buyer i in child i % clients); (buyers, client CPU)."""
    work = Path(tempfile.mkdtemp(prefix="crowd-"))
    children: list[tuple[subprocess.Popen[bytes], Path]] = []
    try:
        for c in range(clients):
            indices = list(range(c, len(tokens), clients))
            # The in-flight limit is the crowd's, shared out: K processes keep as many in flight as one.
            share = spec["in_flight"] // clients + (c < spec["in_flight"] % clients)
            part = spec | {"indices": indices, "tokens": [tokens[i] for i in indices], "in_flight": share}
            (work / f"spec{c}.json").write_text(json.dumps(part))
            out = work / f"out{c}.json"
            command = [sys.executable, "-m", "bench.crowd", "--child", str(work / f"spec{c}.json"), str(out)]
            children.append((subprocess.Popen(tied(command), cwd=ROOT), out))
        limit = spec["deadline"] + RESERVE_GRACE - time.time() + 60  # the child stops itself; a backstop
        for child, _ in children:
            child.wait(timeout=max(10.0, limit))
        buyers: list[dict[str, Any]] = []
        cpu = 0.0
        for child, out in children:
            if child.returncode != 0:
                raise RuntimeError(f"a crowd client failed ({child.returncode})")
            result = json.loads(out.read_text())
            buyers += result["buyers"]
            cpu += result["cpu"]
        return buyers, cpu
    finally:
        for child, _ in children:
            if child.poll() is None:
                child.kill()
                child.wait(5)
        shutil.rmtree(work, ignore_errors=True)


def new_buyers(n: int) -> list[str]:
    from catalogue.services import create_buyers

    return [b.token for b in create_buyers(count=n, prefix="crowd")]


def quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Measured:
    scenario: Scenario
    answers: int = 0
    wall: float = 0.0
    rate: float = 0.0
    to_hundredth: float | None = None  # first request to the units-th (100th) hold (client side)
    to_last_hold: float | None = None  # first request to the last hold the client saw
    holds_seen: int = 0
    hold_p50: float | None = None
    hold_p99: float | None = None
    no_p50: float | None = None
    no_p99: float | None = None
    requests: int = 0
    retries: int = 0
    errors: int = 0
    gave_up: int = 0
    transactions: int = 0
    web_cpu: float = 0.0
    other_cpu: dict[str, float] = field(default_factory=dict)
    client_cpu: float = 0.0
    holds_db: int = 0
    drift: int | None = None
    invariant: str = ""
    codes: dict[str, int] = field(default_factory=dict)
    ceiling: float | None = None
    overflows: int = 0  # listen queue overflows during the run (machine-wide)
    # waiting rooms
    joined: int = 0
    last_hold_after_start: float | None = None
    admitted_median: float | None = None
    admitted_last: float | None = None
    admitted: int = 0
    sockets_opened: int = 0
    opens: int = 0  # successful handshakes, reconnects included
    handshake_p99: float | None = None
    ws_failed: int = 0
    ws_errors: dict[str, int] = field(default_factory=dict)
    # the line (scenario 6)
    drawn_after_start: float | None = None  # when the draw was seen done (the queue row polled)
    round_due_after_start: float | None = None  # the drand round the draw waits for
    draw_seconds: float | None = None  # the draw's own work, replayed in a rolled-back transaction
    drawn_entries: int = 0
    snapshot_bytes: int | None = None  # the drop's published snapshot (what the edge and sockets read)
    # the line through its sale (scenario 7), seconds after the start
    drawn_seen_median: float | None = None  # the drawn broadcast at the pages
    losers_told: int = 0
    told_p50: float | None = None  # the first answer saying unlikely or sold out
    told_p99: float | None = None
    told_last: float | None = None
    numbered_last: float | None = None  # every page knew its exact number
    numbered: int = 0


def measure(s: Scenario, buyers: list[dict[str, Any]], start: float) -> Measured:
    m = Measured(s)
    finals = [b for b in buyers if b["final"]]
    m.answers = len(finals)
    m.retries = sum(b["retries"] for b in buyers)
    m.requests = sum(b["requests"] for b in buyers)
    m.errors = sum(b["errors"] for b in buyers)
    m.gave_up = len(buyers) - len(finals)
    firsts = [b["first"] for b in buyers if b["first"]]
    if finals and firsts:
        m.wall = max(b["final"] for b in finals) - min(firsts)
        m.rate = m.answers / m.wall if m.wall > 0 else 0.0
    holds = sorted((b for b in finals if b["status"] == 201), key=lambda b: b["final"])
    m.holds_seen = len(holds)
    if holds and firsts:
        m.to_hundredth = holds[min(s.units, len(holds)) - 1]["final"] - min(firsts)
        m.to_last_hold = holds[-1]["final"] - min(firsts)
        m.last_hold_after_start = holds[-1]["final"] - start
    m.hold_p50 = quantile([b["latency"] for b in holds], 0.5)
    m.hold_p99 = quantile([b["latency"] for b in holds], 0.99)
    nos = [b["latency"] for b in finals if b["status"] != 201 and b["latency"]]
    m.no_p50, m.no_p99 = quantile(nos, 0.5), quantile(nos, 0.99)
    for b in buyers:
        key = f"{b['status']} {b['code']}".strip() if b["final"] else "no final answer"
        m.codes[key] = m.codes.get(key, 0) + 1
    seen = [b["admitted_seen"] - start for b in buyers if b["admitted_seen"]]
    m.admitted = len(seen)
    if seen:
        m.admitted_median, m.admitted_last = statistics.median(seen), max(seen)
    m.joined = sum(1 for b in buyers if b["joined"])
    drawn = [b["drawn_seen"] - start for b in buyers if b["drawn_seen"]]
    m.drawn_seen_median = statistics.median(drawn) if drawn else None
    told = [b["told"] - start for b in buyers if b["told_state"] in LINE_TOLD]
    m.losers_told = len(told)
    m.told_p50, m.told_p99 = quantile(told, 0.5), quantile(told, 0.99)
    m.told_last = max(told) if told else None
    numbered = [b["numbered"] - start for b in buyers if b["numbered"]]
    m.numbered, m.numbered_last = len(numbered), (max(numbered) if numbered else None)
    m.sockets_opened = sum(1 for b in buyers if b["ws_opened"])
    m.opens = sum(len(b["handshakes"]) for b in buyers)
    m.handshake_p99 = quantile([h for b in buyers for h in b["handshakes"]], 0.99)
    m.ws_failed = sum(b["ws_failed"] for b in buyers)
    for b in buyers:
        for reason in b["ws_errors"]:
            m.ws_errors[reason] = m.ws_errors.get(reason, 0) + 1
    return m


def round_due_after(drop: Any, start: float) -> float | None:
    """Seconds from the start to the drand round the draw waited for (None: no round named)."""
    from admission import beacon
    from admission.models import Queue

    queue = Queue.objects.filter(pk=drop.pk).first()
    chain = beacon.BY_HASH.get(queue.beacon_chain) if queue is not None else None
    if queue is None or chain is None or queue.beacon_round is None:
        return None
    return chain.time_of(queue.beacon_round).timestamp() - start


def line_figures(m: Measured, drop: Any, start: float) -> None:
    """Scenario 6, after the joins: the draw at the start (seen from the queue row), its own work
    replayed on the same entries in a transaction that is rolled back, and the published
    snapshot's size (the same whatever the line's length, or the pushes grow with it)."""
    from django.db import transaction
    from django_redis import get_redis_connection

    from admission import draw, drawing, state
    from admission.models import Queue, Ticket

    deadline = start + 30.0
    queue = Queue.objects.filter(pk=drop.pk).first()
    while (queue is None or queue.drawn_at is None) and time.time() < deadline:
        time.sleep(0.05)
        queue = Queue.objects.filter(pk=drop.pk).first()
    if queue is None or queue.drawn_at is None:
        say("scenario 6: the line was not drawn within 30 s of the start")
        return
    m.drawn_after_start = max(0.0, time.time() - start)
    entries = list(
        Ticket.objects.filter(drop=drop, number__lte=queue.drawn_entries)
        .order_by("id")
        .values_list("id", flat=True)
    )
    m.drawn_entries = len(entries)
    with transaction.atomic():
        Ticket.objects.filter(pk__in=entries).update(number=None)  # as they were before the draw
        began = time.perf_counter()
        order = draw.draw_order(queue.seed, entries, beacon=queue.beacon)
        drawing.number_drawn(drop.pk, order)
        m.draw_seconds = time.perf_counter() - began
        transaction.set_rollback(True)
    time.sleep(1.5)  # a tick publishes the drawn line's snapshot
    raw = get_redis_connection("default").get(state.KEY.format(slug=drop.slug))
    m.snapshot_bytes = len(raw) if raw is not None else None


def run_scenario(s: Scenario, stack: Stack, bases: list[str], clients: int) -> Measured:
    from django.utils import timezone

    from holds.counts import invariant
    from holds.models import Hold
    from shop.models import DEFAULT_LINE_CLOSE_SECONDS

    say(f"scenario {s.number} ({s.title}): {s.buyers:,} buyers, {s.in_flight} in flight")
    tokens = new_buyers(s.buyers)
    # Rooms: time for everyone to join before the start; a rush: for the tick to publish the drop.
    # The line's joins come in one rush (its joins/s is what the store takes), with time for all.
    lead = max(10.0, s.buyers / 100) if s.room not in LINES else max(10.0, s.buyers / 1000 + 5)
    # A room's line closes DEFAULT_LINE_CLOSE_SECONDS before the start: the joins come before it.
    closes = float(DEFAULT_LINE_CLOSE_SECONDS) if s.room else 0.0
    lead = lead + closes if s.room else 4.0
    starts_at = timezone.now() + dt.timedelta(seconds=lead)
    drop = new_drop(s, starts_at)
    start = starts_at.timestamp()
    # A rush starts a hair after the start (the edge's "not started" is exact to the second).
    spec = {
        "kind": "rush" if not s.room else s.room,
        "bases": bases,
        "slug": drop.slug,
        "in_flight": s.in_flight,
        "start_at": start + (0.01 if not s.room else 0.0),
        "deadline": start + (ROOM_SECONDS if s.room else 60.0),
        # joins arrive over the first 60% of the lead before the close
        "arrivals": (lead - closes) * 0.6 if s.room not in LINES else 1.0,
        "ticket": s.ticket,
    }
    servers, others = stack.pids("web"), {"worker": stack.pids("worker"), "beat": stack.pids("beat")}
    pg = postgres_pids()
    transactions_before = database_transactions()
    cpu_before = cpu_seconds(servers)
    others_before = {k: cpu_seconds(v) for k, v in others.items()} | {"postgres": cpu_seconds(pg)}
    redis_before = redis_cpu()
    overflows = listen_overflows()
    if s.room:
        say(f"scenario {s.number}: joining, the drop starts in {start - time.time():.0f} s")
    buyers, client_cpu = run_crowd(spec, tokens, clients)
    m = measure(s, buyers, start)
    m.web_cpu = cpu_seconds(servers) - cpu_before
    m.other_cpu = {k: cpu_seconds(v) - others_before[k] for k, v in others.items()}
    m.other_cpu["postgres"] = cpu_seconds(pg) - others_before["postgres"]
    m.other_cpu["redis"] = redis_cpu() - redis_before
    m.client_cpu = client_cpu
    m.overflows = listen_overflows() - overflows
    m.transactions = database_transactions() - transactions_before - 2  # less our own two reads
    m.holds_db = Hold.objects.filter(drop=drop).count()
    inv = invariant(drop_id=drop.pk)
    m.drift = inv.drift
    m.invariant = (
        f"quantity {inv.quantity} = available {inv.available} + held {inv.held} + sold {inv.sold}"
        f" (drift {inv.drift})"
    )
    if s.room == "line":
        line_figures(m, drop, start)
    if s.room in LINES:
        m.round_due_after_start = round_due_after(drop, start)
    stack.check()
    retire_old_drops()
    say(
        f"scenario {s.number}: {m.answers:,} answers at {m.rate:,.0f}/s, {m.holds_db} holds, "
        f"{m.retries} retries, drift {m.drift}"
    )
    return m


def settle(stack: Stack, *, quiet: float = 0.25, limit: float = 30.0) -> None:
    """Wait until the web processes are idle (under `quiet` CPU seconds per second): a scenario
    must not start behind the last one's backlog. At most `limit` seconds."""
    deadline = time.monotonic() + limit
    before = cpu_seconds(stack.pids("web"))
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = cpu_seconds(stack.pids("web"))
        if now - before < quiet:
            return
        before = now
    say(f"the web processes are still busy after {limit:.0f} s; going on")


def run_ceiling(s: Scenario, bases: list[str], clients: int, *, open_early: bool = False) -> Measured:
    """The same crowd (size, in-flight, client) against the bare ASGI callable."""
    start = time.time() + 2.0 + (OPEN_BEFORE if open_early else 0.0)  # the children start, import aiohttp
    spec = {
        "kind": "rush",
        "bases": bases,
        "slug": "bare",
        "in_flight": s.in_flight,
        "start_at": start,
        "deadline": start + 60.0,
        "open_early": open_early,
    }
    overflows = listen_overflows()
    buyers, client_cpu = run_crowd(spec, ["bare"] * s.buyers, clients)
    m = measure(s, buyers, start)
    m.client_cpu, m.overflows = client_cpu, listen_overflows() - overflows
    say(f"ceiling for {s.buyers:,} buyers, {s.in_flight} in flight: {m.rate:,.0f} answers/s")
    return m


# The report -----------------------------------------------------------------------------------


def ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{1000 * seconds:,.0f} ms"


def sec(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:,.2f} s"


def verdict(ok: bool | None) -> str:
    return "-" if ok is None else ("PASS" if ok else "MISS")


def table(m: Measured) -> list[str]:
    s = m.scenario
    rows: list[str] = []

    def add(name: str, value: str, goal: str = "-", ok: bool | None = None) -> None:
        rows.append(f"| {name} | {value} | {goal} | {verdict(ok)} |")

    wanted = expected_holds(s)
    correct = m.holds_db == wanted and m.drift == 0
    if m.holds_db > wanted or m.drift != 0:
        why = "OVERSOLD OR DRIFT"
    else:
        why = f"only {m.holds_db} holds: the crowd did not buy the drop out before the deadline"
    add(
        "holds created (DB)",
        f"{m.holds_db} (client saw {m.holds_seen})",
        f"exactly {wanted:,}" + (" (nobody buys in this line)" if s.room == "line" else ""),
        m.holds_db == wanted,
    )
    add("invariant", m.invariant, "drift 0", m.drift == 0)
    if not s.room:
        share = m.rate / m.ceiling if m.ceiling else None
        add("answers/s", f"{m.rate:,.0f}", ">= 3,000", m.rate >= 3000)
        vs = f"{m.rate:,.0f} / {m.ceiling:,.0f} = {share:.0%}" if m.ceiling and share is not None else "-"
        add("answers/s vs bare ASGI", vs, ">= 65%", None if share is None else share >= 0.65)
        add(f"first request to {s.units:,}th hold", sec(m.to_hundredth), "<= 0.5 s", _le(m.to_hundredth, 0.5))
    elif s.room == "line":
        add("joins/s", f"{m.rate:,.0f}", "the crowd's arrival rate (report)")
        add("joined before the start", f"{m.joined:,}", f"{s.buyers:,}", m.joined == s.buyers)
        add("join latency p50 / p99", f"{ms(m.no_p50)} / {ms(m.no_p99)}", "p99 <= 200 ms", _le(m.no_p99, 0.2))
        add(ROUND_DUE, sec(m.round_due_after_start))
        add(
            "the draw seen done, after the start",
            sec(m.drawn_after_start),
            "<= 1 s",
            _le(m.drawn_after_start, 1),
        )
        draw = f"{sec(m.draw_seconds)} for {m.drawn_entries:,} entries" if m.draw_seconds is not None else "-"
        add(
            "the draw's own work (order and numbering, replayed)",
            draw,
            "well under 1 s",
            _le(m.draw_seconds, 0.5),
        )
        size = f"{m.snapshot_bytes:,} bytes" if m.snapshot_bytes is not None else "-"
        add("published snapshot", size, "the same for any line (compare --quick)")
    else:
        add("answers/s", f"{m.rate:,.0f}")
        add("joined before the start", f"{m.joined:,}", f"{s.buyers:,}", m.joined == s.buyers)
        last = m.last_hold_after_start
        add("last hold after the start", sec(last), "<= 3 s", _le(last, 3))
        add("admission seen, median", sec(m.admitted_median), "<= 1 s", _le(m.admitted_median, 1))
        add("admission seen, last", sec(m.admitted_last), "<= 2 s", _le(m.admitted_last, 2))
        add("buyers admitted (got a token)", f"{m.admitted:,}")
    if s.room == "line_sale":
        add(ROUND_DUE, sec(m.round_due_after_start))
        add("the drawn broadcast at the pages, after the start (median)", sec(m.drawn_seen_median))
        told = f"{sec(m.told_p50)} / {sec(m.told_p99)} / {sec(m.told_last)} ({m.losers_told:,} buyers)"
        loser = 'losers told "unlikely" or "sold out", p50 / p99 / last'
        add(loser, told, "last <= 5 s", _le(m.told_last, 5))
        # The draw waits for its committed round (up to 3 s): what the store takes after it.
        drawn, last = m.drawn_seen_median, m.last_hold_after_start

        def after(t: float | None) -> str:
            return sec(t - drawn) if t is not None and drawn is not None else "-"

        add(
            "after the drawn broadcast: admitted told median / last, losers told last, last hold",
            " / ".join(map(after, (m.admitted_median, m.admitted_last, m.told_last, last))),
        )
        add(
            "pages that learned their exact number, last after the start",
            f"{m.numbered:,}, {sec(m.numbered_last)}",
            f"all {m.joined:,}",
            m.numbered == m.joined,
        )
    if s.room == "ws":
        opened = f"{m.sockets_opened:,} buyers ({m.opens:,} opens)"
        add("sockets opened", opened, f"all {s.buyers:,}", m.sockets_opened == s.buyers)
        add("handshake p99", ms(m.handshake_p99), "<= 200 ms", _le(m.handshake_p99, 0.2))
        reasons = ", ".join(f"{k}: {v:,}" for k, v in sorted(m.ws_errors.items(), key=lambda kv: -kv[1]))
        add("failed socket tries", f"{m.ws_failed:,}" + (f" ({reasons})" if reasons else ""))
    if s.room != "line":
        add("hold latency p50 / p99", f"{ms(m.hold_p50)} / {ms(m.hold_p99)}")
        add('"no" latency p50 / p99', f"{ms(m.no_p50)} / {ms(m.no_p99)}", "p99 <= 200 ms", _le(m.no_p99, 0.2))
    add("503/429 retries", f"{m.retries:,}", "~0 (<= 1% of buyers)", m.retries <= s.buyers // 100)
    clean = m.errors == 0 and m.gave_up == 0
    add("errors / no final answer", f"{m.errors:,} / {m.gave_up:,}", "0 / 0", clean)

    def each(total: float, unit: str = "", scale: float = 1.0) -> str:
        return f"{scale * total / m.answers:,.2f}{unit} per answer" if m.answers else "no answers"

    add("HTTP requests sent", f"{m.requests:,} ({each(m.requests)})")
    add("DB transactions (all processes)", f"{m.transactions:,} ({each(m.transactions)})")
    add("web CPU", f"{m.web_cpu:.1f} s ({each(m.web_cpu, ' ms', 1000)})")
    others = ", ".join(f"{k} {v:.1f} s" for k, v in m.other_cpu.items())
    add("other CPU", f"{others}; client {m.client_cpu:.1f} s over {m.wall:.1f} s")
    add("listen queue overflows (machine-wide)", f"{m.overflows:,}")
    add("final answers", ", ".join(f"{k}: {v:,}" for k, v in sorted(m.codes.items())))
    title = f"## {s.number}. {s.title}: {s.buyers:,} buyers, {s.in_flight} in flight"
    if not correct:
        title += f"   <<< MISS: CORRECTNESS ({why}) >>>"
    return [title, "", "| measure | measured | goal | |", "| --- | --- | --- | --- |", *rows, ""]


def _le(value: float | None, limit: float) -> bool | None:
    return None if value is None else value <= limit


def report(results: list[Measured], ceilings: list[Measured], server: str, clients: int, quick: bool) -> str:
    machine = f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end"
    lines = [
        f"# bench crowd{' --quick' if quick else ''}, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC",
        "",
        f"Machine: {machine}. Web: {server}; Celery worker (2) and beat; PostgreSQL and Redis;",
        f"the crowd: aiohttp, {clients} asyncio process(es), all on this machine.",
        "",
    ]
    if ceilings:
        lines += [
            "## The client's ceiling: the same crowd against a bare ASGI callable (bench/_bare.py)",
            "",
            "| buyers | in flight | answers/s | p50 / p99 | errors | client CPU / wall | listen overflows |",
            "| ---: | ---: | ---: | --- | ---: | --- | ---: |",
        ]
        lines += [
            f"| {c.scenario.buyers:,} | {c.scenario.in_flight} | {c.rate:,.0f} | {ms(c.no_p50)} / "
            f"{ms(c.no_p99)} | {c.errors} | {c.client_cpu:.1f} s / {c.wall:.1f} s | {c.overflows:,} |"
            for c in ceilings
        ]
        lines.append("")
    for m in results:
        lines += table(m)
    misses = [m.scenario.number for m in results if m.holds_db != expected_holds(m.scenario) or m.drift != 0]
    if misses:
        lines.append(
            f"MISS: CORRECTNESS in scenario(s) {misses}: not exactly the drop's units held, or drift."
        )
    return "\n".join(lines) + "\n"


def server_name() -> str:
    command, _ = web_servers(APP)[0]
    return "floodgate-web --workers 2" if Path(command[0]).name == "floodgate-web" else "2 daphne processes"


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench crowd")
    parser.add_argument("--units", type=int, default=QUANTITY, help=f"units per drop (default {QUANTITY})")
    parser.add_argument("--quick", action="store_true", help="500 buyers per scenario")
    parser.add_argument("--only", type=int, action="append", help="run this scenario (1-7; repeatable)")
    parser.add_argument("--clients", type=int, default=1, help="client processes (default 1)")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(*args.child)
        return
    raise_file_limit()  # the servers inherit it: thousands of sockets
    OUT.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **production_env()}
    setup_django(env)
    if args.units < 1:
        parser.error("--units must be at least 1")
    chosen = [s for s in scenarios(args.quick, args.units) if not args.only or s.number in args.only]
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    stack = Stack(env)
    results: list[Measured] = []
    ceilings: dict[tuple[int, int], Measured] = {}
    failed = ""
    try:
        rushes = [s for s in chosen if not s.room]
        if rushes:
            say("the client's ceiling: the same crowd against a bare ASGI callable")
            bases = stack.web(BARE_APP)
            for s in rushes:
                if (s.buyers, s.in_flight) not in ceilings:
                    ceilings[s.buyers, s.in_flight] = run_ceiling(s, bases, args.clients)
            stack.stop()
        say("starting the store: web, Celery worker and beat (production profile)")
        retire_old_drops()
        bases = stack.web(APP)
        stack.celery()
        time.sleep(3)  # beat's first tick, the edges' first snapshots
        for s in chosen:
            settle(stack)
            m = run_scenario(s, stack, bases, args.clients)
            bare = ceilings.get((s.buyers, s.in_flight))
            m.ceiling = bare.rate if bare else None
            results.append(m)
    except KeyboardInterrupt:
        say("interrupted; stopping the servers")
    except Exception as error:  # report what was measured before it
        failed = f"stopped by {type(error).__name__}: {error}"
        say(failed)
    finally:
        stack.stop()
    if not results:
        sys.exit(f"bench crowd: FAILED: no scenario measured ({failed or 'interrupted'})")
    text = report(results, list(ceilings.values()), server_name(), args.clients, args.quick)
    path = OUT / f"crowd-{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}.txt"
    path.write_text(text)
    print(text)
    say(f"report written to {path.relative_to(ROOT)}")
    if reasons := failures(results, failed):
        print(f"bench crowd: FAILED: {'; '.join(reasons)}", file=sys.stderr)
        sys.exit(2)


def expected_holds(s: Scenario) -> int:
    """What a scenario must end with held: its units, or none in the line (nobody buys there)."""
    return 0 if s.room == "line" else s.units


def failures(results: list[Measured], stopped: str) -> list[str]:
    """Why the run failed: it stopped, sold other than exactly its units, or a rush has no bare ceiling
    (its baseline: the share of it would be a dash beside its goal)."""
    reasons = [stopped] if stopped else []
    if wrong := [
        m.scenario.number for m in results if m.holds_db != expected_holds(m.scenario) or m.drift != 0
    ]:
        reasons.append(f"CORRECTNESS in scenario(s) {wrong}")
    if bare := [m.scenario.number for m in results if not m.scenario.room and not m.ceiling]:
        reasons.append(f"no bare-ASGI ceiling measured for scenario(s) {bare}")
    return reasons


if __name__ == "__main__":
    main()
