"""bench queue: the waiting room's live push, and the cheapest "no" next to a trivial endpoint.

    python3 floodgate.py bench queue                 # 500, 2,000 and 5,000 WebSocket clients
    python3 floodgate.py bench queue --clients 500   # one size only
    python3 floodgate.py bench queue --seconds 5     # shorter HTTP runs

1. Fan-out: N WebSocket clients (one asyncio process of lean RFC 6455 sockets, `Listener`: a
   library client's per-message Python was the limit) on one drop's queue, served by
   floodgate-web (2 workers, as production); the bench runs admission waves and records each
   socket's opening handshake and, for each wave, the time from the wave (just before
   `run_wave`) to each client receiving its message.
   The clients' ceiling: the same clients and waves against a bare ASGI WebSocket
   (bench/_bare.py: accept at once, one Redis PUBLISH per wave relayed to every socket) on the
   same server command and workers, in the same run. A store figure near the bare one is the
   client's or the server's limit, not the store's.
2. The "no" path under wrk (1 thread, 64 connections, same server, same run): a trivial
   Django endpoint (/healthz), the sold-out answer of the reserve API and the drop's state,
   and a sold-out drop with no snapshot yet (Django answers and publishes one), with
   the database transactions each run caused; and a waiting buyer's poll of their place,
   with the queue ticket and with the bearer token only (the edge answers both).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime as dt
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import _bare
from bench.crowd import rss_bytes, tied
from devtools.ports import free_port, wait_for_port

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
SLUG_PREFIX = "bench-queue-"
BUYER_PREFIX = "qbench-"
WAVES = 5
PER_WAVE = 100
WAVE_SECONDS = 250  # the bench's waves are 300 s apart on its simulated clock
HELD = 10**9  # a hold's "final mark": none is awaited, the sockets close when the hold ends
BODY = b'{"quantity": 1}'
BARE_APP = "bench._bare:app"
WRK = shutil.which("wrk") or "/usr/bin/wrk"


@dataclass
class Pace:
    wave_gap: float = 1.5  # seconds between waves: every socket has its message before the next
    stats: float = 2.0  # backends report to pg_stat_database up to a second late


PACE = Pace()  # --quick: shorter (the suite checks the parts run, not their figures)


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DEBUG", "0")
    import django

    django.setup()


def say(message: str) -> None:
    print(f"bench queue: {message}", file=sys.stderr, flush=True)


def raise_file_limit() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# The WebSocket clients (a child process) ---------------------------------------------------


class Listener(asyncio.Protocol):
    """One waiting page's socket, as lean as a client can be: the RFC 6455 opening handshake,
    then unmasked server frames parsed by hand, the arrival time taken as the bytes arrive.

    A library client (websockets) spends ~50-100 µs of Python per message; 5,000 of them on
    one core behind the same two cores' servers measured the client, not the wave.
    """

    def __init__(self, request: bytes, on_mark: Callable[[int, float], None]) -> None:
        self.request = request
        self.on_mark = on_mark
        self.buffer = b""
        self.upgraded = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None
        self.messages = 0  # text frames received
        self.dropped = False  # closed by the other side after the upgrade
        self.closing = False  # this side closes it

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        now = time.time()
        self.buffer += data
        if not self.upgraded.done():
            head, sep, rest = self.buffer.partition(b"\r\n\r\n")
            if not sep:
                return
            if not head.startswith(b"HTTP/1.1 101"):
                self.upgraded.set_exception(ConnectionError(head.split(b"\r\n", 1)[0].decode()))
                return
            self.upgraded.set_result(None)
            self.buffer = rest
        while len(self.buffer) >= 2:
            length, start = self.buffer[1] & 0x7F, 2
            if length == 126:
                if len(self.buffer) < 4:
                    return
                length, start = int.from_bytes(self.buffer[2:4], "big"), 4
            elif length == 127:
                if len(self.buffer) < 10:
                    return
                length, start = int.from_bytes(self.buffer[2:10], "big"), 10
            if len(self.buffer) < start + length:
                return
            opcode, payload = self.buffer[0] & 0x0F, self.buffer[start : start + length]
            self.buffer = self.buffer[start + length :]
            if opcode == 0x1:  # text: a queue message
                self.messages += 1
                mark = json.loads(payload).get("admitted_through")
                if isinstance(mark, int):
                    self.on_mark(mark, now)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.upgraded.done():
            self.upgraded.set_exception(exc or ConnectionError("closed during the handshake"))
        elif not self.closing:
            self.dropped = True


async def clients_main(url: str, n: int, final_mark: int, timeout: float) -> None:
    """Connect n clients, say READY, record when each sees each mark; print the times as JSON."""
    parsed = urllib.parse.urlsplit(url)
    host, port = parsed.hostname or "127.0.0.1", parsed.port or 80
    origin = f"http://{host}:{port}"  # the page's origin, as a browser sends
    seen: list[dict[int, float]] = [{} for _ in range(n)]
    done = asyncio.Event()
    finished = 0
    connected = 0
    gate = asyncio.Semaphore(100)  # connect in parallel, but not 5,000 handshakes at once
    loop = asyncio.get_running_loop()
    sockets: list[tuple[asyncio.BaseTransport, Listener]] = []
    handshakes: list[float] = []  # seconds from connect() to the 101, each socket

    def recorder(i: int) -> Callable[[int, float], None]:
        def on_mark(mark: int, at: float) -> None:
            nonlocal finished
            if mark not in seen[i]:
                seen[i][mark] = at
                if mark >= final_mark:
                    finished += 1
                    if finished == n:
                        done.set()

        return on_mark

    async def client(i: int) -> None:
        nonlocal connected
        key = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET {parsed.path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Origin: {origin}\r\n\r\n"
        ).encode()
        async with gate:
            began = time.perf_counter()
            transport, protocol = await loop.create_connection(
                lambda: Listener(request, recorder(i)), host, port
            )
            sockets.append((transport, protocol))
            await asyncio.wait_for(protocol.upgraded, 60)
            handshakes.append(time.perf_counter() - began)
            connected += 1
            if connected % 500 == 0 or connected == n:
                say(f"{connected:,}/{n:,} clients connected")

    await asyncio.gather(*(client(i) for i in range(n)))
    print("READY", flush=True)
    try:
        await asyncio.wait_for(done.wait(), timeout)
    except TimeoutError:
        if final_mark != HELD:
            say(f"{n - finished} clients did not see the last wave within {timeout:.0f} s")
    dropped = sum(protocol.dropped for _, protocol in sockets)
    messages = [protocol.messages for _, protocol in sockets]
    for transport, protocol in sockets:
        protocol.closing = True
        transport.close()
    marks = [{str(k): v for k, v in s.items()} for s in seen]
    print(
        json.dumps({"seen": marks, "handshakes": handshakes, "dropped": dropped, "messages": messages}),
        flush=True,
    )


# The driver -------------------------------------------------------------------------------


# floodgate-web serves config.asgi:application only; the bare ceiling runs the same module
# with its APP swapped, so it gets the very same server and workers (as bench crowd does).
SWAP = "import sys, config.web as web; web.APP = sys.argv.pop(1); web.main()"


def start_web(port: int, log: Path, app: str | None = None) -> subprocess.Popen:
    env = {
        **os.environ,
        "DEBUG": "0",
        # The "no" path is measured, not the limiter: one bench account makes every request.
        "RATE_LIMIT_BURST": "100000000",
        "IP_RATE_LIMIT_BURST": "100000000",
        "WS_SOCKETS_PER_ADDRESS": "1000000",  # the wave's thousands of sockets come from one client
        "CLAIM_CONCURRENCY": "64",
    }
    web = str(Path(sys.executable).parent / "floodgate-web")  # production's web tier
    flags = ["--host", "127.0.0.1", "--port", str(port), "--workers", "2"]
    out = open(log, "wb")  # noqa: SIM115 (the server's log, open while it runs)
    process = subprocess.Popen(
        tied([web, *flags] if app is None else [sys.executable, "-c", SWAP, app, *flags]),
        env=env,
        cwd=ROOT,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its workers stop with it
    )
    try:
        wait_for_port(port, process=process, failed=lambda: f"bench: floodgate-web did not start; see {log}")
    except RuntimeError as error:
        sys.exit(str(error))
    return process


def query(statement: str, params: Any = None) -> list[tuple]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def buyers(n: int) -> list[int]:
    """n bench buyers (created once, in one statement)."""
    (count,), *_ = query("SELECT count(*) FROM auth_user WHERE username LIKE %s", [BUYER_PREFIX + "%"])
    if count < n:
        query(
            """INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email,
                                      is_staff, is_active, date_joined)
               SELECT '!', false, %s || g, '', '', '', false, true, now()
                 FROM generate_series(%s, %s) g""",
            [BUYER_PREFIX, count + 1, n],
        )
    rows = query(
        "SELECT id FROM auth_user WHERE username LIKE %s ORDER BY id LIMIT %s", [BUYER_PREFIX + "%", n]
    )
    return [r[0] for r in rows]


def new_drop(name: str, *, quantity: int, waiting_room: bool, wave_seconds: int = 5) -> Any:
    from django.utils import timezone

    from catalogue.services import create_drop

    now = timezone.now()
    return create_drop(
        slug=f"{SLUG_PREFIX}{name}-{time.time_ns()}",
        quantity=quantity,
        starts_at=now - dt.timedelta(minutes=1),
        ends_at=now + dt.timedelta(days=30),
        product_sku="BENCH-QUEUE",
        product_name="Queue benchmark item",
        price_minor=100,
        per_buyer_limit=1,
        waiting_room=waiting_room,
        admission_percent=100,
        admission_wave_seconds=wave_seconds,
        join_work_bits=0,  # the line is measured here; `bench work` measures what a join costs
    )


@dataclass
class FanOut:
    clients: int
    connected: int
    per_wave: list[list[float]]  # seconds from each wave to each client's receipt
    wave_seconds: list[float]  # how long run_wave itself took (DB + publish)
    missed: int
    handshakes: list[float]  # seconds from connect() to the 101, each socket

    def cell(self, q: float) -> str:
        return ms_at(q, [x for wave in self.per_wave for x in wave])

    def handshake(self, q: float) -> str:
        return ms_at(q, self.handshakes)


def ms_at(q: float, seconds: list[float]) -> str:
    """The q-quantile of these times, in whole ms ("-" for none)."""
    ordered = sorted(seconds)
    if not ordered:
        return "-"
    return f"{1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]:.0f}"


def listeners(url: str, n: int, final_mark: int, *, seconds: float = 120) -> subprocess.Popen[str]:
    """The client process with n sockets open on url (it said READY); it closes them when every
    socket has seen final_mark, or `seconds` after READY."""
    child = subprocess.Popen(
        tied([sys.executable, "-m", "bench.queue", "--child", url, str(n), str(final_mark), str(seconds)]),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    line = child.stdout.readline().strip()
    if line != "READY":
        child.kill()
        sys.exit(f"bench: the WebSocket clients did not connect to {url} ({line!r})")
    return child


def heard(child: subprocess.Popen[str], n: int, waves: list[tuple[int, float]], took: list[float]) -> FanOut:
    """What the client process saw of these waves (mark, sent at)."""
    out, _ = child.communicate(timeout=120)
    result = json.loads(out.strip().splitlines()[-1])
    seen = result["seen"]
    per_wave = [[s[str(mark)] - began for s in seen if str(mark) in s] for mark, began in waves]
    missed = sum(n - len(w) for w in per_wave)
    return FanOut(n, len(seen), per_wave, took, missed, result["handshakes"])


@dataclass
class Line:
    """A waiting-room drop drawn and lined up for `waves` waves of PER_WAVE tickets, each run by
    the bench on a simulated clock."""

    drop: Any
    start: dt.datetime
    url: str

    @classmethod
    def make(cls, base: str, name: str, waves: int) -> Line:
        from admission import services
        from admission.models import Queue, Ticket

        drop = new_drop(name, quantity=PER_WAVE, waiting_room=True, wave_seconds=WAVE_SECONDS)
        start = dt.datetime.now(dt.UTC)
        services.run_wave(drop, now=start)  # the (empty) draw
        # The web processes cover beat's duties here (no beat runs) and would run a wave of their own
        # while 5,000 sockets connect: with the last wave at the start and waves WAVE_SECONDS apart,
        # none is due on the real clock, and the bench's own waves (simulated time) are.
        Queue.objects.filter(pk=drop.pk).update(last_wave_at=start)
        Ticket.objects.bulk_create(
            Ticket(drop=drop, buyer_id=b, number=i + 1) for i, b in enumerate(buyers(waves * PER_WAVE))
        )
        return cls(drop, start, base.replace("http://", "ws://") + f"/ws/drops/{drop.slug}/queue/")

    def wave(self, i: int) -> int:
        """Wave i (from 0): PER_WAVE more tickets admitted; returns the new mark."""
        from admission import services

        # Nobody buys here, so each wave is run a token lifetime after the last (simulated time).
        # The web processes' covered tick takes the line's lock each second (its wave is not due):
        # a wave that met it there is tried again, as the tick would next second.
        for _ in range(100):
            wave = services.run_wave(self.drop, now=self.start + dt.timedelta(seconds=300 * (i + 1)))
            if wave is not None:
                break
            time.sleep(0.01)
        assert wave is not None and wave.admitted == PER_WAVE, wave
        return wave.admitted_through


def fan_out(base: str, n: int) -> FanOut:
    line = Line.make(base, f"ws{n}", WAVES)
    child = listeners(line.url, n, WAVES * PER_WAVE)
    time.sleep(1)  # the connect-time snapshot messages settle
    waves: list[tuple[int, float]] = []
    took: list[float] = []
    for i in range(WAVES):
        began = time.time()
        mark = line.wave(i)
        took.append(time.time() - began)
        waves.append((mark, began))
        say(f"{n:,} clients: wave {i + 1}/{WAVES} through ticket {mark}")
        time.sleep(PACE.wave_gap)
    return heard(child, n, waves, took)


def bare_fan_out(base: str, n: int) -> FanOut:
    """The same clients and waves against bench/_bare.py: each wave one PUBLISH, nothing else."""
    import redis

    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    child = listeners(base.replace("http://", "ws://") + "/ws/bare/", n, WAVES)
    time.sleep(1)  # every worker's relay has subscribed (at its first socket)
    waves: list[tuple[int, float]] = []
    took: list[float] = []
    for mark in range(1, WAVES + 1):
        began = time.time()
        receivers = client.publish(_bare.WAVES, json.dumps({"admitted_through": mark}))
        took.append(time.time() - began)
        if not receivers:
            FAILED.append(f"bare WebSocket, {n:,} clients: no worker subscribed to the waves")
        waves.append((mark, began))
        say(f"{n:,} clients: bare wave {mark}/{WAVES} to {receivers} worker(s)")
        time.sleep(PACE.wave_gap)
    return heard(child, n, waves, took)


@dataclass
class Held:
    """n sockets held open on one queue for `seconds`, with waves now and then; the web
    processes' resident memory (every worker) before and while they are open."""

    server: str  # "store" or "bare"
    clients: int
    seconds: float
    rss_before: int  # before the first socket opened
    samples: list[tuple[float, int]]  # (seconds since every socket was open, RSS)
    dropped: int  # sockets the server closed during the hold
    messages: list[int]  # text frames each socket received

    @property
    def opened(self) -> int:
        return self.samples[0][1]

    @property
    def end(self) -> int:
        return self.samples[-1][1]

    @property
    def per_socket(self) -> float:
        return (self.opened - self.rss_before) / self.clients

    @property
    def growth(self) -> int:
        return self.end - self.opened

    @property
    def flat(self) -> bool:
        """No growth: the hold added less than a tenth of what opening the sockets cost."""
        return self.growth <= 0.1 * max(self.opened - self.rss_before, 1)


HOLD_WAVES = 10  # waves spread over a hold: every socket receives a message now and then


def hold(base: str, n: int, seconds: float, web: subprocess.Popen, *, bare: bool = False) -> Held:
    """n sockets open for `seconds` (store: a drop's queue; bare: bench/_bare.py), RSS sampled."""
    import redis

    line = None if bare else Line.make(base, f"hold{n}", HOLD_WAVES)
    url = base.replace("http://", "ws://") + "/ws/bare/" if line is None else line.url
    publisher = redis.Redis.from_url(os.environ["REDIS_URL"])
    before = rss_bytes([web.pid])
    child = listeners(url, n, HELD, seconds=seconds + 5)
    time.sleep(1)  # the connect-time snapshot messages settle
    began, samples, waves = time.monotonic(), [], 0
    every = max(1.0, seconds / 60)
    while (elapsed := time.monotonic() - began) < seconds:
        samples.append((elapsed, rss_bytes([web.pid])))
        if waves < HOLD_WAVES and elapsed >= waves * seconds / HOLD_WAVES:
            if line is None:
                publisher.publish(_bare.WAVES, json.dumps({"admitted_through": waves + 1}))
            else:
                line.wave(waves)
            waves += 1
        say(
            f"holding {n:,} sockets ({'bare' if bare else 'store'}): {elapsed:.0f}/{seconds:.0f} s, "
            f"web RSS {samples[-1][1] / 2**20:.0f} MB, {waves} waves"
        )
        time.sleep(min(every, max(0.0, seconds - elapsed)))
    samples.append((time.monotonic() - began, rss_bytes([web.pid])))
    out, _ = child.communicate(timeout=seconds + 120)
    result = json.loads(out.strip().splitlines()[-1])
    server = "bare" if bare else "store"
    if len(result["handshakes"]) != n:
        FAILED.append(f"hold ({server}): {len(result['handshakes'])} of {n} sockets opened")
    return Held(server, n, seconds, before, samples, result["dropped"], result["messages"])


class Publisher:
    """What beat's admission.tick does for one drop: compute (one statement) and publish each second."""

    def __init__(self) -> None:
        self.ticks = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, drops: list[Any]) -> None:
        from django.db import connection

        from admission import state

        def run() -> None:
            try:
                while not self._stop.is_set():
                    state.publish(state.compute(drops))
                    self.ticks += 1
                    self._stop.wait(1.0)
            finally:
                connection.close()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        time.sleep(1.5)  # every edge has heard the first publish

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(5)


PUBLISHER = Publisher()


@dataclass
class Load:
    name: str
    rate: float
    p50_ms: float
    p99_ms: float
    status: str
    edge: str
    transactions: int


def database_transactions() -> int:
    (n,), *_ = query(
        "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"
    )
    return int(n)


def probe(url: str, method: str, headers: dict[str, str]) -> tuple[str, str]:
    request = urllib.request.Request(
        url, method=method, headers=headers, data=BODY if method == "POST" else None
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return str(response.status), response.headers.get("X-Floodgate-Edge", "-")
    except urllib.error.HTTPError as error:
        body = json.loads(error.read() or b"{}").get("error", "")
        return f"{error.code} {body}", error.headers.get("X-Floodgate-Edge", "-")


def parse_ms(text: str) -> float:
    value, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text).groups()  # type: ignore[union-attr]
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}[unit]


FAILED: list[str] = []  # endpoints that did not give the answer they are measured for


def wrk(
    name: str,
    url: str,
    *,
    seconds: int,
    expect: str,
    method: str = "GET",
    headers: dict[str, str] | None = None,
) -> Load:
    """One wrk run; `expect` is the status the endpoint must answer (else the run fails, named)."""
    headers = headers or {}
    status, edge = probe(url, method, headers)
    if status.split()[0] != expect:
        FAILED.append(f"{name}: {status}, not {expect}")
        say(f"FAILED {FAILED[-1]}")
    script = OUT / "wrk-request.lua"
    lines = [f'wrk.method = "{method}"', f"wrk.body = '{BODY.decode()}'" if method == "POST" else ""]
    lines += [f'wrk.headers["{k}"] = "{v}"' for k, v in headers.items()]
    script.write_text("\n".join(lines) + "\n")
    # Backends report their counts to pg_stat_database up to a second late: let the last run's land.
    time.sleep(PACE.stats)
    query("SELECT pg_stat_clear_snapshot()")
    before, ticks_before = database_transactions(), PUBLISHER.ticks
    done = subprocess.run(
        tied([WRK, "-t1", "-c64", f"-d{seconds}s", "--latency", "-s", str(script), url]),
        capture_output=True,
        text=True,
        check=True,
    )
    time.sleep(PACE.stats)
    query("SELECT pg_stat_clear_snapshot()")
    # Less the bench's own reads of the counter and the publisher's one statement per tick.
    transactions = database_transactions() - before - 2 - (PUBLISHER.ticks - ticks_before)
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", done.stdout).group(1))  # type: ignore[union-attr]
    # Anchored at a line's start: "Thread Stats" also ends lines in percentages like "75.50%".
    p50 = parse_ms(re.search(r"^\s+50%\s+(\S+)", done.stdout, re.M).group(1))  # type: ignore[union-attr]
    p99 = parse_ms(re.search(r"^\s+99%\s+(\S+)", done.stdout, re.M).group(1))  # type: ignore[union-attr]
    say(f"{name}: {rate:,.0f}/s, p99 {p99:.1f} ms ({status}, edge: {edge})")
    return Load(name, rate, p50, p99, status, edge, max(0, transactions))


def no_path(base: str, seconds: int) -> list[Load]:
    from holds.services import reserve
    from shop.models import ApiToken, Drop

    buyer, seller = buyers(2)
    ApiToken.objects.update_or_create(
        user_id=buyer, defaults={"digest": ApiToken.digest_of("bench-queue-token")}
    )
    auth = {
        "Authorization": "Bearer bench-queue-token",
        "Idempotency-Key": "bench",
        "Content-Type": "application/json",
    }
    gone = new_drop("soldout", quantity=1, waiting_room=False)
    reserve(drop=gone, buyer_id=seller, quantity=1, idempotency_key="sell-the-last-one")
    hidden = new_drop("soldout-unpublished", quantity=1, waiting_room=False)
    reserve(drop=hidden, buyer_id=seller, quantity=1, idempotency_key="sell-the-last-one")
    from admission import services, tokens

    room = new_drop("room", quantity=1_000, waiting_room=True)
    services.run_wave(room)  # the start: joiners get numbers
    place = services.join(drop=room, buyer_id=buyer)
    ticket = tokens.issue_ticket(
        drop_id=room.pk,
        buyer_id=buyer,
        entry=place.ticket.pk,
        number=place.number,
        bound_to=tokens.credential(bearer="bench-queue-token", session_key=None) or "",
    )
    poll = {"Authorization": auth["Authorization"]}
    PUBLISHER.start(list(Drop.objects.select_related("product").filter(pk__in=[gone.pk, room.pk])))
    runs = [
        wrk("trivial Django endpoint (GET /healthz)", f"{base}/healthz", seconds=seconds, expect="200"),
        wrk(
            "sold out: POST /api/drops/<slug>/holds",
            f"{base}/api/drops/{gone.slug}/holds",
            seconds=seconds,
            expect="409",
            method="POST",
            headers=auth,
        ),
        wrk("state: GET /api/drops/<slug>", f"{base}/api/drops/{gone.slug}", seconds=seconds, expect="200"),
        wrk(
            "sold out, no snapshot yet (Django answers, then publishes one)",
            f"{base}/api/drops/{hidden.slug}/holds",
            seconds=seconds,
            expect="409",
            method="POST",
            headers=auth,
        ),
        wrk(
            "queue poll with its ticket: GET /api/drops/<slug>/queue",
            f"{base}/api/drops/{room.slug}/queue",
            seconds=seconds,
            expect="200",
            headers={**poll, "X-Queue-Ticket": ticket},
        ),
        wrk(
            "queue poll with the bearer token only (the edge names the buyer)",
            f"{base}/api/drops/{room.slug}/queue",
            seconds=seconds,
            expect="200",
            headers=poll,
        ),
    ]
    PUBLISHER.stop()
    return runs


def mb(n: float) -> str:
    return f"{n / 2**20:,.1f} MB"


def held_report(held: list[Held]) -> list[str]:
    """The hold's table: memory per socket, and whether a long hold grows it."""
    lines = [
        "## Open sockets held: the web processes' RSS (every worker)",
        "",
        "| server | sockets | held | closed by the server | RSS before | all open | end of hold | per socket "
        "| growth over the hold | messages per socket (min-max) | no growth |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for h in held:
        verdict = ("PASS" if h.flat else "MISS") if h.server == "store" else "-"
        lines.append(
            f"| {h.server} | {h.clients:,} | {h.seconds:.0f} s | {h.dropped} | {mb(h.rss_before)} | "
            f"{mb(h.opened)} | {mb(h.end)} | {h.per_socket / 1024:,.1f} KiB | {mb(h.growth)} | "
            f"{min(h.messages, default=0)}-{max(h.messages, default=0)} | {verdict} |"
        )
    for h in held:
        step = max(1, len(h.samples) // 10)
        trace = ", ".join(f"{t:.0f} s {r / 2**20:.0f}" for t, r in h.samples[::step])
        lines.append(f"\n{h.server} RSS over the hold (MB): {trace}, end {h.end / 2**20:.0f}")
    lines += [
        "",
        "Per socket: (all open - before) / sockets. No growth: the hold added under a tenth of what "
        "opening the sockets cost. The bare row (bench/_bare.py, same server and workers) is what "
        "a socket costs the server with no application.",
    ]
    return lines


def report(fan: list[FanOut], bare: list[FanOut], loads: list[Load], held: list[Held], machine: str) -> str:
    lines = [
        f"# bench queue, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC",
        "",
        f"Machine: {machine}. floodgate-web, 2 workers; clients and wrk on the same machine.",
        "",
        *(["**FAILED** (not the answer measured for): " + "; ".join(FAILED), ""] if FAILED else []),
    ]
    if fan:
        lines += [
            "## Fan-out: wave to client (ms), one broadcast per wave",
            "",
            "| clients | connected | handshake p50 / p99 | waves | p50 | p99 | max | missed "
            "| run_wave (ms, median) |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
    for f in fan:
        lines.append(
            f"| {f.clients:,} | {f.connected:,} | {f.handshake(0.5)} / {f.handshake(0.99)} | "
            f"{len(f.per_wave)} | {f.cell(0.5)} | {f.cell(0.99)} | "
            f"{f.cell(1.0)} | {f.missed} | {1000 * statistics.median(f.wave_seconds):.0f} |"
        )
    if bare:
        lines += [
            "",
            "## The clients' ceiling: the same sockets and waves against a bare ASGI WebSocket "
            "(bench/_bare.py), same server and workers (ms)",
            "",
            "| clients | handshake p99: store / bare | wave p50: store / bare | wave p99: store / bare "
            "| missed (bare) |",
            "| ---: | ---: | ---: | ---: | ---: |",
        ]
        for f, b in zip(fan, bare, strict=True):
            lines.append(
                f"| {f.clients:,} | {f.handshake(0.99)} / {b.handshake(0.99)} | "
                f"{f.cell(0.5)} / {b.cell(0.5)} | {f.cell(0.99)} / {b.cell(0.99)} | {b.missed} |"
            )
        lines += [
            "",
            "The bare figures are what this client and server do with no application: where the "
            "store's is close to them, the client (one process) or the server is the limit.",
        ]
    if loads:
        trivial = loads[0]
        lines += [
            "",
            '## The "no" path (wrk -t1 -c64)',
            "",
            "| endpoint | answer | edge | requests/s | p50 ms | p99 ms | vs trivial (rate) | p99 vs trivial "
            "| DB transactions |",
            "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for load in loads:
            lines.append(
                f"| {load.name} | {load.status} | {load.edge} | {load.rate:,.0f} | {load.p50_ms:.1f} | "
                f"{load.p99_ms:.1f} | {load.rate / trivial.rate:.2f}x | "
                f"{load.p99_ms / trivial.p99_ms:.2f}x | {load.transactions:,} |"
            )
        lines += [
            "",
            "Target: the sold-out answer within 1.5x of the trivial endpoint (rate ≥ 0.67x, p99 ≤ 1.5x) "
            "with zero database queries.",
        ]
    if held:
        lines += ["", *held_report(held)]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench queue")
    parser.add_argument("--clients", type=int, action="append", help="WebSocket clients (repeatable)")
    parser.add_argument("--seconds", type=int, default=10, help="length of each wrk run")
    parser.add_argument(
        "--only", action="append", choices=["fan", "no", "hold"], help="run these parts (default: fan, no)"
    )
    parser.add_argument("--hold", type=float, default=600, help="seconds the hold keeps its sockets open")
    parser.add_argument("--hold-clients", type=int, default=10_000, help="sockets the hold opens")
    parser.add_argument("--quick", action="store_true", help="50 sockets, 1 s runs, a 2 s hold (the suite's)")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    raise_file_limit()
    if args.child:
        url, n, final, seconds = args.child
        asyncio.run(clients_main(url, int(n), int(final), timeout=float(seconds)))
        return
    # A kill runs the finally blocks (servers and clients also die with this process: `tied`).
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    parts = set(args.only or (["fan", "no", "hold"] if args.quick else ["fan", "no"]))
    sizes = args.clients or ([50] if args.quick else [500, 2000, 5000])
    seconds = 1 if args.quick else args.seconds
    hold_for, hold_n = (2.0, 50) if args.quick else (args.hold, args.hold_clients)
    if args.quick:
        PACE.wave_gap, PACE.stats = 0.3, 0.3
    setup_django()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    OUT.mkdir(parents=True, exist_ok=True)
    fan: list[FanOut] = []
    loads: list[Load] = []
    held: list[Held] = []
    bare: list[FanOut] = []
    port = free_port()
    web = start_web(port, OUT / "queue-web.log")
    base = f"http://127.0.0.1:{port}"
    try:
        for n in sizes if "fan" in parts else []:
            say(f"fan-out with {n:,} WebSocket clients")
            fan.append(fan_out(base, n))
        if "no" in parts:
            say("the no path")
            loads = no_path(base, seconds)
        if "hold" in parts:
            say(f"{hold_n:,} sockets held open for {hold_for:.0f} s")
            held.append(hold(base, hold_n, hold_for, web))
    finally:
        web.terminate()
        web.wait(15)
    bare_port = free_port()
    bare_web = start_web(bare_port, OUT / "queue-bare.log", app=BARE_APP)
    bare_base = f"http://127.0.0.1:{bare_port}"
    try:
        for n in sizes if "fan" in parts else []:
            say(f"the clients' ceiling: {n:,} sockets on a bare ASGI WebSocket")
            bare.append(bare_fan_out(bare_base, n))
        if "hold" in parts:  # a socket's cost to the server alone: a minute tells it
            held.append(hold(bare_base, hold_n, min(hold_for, 60), bare_web, bare=True))
    finally:
        bare_web.terminate()
        bare_web.wait(15)
    machine = f"{os.cpu_count()} CPUs, {' '.join(os.uname()[2:3])}"
    text = report(fan, bare, loads, held, machine)
    (OUT / "queue.md").write_text(text)
    print(text)
    if FAILED:  # the trivial endpoint is every ratio's baseline: a wrong answer there is no measure
        sys.exit("bench queue: FAILED: " + "; ".join(FAILED))


if __name__ == "__main__":
    main()
