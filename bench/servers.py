"""bench servers: which ASGI server to put around Floodgate, measured with wrk.

    python3 floodgate.py bench servers                   # every server, 10 s per cell, 1 round
    python3 floodgate.py bench servers --seconds 5 --rounds 3
    python3 floodgate.py bench servers --servers daphne,uvicorn

Each server serves, in turn:

- bare: a bare ASGI callable (`bench.servers:bare`, "ok"): the server's own ceiling;
- edge state: `GET /api/drops/<slug>`, answered by the admission edge from its snapshot;
- edge no: `POST /api/drops/<slug>/holds` of a sold-out drop, the edge's 409;
- Django: `GET /healthz`, a trivial Django view (full middleware stack, no query).

The app runs on the production profile (DEBUG off, HTTPS settings on), so every request
carries the `X-Forwarded-Proto: https` the TLS proxy in front would add; without it the edge
leaves the answer to Django's HTTPS redirect. A publisher thread republishes the drop's
snapshot each second (as beat's tick does), so the edge never sees it stale.

The machine is shared and small: wrk, the server and whatever else runs take turns on the same
cores, so absolute rates move from run to run. What holds is the ratio of an endpoint to the
bare callable under the same server in the same round, which the table gives beside each rate
(the median of the rounds). The load average at the start of each cell is in the raw results.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.queue import buyers, new_drop, parse_ms, raise_file_limit, setup_django
from devtools.ports import free_port, wait_for_port

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
BIN = Path(sys.executable).parent
APP = "config.asgi:application"
BARE = "bench.servers:bare"
ENDPOINTS = ("bare", "edge state", "edge no", "Django")
SERVERS = ("daphne", "uvicorn-1", "uvicorn", "granian-1", "granian")
BODY = '{"quantity": 1}'


async def bare(
    scope: dict[str, Any],
    receive: Callable[[], Awaitable[dict[str, Any]]],
    send: Callable[[dict[str, Any]], Awaitable[None]],
) -> None:
    """The least an ASGI app can do: what a server costs with no application behind it."""
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})


def say(message: str) -> None:
    print(f"bench servers: {message}", file=sys.stderr, flush=True)


def command(server: str, app: str, port: int, workers: int) -> list[str]:
    """How each server is started; granian around the app is floodgate-web itself."""
    if server == "daphne":
        # -v 0: no access log, as uvicorn and granian here (daphne's default logs every request).
        return [str(BIN / "daphne"), "-v", "0", "-b", "127.0.0.1", "-p", str(port), app]
    name, _, count = server.partition("-")
    n = count or str(workers)
    if name == "granian":
        if app == APP:
            return [str(BIN / "floodgate-web"), "--host", "127.0.0.1", "--port", str(port), "--workers", n]
        # The same options as config/web.py, around the bare callable.
        return [
            *(str(BIN / "granian"), "--interface", "asginl", "--host", "127.0.0.1", "--port", str(port)),
            *("--workers", n, "--loop", "uvloop", "--no-access-log", "--log-level", "warning", app),
        ]
    if name == "uvicorn":
        # uvicorn at its fastest: uvloop and httptools, no access log, no lifespan.
        return [
            *(str(BIN / "uvicorn"), app, "--host", "127.0.0.1", "--port", str(port), "--workers", n),
            *("--loop", "uvloop", "--http", "httptools", "--ws", "websockets-sansio", "--lifespan", "off"),
            *("--no-proxy-headers", "--no-server-header", "--no-access-log", "--log-level", "warning"),
        ]
    raise ValueError(server)


# One per run, shared by every server it starts: production refuses a guessable key.
SECRET_KEY = secrets.token_urlsafe(50)


def production_env(port: int) -> dict[str, str]:
    """The production profile, with the values it requires set for this machine."""
    env = {k: v for k, v in os.environ.items() if k not in {"DEBUG", "FLOODGATE_PROFILE"}}
    return env | {
        "FLOODGATE_PROFILE": "production",
        "SECRET_KEY": SECRET_KEY,
        "ALLOWED_HOSTS": "127.0.0.1",
        "PUBLIC_BASE_URL": f"https://127.0.0.1:{port}",
        "PAYMENT_PROVIDER_URL": "https://provider.invalid",
        "ALLOW_SIMULATED_PAYMENTS_FOR_REHEARSAL": "1",  # a bench, not a shop: nobody pays here
        "PAYMENT_PROVIDER_SECRET": "bench",
        "PAYMENT_WEBHOOK_SECRET": "bench",
        "TRUST_X_FORWARDED_FOR": "1",  # the client plays the TLS proxy (X-Forwarded-Proto)
        "DB_POOL_MAX_SIZE": "8",
        "LOG_LEVEL": "WARNING",
    }


def start(server: str, app: str, workers: int, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    out = open(log, "ab")  # noqa: SIM115 (the server's log, open while it runs)
    process = subprocess.Popen(
        command(server, app, port, workers),
        env=production_env(port),
        cwd=ROOT,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its workers stop with it
    )
    try:
        wait_for_port(
            port,
            process=process,
            seconds=60,
            failed=lambda: f"bench servers: {server} did not start; see {log}",
        )
    except RuntimeError as error:
        sys.exit(str(error))
    return process, f"http://127.0.0.1:{port}"


def stop(process: subprocess.Popen) -> None:
    with_group = process.poll() is None
    if with_group:
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@dataclass
class Request:
    endpoint: str
    path: str
    method: str = "GET"
    headers: tuple[tuple[str, str], ...] = ()


@dataclass
class Cell:
    server: str
    endpoint: str
    round: int
    rate: float
    p50_ms: float
    p99_ms: float
    answer: str  # status and whether the edge answered, from a probe before the run
    errors: int  # socket errors and timeouts wrk counted
    load: float  # 1-minute load average when the cell started


def probe(base: str, request: Request) -> str:
    """The answer one request gets (status, edge or not), to check the cell measures the right thing."""
    http = urllib.request.Request(
        base + request.path,
        method=request.method,
        headers=dict(request.headers),
        data=BODY.encode() if request.method == "POST" else None,
    )
    try:
        with urllib.request.urlopen(http, timeout=10) as response:
            status, edge = response.status, response.headers.get("X-Floodgate-Edge")
    except urllib.error.HTTPError as error:
        status, edge = error.code, error.headers.get("X-Floodgate-Edge")
    return f"{status}{' edge' if edge == 'hit' else ''}"


def expect(base: str, request: Request, wanted: str, seconds: float = 10) -> str:
    """The answer, given a few seconds to become the wanted one (a worker's first snapshot read)."""
    deadline = time.monotonic() + seconds
    while (answer := probe(base, request)) != wanted and time.monotonic() < deadline:
        time.sleep(0.5)
    return answer


class Publisher:
    """What beat's admission.tick does for the drop: compute and publish its snapshot each second.

    A tick that fails (the database slow under the load) is logged and the next one tried:
    the edge treats a snapshot older than 5 s as unknown and hands requests to Django.
    """

    def __init__(self, drop: Any) -> None:
        self.drop = drop
        self.ticks = self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from django.db import connection

        from admission import state

        while not self._stop.is_set():
            try:
                state.publish(state.compute([self.drop]))
                self.ticks += 1
            except Exception as error:
                self.failures += 1
                say(f"publisher: {error!r}")
                connection.close()
            self._stop.wait(1.0)
        connection.close()

    def __enter__(self) -> Publisher:
        self._thread.start()
        time.sleep(1.5)  # the first snapshot is in Redis
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)


def wrk(base: str, request: Request, *, seconds: int, connections: int, threads: int) -> dict[str, Any]:
    """rate, p50_ms, p99_ms and errors of one wrk run."""
    script = OUT / f"servers-{request.endpoint.replace(' ', '-')}.lua"
    lines = [f'wrk.method = "{request.method}"']
    if request.method == "POST":
        lines.append(f"wrk.body = '{BODY}'")
    lines += [f'wrk.headers["{k}"] = "{v}"' for k, v in request.headers]
    script.write_text("\n".join(lines) + "\n")
    done = subprocess.run(
        [
            *("wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency"),
            *("-s", str(script), base + request.path),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", done.stdout)

    def number(pattern: str) -> str:
        # Anchored at a line's start: "Thread Stats" also ends lines in percentages like "75.50%".
        match = re.search(pattern, done.stdout, re.MULTILINE)
        if match is None:
            sys.exit(f"bench servers: cannot read wrk's output:\n{done.stdout}")
        return match.group(1)

    return {
        "rate": float(number(r"^Requests/sec:\s+([\d.]+)")),
        "p50_ms": parse_ms(number(r"^\s+50%\s+(\S+)")),
        "p99_ms": parse_ms(number(r"^\s+99%\s+(\S+)")),
        "errors": sum(int(x) for x in found.groups()) if found else 0,
    }


SKIPPED: list[str] = []  # cells left out, for the report
EXPECTED = {"bare": "200", "edge state": "200 edge", "edge no": "409 edge", "Django": "200"}


def measure(
    server: str, requests: list[Request], *, workers: int, round_: int, args: argparse.Namespace
) -> list[Cell]:
    cells = []
    for app, asked in ((BARE, requests[:1]), (APP, requests[1:])):
        log = OUT / f"servers-{server}.log"
        process, base = start(server, app, workers, log)
        try:
            for request in asked:
                wanted = EXPECTED[request.endpoint]
                answer = expect(base, request, wanted)
                if answer != wanted:  # not what this cell measures: leave it out, and say so
                    SKIPPED.append(f"round {round_} {server} {request.endpoint}: {answer}, not {wanted}")
                    say(f"SKIPPED {SKIPPED[-1]}")
                    continue
                # A short warm-up: every worker imports lazily and opens its Redis client on first use.
                wrk(base, request, seconds=1, connections=args.connections, threads=args.threads)
                load = os.getloadavg()[0]
                got = wrk(
                    base, request, seconds=args.seconds, connections=args.connections, threads=args.threads
                )
                after = probe(base, request)
                if after != answer:  # kept, and said: the cell mixed two kinds of answer
                    answer = f"{answer}, then {after}"
                cell = Cell(server, request.endpoint, round_, answer=answer, load=load, **got)
                say(
                    f"round {round_} {server:<10} {request.endpoint:<10} {cell.rate:>9,.0f}/s  "
                    f"p99 {cell.p99_ms:6.1f} ms  ({answer}; load {load:.1f}; {cell.errors} errors)"
                )
                cells.append(cell)
        finally:
            stop(process)
    return cells


def requests_for(slug: str) -> list[Request]:
    proxy = (("X-Forwarded-Proto", "https"),)  # as the TLS proxy in front adds it
    return [
        Request("bare", "/", headers=proxy),
        Request("edge state", f"/api/drops/{slug}", headers=proxy),
        Request(
            "edge no",
            f"/api/drops/{slug}/holds",
            method="POST",
            headers=(
                *proxy,
                ("Content-Type", "application/json"),
                ("Idempotency-Key", "bench-servers"),
                ("Authorization", "Bearer bench-servers-token"),
            ),
        ),
        Request("Django", "/healthz", headers=proxy),
    ]


def sold_out_drop() -> Any:
    from holds.services import confirm, reserve
    from shop.models import Drop

    (seller,) = buyers(1)
    gone = new_drop("servers-soldout", quantity=1, waiting_room=False)
    held = reserve(drop=gone, buyer_id=seller, quantity=1, idempotency_key="sell-the-last-one")
    # Sold, not only held: a held unit comes back when its hold expires (8 min), mid-run.
    assert confirm(hold_id=held.hold.pk)
    return Drop.objects.select_related("product").get(pk=gone.pk)


def median_rate(cells: list[Cell], server: str, endpoint: str) -> float | None:
    rates = [c.rate for c in cells if c.server == server and c.endpoint == endpoint]
    return statistics.median(rates) if rates else None


def median_ratio(cells: list[Cell], server: str, endpoint: str) -> float | None:
    """Per round, endpoint / bare under the same server; the median over the rounds."""
    ratios = []
    for round_ in {c.round for c in cells}:
        mine = {c.endpoint: c.rate for c in cells if c.server == server and c.round == round_}
        if endpoint in mine and mine.get("bare"):
            ratios.append(mine[endpoint] / mine["bare"])
    return statistics.median(ratios) if ratios else None


def label(server: str, workers: int) -> str:
    name, _, count = server.partition("-")
    n = int(count or workers)
    return "daphne, 1 process" if name == "daphne" else f"{name}, {n} worker{'s' if n > 1 else ''}"


def report(cells: list[Cell], servers: list[str], args: argparse.Namespace, machine: str) -> str:
    rounds = len({c.round for c in cells})
    lines = [
        f"# bench servers, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC",
        "",
        f"Machine: {machine}. wrk -t{args.threads} -c{args.connections}, {args.seconds} s per cell, "
        f"{rounds} round(s), median shown; wrk and the servers share the cores.",
        "",
        "| server | "
        + " | ".join(f"{e} req/s" for e in ENDPOINTS)
        + " | "
        + " | ".join(f"{e} / bare" for e in ENDPOINTS[1:])
        + " |",
        "| --- |" + " ---: |" * (2 * len(ENDPOINTS) - 1),
    ]
    for server in servers:
        rates = [median_rate(cells, server, e) for e in ENDPOINTS]
        ratios = [median_ratio(cells, server, e) for e in ENDPOINTS[1:]]
        lines.append(
            f"| {label(server, args.workers)} | "
            + " | ".join("FAILED" if r is None else f"{r:,.0f}" for r in rates)
            + " | "
            + " | ".join("FAILED" if r is None else f"{r:.2f}" for r in ratios)
            + " |"
        )
    if "daphne" in servers:
        lines += [
            "",
            "Against daphne (same endpoint, median rates):",
            "",
            "| server | " + " | ".join(ENDPOINTS) + " |",
            "| --- |" + " ---: |" * len(ENDPOINTS),
        ]
        for server in servers:
            cols = []
            for e in ENDPOINTS:
                mine, theirs = median_rate(cells, server, e), median_rate(cells, "daphne", e)
                cols.append("FAILED" if not mine or not theirs else f"{mine / theirs:.1f}x")
            lines.append(f"| {label(server, args.workers)} | " + " | ".join(cols) + " |")
    mixed = [c for c in cells if ", then " in c.answer]
    if mixed:
        lines += ["", "Cells whose answer changed during the run (the edge's snapshot went stale):", ""]
        lines += [f"- round {c.round} {c.server} {c.endpoint}: {c.answer}" for c in mixed]
    if SKIPPED:
        lines += ["", "Cells left out (the probe before the run got another answer):", ""]
        lines += [f"- {s}" for s in SKIPPED]
    loads = [c.load for c in cells]
    lines += [
        "",
        f"Load average (1 min) at the cells' starts: {min(loads):.1f} to {max(loads):.1f} on "
        f"{os.cpu_count()} CPUs; anything above the wrk and server processes is other work on the machine.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench servers")
    parser.add_argument("--seconds", type=int, default=10, help="length of each wrk run")
    parser.add_argument("--rounds", type=int, default=1, help="repeat the whole matrix; medians shown")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="wrk threads (they share the cores)")
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--servers", default=",".join(SERVERS), help=f"of {', '.join(SERVERS)}")
    args = parser.parse_args()
    servers = [s for s in args.servers.split(",") if s]
    if unknown := set(servers) - set(SERVERS):
        parser.error(f"unknown servers: {', '.join(sorted(unknown))}")
    if not shutil.which("wrk"):
        from floodgate import ensure_debian_package  # the checkout's own setup script

        ensure_debian_package("wrk", "/usr/bin/wrk", "bench servers (the HTTP load generator)")
    raise_file_limit()
    setup_django()
    OUT.mkdir(parents=True, exist_ok=True)
    for server in servers:
        (OUT / f"servers-{server}.log").unlink(missing_ok=True)
    drop = sold_out_drop()
    cells: list[Cell] = []
    total = args.rounds * len(servers) * len(ENDPOINTS)
    say(f"{total} cells of {args.seconds} s; load average now {os.getloadavg()[0]:.1f}")
    with Publisher(drop):
        for round_ in range(1, args.rounds + 1):
            # Every other round in reverse order, so no server always follows the same neighbour.
            for server in servers if round_ % 2 else servers[::-1]:
                cells += measure(
                    server, requests_for(drop.slug), workers=args.workers, round_=round_, args=args
                )
                say(f"{len(cells)}/{total} cells done")
    machine = f"{os.cpu_count()} CPUs, Linux {os.uname().release}"
    text = report(cells, servers, args, machine)
    (OUT / "servers.md").write_text(text)
    (OUT / "servers.json").write_text(json.dumps([asdict(c) for c in cells], indent=1))
    print(text)
    if failed := missing_cells(cells, servers, args.workers):
        sys.exit("bench servers: FAILED: no measured cell for " + "; ".join(failed))


def missing_cells(cells: list[Cell], servers: list[str], workers: int) -> list[str]:
    """The server and endpoint pairs with no cell (every probe got another answer): the bare
    callable is every ratio's baseline, so a missing one is a failed run, not a dash."""
    why = {s.split(": ")[0].split(" ", 2)[2]: s.split(": ", 1)[1] for s in SKIPPED}
    return [
        f"{label(server, workers)} {endpoint}"
        + (f" ({why[key]})" if (key := f"{server} {endpoint}") in why else "")
        for server in servers
        for endpoint in ENDPOINTS
        if median_rate(cells, server, endpoint) is None
    ]


if __name__ == "__main__":
    main()
