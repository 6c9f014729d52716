"""`python3 floodgate.py prove faults`: a waiting-room drop sold out while the shop's parts fail under it.

Each run is a fresh sale on servers of its own: one PostgreSQL server (the embedded binaries;
for the Patroni fault, two nodes under Patroni with etcd, devtools/patroni.py), Redis under
Sentinel (Debian's redis-server, a master and its replica, three sentinels), the simulated
provider, floodgate-web (2 workers), a Celery worker and beat. The drop: --units (100) units, a
waiting room drawn at the start and admitted in one-second waves, the shortest hold a drop may
have (30 s) and the shortest offer (15 s). The crowd (--buyers, 2,000; HTTP, bearer tokens) joins
before the start, polls its place with its queue ticket, reserves with its admission token, pays at the
provider and waits for the order; some holders walk away, so their holds expire, are reclaimed
and are offered to the next tickets, who pay. 503/429 are retried after Retry-After, as a client
does. Every answer that moves the sale (a hold, an offer, a payment started or made, an order
confirmed, an admission) is a "move", timed from when its buyer began to wait for it (the
request, or the poll before; the first admission from the start, the first offer from the
first expiry).

A fault run lands its fault on each phase of the sale in turn (`--phase` picks some): the draw, a
wave, the sell-out (every unit held), the first expiry and the first offer; a fault that lasts
(beat stopped, a misbehaving provider) spans all of them. The Patroni leader's death ends when
Patroni has promoted the standby; the dead node rejoins as the new leader's synchronous standby
(rewound or cloned) before the next. The chaos run puts a random fault every few seconds for
`--chaos-seconds`; `--every-fault` runs each fault of one server once, in a shuffled order,
instead. Then, per run:

- every hold and order a buyer was told about exists, with that buyer (holds lost: 0);
- the invariant is exact, and the drop sold out;
- the admission order is exact: numbers 1..N, one per entry, each buyer told one number, and no
  hold (but an offer) of a ticket past the admitted mark of the last wave before it;
- offers in order: they went out in ticket order, and no ticket that never held a unit was passed;
- every order decided, a confirmed order is a sold hold, none captured twice; no 500 answer;
- every buyer answered: a unit, "sold out" or a refusal (the crowd stops at the first "sold out";
  each buyer still waiting then asks once more and must be told within half a minute);
- seconds until the sale moved again: the longest a sale with buyers waiting stood still, from a
  fault's start to its first move after the fault's end; and until the last buyer caught waiting
  at its end had their answer (each the worst of the run's faults).

The run without a fault ("none") is the baseline the others are read against. The report goes to
bench/out/faults.{md,json}; docs/FAULTS.md shows the last one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import itertools
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Coroutine, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from devtools import patroni as ha  # "ha": `patroni` is a flag of this module's functions
from devtools import sentinel
from devtools.failover import BIN, OUT, manage, migrate, wait_listening
from devtools.pg_servers import ROOT, Cluster, pg_bin, server_folder
from devtools.ports import cleanup_on_signal, free_port

SLUG = "fault-run"
HOLD_SECONDS = 30  # the shortest hold a drop may have (shop.models.HOLD_SECONDS_RANGE)
OFFER_SECONDS = 15  # and the shortest offer
PHASES = ["draw", "wave", "sell-out", "expiry", "offer"]
REDIS_DOWN_AFTER_MS = 3000  # the sentinels fail a silent master over after this: a 2 s pause is a pause
DEFAULT_PROVIDER = {"latency_ms": 50, "failure_rate": 0.0, "duplicates": 1, "late_seconds": 0.0}
PROVIDER: dict[
    str, dict[str, float]
] = {  # how the provider misbehaves for its fault (provider_sim's /api/config)
    "provider-slow": {"latency_ms": 5000},
    "provider-failing": {"failure_rate": 0.5},
    "provider-late-thrice": {"duplicates": 3, "late_seconds": 3.0},
}
INSTANT = [
    "postgres-fast-restart",
    "postgres-immediate-restart",
    "backend-killed",
    "web-killed",
    "redis-paused",
    "redis-master-killed",
    "worker-killed",
]
LASTING = ["beat-stopped", *PROVIDER]  # in a fault run, from the draw to past the first offer
# its run's PostgreSQL is two nodes under Patroni (devtools/patroni.py): the leader dies on each phase
PATRONI = "patroni-leader-killed"
ONE_SERVER = INSTANT + LASTING  # the faults of a run on one PostgreSQL server: the chaos run's
FAULTS = [*ONE_SERVER, PATRONI]
CHAOS = [*INSTANT, "beat-stopped"]  # the chaos run's picks (the provider misbehaves on its own runs)
FAILOVER_SECONDS = 60  # a run's deadline grows by this per Patroni failover (TTL 20 s, then a rejoin)


def say(message: str) -> None:
    print(f"faults: {message}", flush=True)  # noqa: T201 (a command's own output)


def one_cluster(folder: Path) -> Cluster:
    """A single PostgreSQL server (fsync on) with the floodgate database."""
    server_folder(folder)
    cluster = Cluster("db", folder / "db", free_port(), pg_bin())
    cluster.run("initdb", "-D", str(cluster.folder), "-U", "postgres", "--auth=trust", "-E", "UTF8")
    with open(cluster.folder / "postgresql.conf", "a") as conf:
        conf.write(
            f"listen_addresses = '127.0.0.1'\nunix_socket_directories = '{folder}'\n"
            f"max_connections = 200\nport = {cluster.port}\n"
        )
    cluster.start()
    cluster.query("CREATE DATABASE floodgate", database="postgres")
    return cluster


def spawn(name: str, command: list[str], env: dict[str, str], folder: Path) -> subprocess.Popen:
    with open(folder / f"{name}.log", "ab") as out:
        return subprocess.Popen(
            command, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop_group(process: subprocess.Popen) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@dataclass
class Shop:
    """One run's servers; `processes` holds the app's (web, worker, beat, provider) as they are now."""

    folder: Path
    cluster: Cluster
    redis: sentinel.Sentinels | None  # None: a partitions run's Redis, not under Sentinel
    env: dict[str, str]
    base: str
    provider: str
    patroni: ha.Patroni | None = None  # on its fault's run
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    commands: dict[str, list[str]] = field(default_factory=dict)
    reviving: asyncio.Task | None = None  # a killed Redis master or PostgreSQL leader rejoining as replica

    def start(self, name: str) -> None:
        self.processes[name] = spawn(name, self.commands[name], self.env, self.folder)

    def configure_provider(self, **tunables: float) -> None:
        import httpx

        httpx.post(
            f"{self.provider}/api/config",
            json=tunables,
            headers={"Authorization": "Bearer sim-secret-dev"},
            timeout=5,
        ).raise_for_status()

    def unsettled(self) -> tuple[int, int]:
        return self.cluster.query(
            "SELECT (SELECT count(*) FROM checkout_order WHERE state = 'pending'),"
            " (SELECT count(*) FROM checkout_payment WHERE state IN ('capture_pending', 'void_pending'))"
        )[0]

    def settle(self, timeout: float = 90) -> None:
        """Wait until every order is decided and every confirmed one captured (the worker's work)."""
        deadline = time.monotonic() + timeout
        while (left := self.unsettled()) != (0, 0) and time.monotonic() < deadline:
            time.sleep(0.5)
        if left != (0, 0):
            say(f"not settled within {timeout:.0f} s: {left} orders pending, payments settling")


@contextlib.contextmanager
def database(folder: Path, *, patroni: bool) -> Iterator[tuple[Cluster, str, ha.Patroni | None]]:
    """The run's PostgreSQL (to query, the app's DATABASE_URL, the Patroni cluster if it is one)."""
    if patroni:
        with ha.running(folder / "patroni") as nodes:
            yield nodes.following(), nodes.database_url, nodes
        return
    cluster = one_cluster(folder)
    try:
        yield cluster, cluster.url("floodgate") + "?connect_timeout=2", None
    finally:
        cluster.run("pg_ctl", "-D", str(cluster.folder), "-m", "immediate", "stop", check=False)


@contextlib.contextmanager
def servers(
    folder: Path, buyers: int, units: int, starts_in: int, *, patroni: bool = False
) -> Iterator[tuple[Shop, list[str], dict]]:
    """The run's servers, its drop and its buyers (tokens, ids); everything stopped on the way out."""
    shutil.rmtree(folder, ignore_errors=True)
    try:
        with (
            database(folder, patroni=patroni) as (cluster, database_url, nodes),
            sentinel.running(folder / "redis", down_after_ms=REDIS_DOWN_AFTER_MS) as redis,
        ):
            provider_port, web_port = free_port(), free_port()
            env = {
                **os.environ,
                **redis.env,
                "FLOODGATE_PROFILE": "dev",
                "DEBUG": "0",
                "DATABASE_URL": database_url,
                "IP_RATE_LIMIT_BURST": "1000000",  # one address plays the whole crowd
                "IP_RATE_LIMIT_PER_SECOND": "1000000",
                "DB_POOL_TIMEOUT": "2",
                "LOG_LEVEL": "WARNING",
                "DUTY_TAKEOVER": "1",
                "PUBLIC_BASE_URL": f"http://127.0.0.1:{web_port}",  # webhooks and return links
                "PAYMENT_PROVIDER_URL": f"http://127.0.0.1:{provider_port}",
                "PAYMENT_PROVIDER_PUBLIC_PREFIXES": f"http://127.0.0.1:{provider_port}",
                "PROVIDER_PUBLIC_URL": f"http://127.0.0.1:{provider_port}",
                **{f"PROVIDER_{name.upper()}": str(value) for name, value in DEFAULT_PROVIDER.items()},
            }
            migrate(env)
            lines = manage(env, "create_buyers", "--count", str(buyers), "--prefix", "ft").splitlines()
            tokens = [json.loads(line)["token"] for line in lines]
            names = {json.loads(line)["username"]: i for i, line in enumerate(lines)}
            ids = {names[n]: i for n, i in cluster.query("SELECT username, id FROM auth_user")}
            celery = [str(BIN / "celery"), "-A", "config.celery:app"]
            shop = Shop(
                folder,
                cluster,
                redis,
                env,
                f"http://127.0.0.1:{web_port}",
                f"http://127.0.0.1:{provider_port}",
                patroni=nodes,
                commands={
                    "provider": [
                        str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(provider_port),
                        "devtools.provider_sim:app",
                    ],
                    "web": [
                        str(BIN / "floodgate-web"), "--host", "127.0.0.1", "--port", str(web_port),
                        "--workers", "2",
                    ],
                    "worker": [*celery, "worker", "-l", "warning", "--concurrency", "2"],
                    "beat": [*celery, "beat", "-l", "warning", "-s", str(folder / "beat-schedule")],
                },
            )  # fmt: skip
            try:
                for name in ("provider", "web", "worker", "beat"):
                    shop.start(name)
                wait_listening(provider_port, shop.processes["provider"], folder / "provider.log")
                wait_listening(web_port, shop.processes["web"], folder / "web.log")
                manage(
                    env, "create_drop", "--slug", SLUG, "--quantity", str(units), "--buckets", "4",
                    "--per-buyer-limit", "1", "--starts-in", str(starts_in), "--waiting-room",
                    "--wave-seconds", "1", "--hold-seconds", str(HOLD_SECONDS),
                    "--offer-seconds", str(OFFER_SECONDS), "--join-work-bits", "0",
                )  # fmt: skip
                yield shop, tokens, ids
            finally:
                for process in shop.processes.values():
                    stop_group(process)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def step(url: str) -> str:
    """A request's path with its ids taken out: /api/holds/N/payment."""
    return "/".join("N" if part.isdigit() else part for part in url.split("?")[0].split("/")[-3:])


@dataclass
class Crowd:
    """The buyers of one sale and everything they were told."""

    base: str
    tokens: list[str]
    buyer_ids: list[int]
    starts_at: float  # seconds from t0
    join_rate: float
    walk_hold: float  # a holder's chance to walk away (the hold expires)
    walk_offer: float  # an offered buyer's (the offer lapses)
    deadline: float
    rng: random.Random = field(default_factory=lambda: random.Random(20))
    t0: float = field(default_factory=time.monotonic)
    holds: dict[int, tuple[int, str]] = field(default_factory=dict)  # hold -> (buyer, key or "offer")
    orders: dict[int, int] = field(default_factory=dict)  # order -> hold
    numbers: dict[int, set[int]] = field(default_factory=dict)  # buyer -> ticket numbers told
    moves: list[tuple[float, float]] = field(default_factory=list)  # (waited since, answered at)
    held_at: list[float] = field(default_factory=list)  # when a buyer was told of a hold or an offer
    statuses: Counter[int] = field(default_factory=Counter)
    refusals: Counter[str] = field(default_factory=Counter)  # "409 sold_out": the 4xx answers by code
    errors: list[str] = field(default_factory=list)  # 500s and what else no buyer should see
    too_late: int = 0  # payments refused because the hold had run out meanwhile
    names: dict[str, list[str]] = field(default_factory=dict)  # the shop's name -> its A records
    answered: set[int] = field(default_factory=set)  # buyers given a last word: a unit, sold out, a refusal
    tickets: dict[int, str] = field(default_factory=dict)  # buyer index -> the queue ticket it was given
    phases: dict[str, asyncio.Event] = field(default_factory=dict)
    finished: asyncio.Event = field(default_factory=asyncio.Event)  # every buyer is done
    phase_at: dict[str, float] = field(default_factory=dict)
    first_expiry: float | None = None
    sold_out_at: float | None = None

    def now(self) -> float:
        return time.monotonic() - self.t0

    def over(self) -> bool:
        return self.sold_out_at is not None or self.now() > self.deadline

    def reach(self, phase: str) -> None:
        if phase not in self.phase_at:
            self.phase_at[phase] = self.now()
            self.phases[phase].set()

    async def until(self, phase: str) -> None:
        """Until the sale reaches the phase, or every buyer is done."""
        reached, over = (
            asyncio.ensure_future(self.phases[phase].wait()),
            asyncio.ensure_future(self.finished.wait()),
        )
        await asyncio.wait({reached, over}, return_when=asyncio.FIRST_COMPLETED)
        reached.cancel()
        over.cancel()

    def moved(self, since: float) -> None:
        """A buyer's wait, from `since`, ended in an answer that moved the sale."""
        self.moves.append((since, self.now()))

    async def call(
        self,
        session,
        method: str,
        url: str,
        headers: dict[str, str],
        *,
        until: float | None = None,
        **kwargs: object,
    ) -> tuple[int, dict]:
        """One request until a final answer: 503/429 and a lost connection retried, as a client does,
        while the sale goes on (or until `until`)."""
        while (self.now() < until) if until is not None else not self.over():
            try:
                async with session.request(
                    method, url if url.startswith("http") else self.base + url, headers=headers,
                    allow_redirects=False, **kwargs,
                ) as answer:  # fmt: skip
                    status = answer.status
                    retry = float(answer.headers.get("Retry-After") or 0.5)
                    is_json = answer.content_type == "application/json"
                    body = await answer.json() if is_json else {}
            except (TimeoutError, aiohttp.ClientError, ValueError) as error:
                self.statuses[0] += 1
                self.refusals[f"no answer: {type(error).__name__} ({method} {step(url)})"] += 1
                await asyncio.sleep(0.5)
                continue
            self.statuses[status] += 1
            if status >= 500 and status != 503:
                self.errors.append(f"{method} {url}: {status} {body}")
            if status in {429, 503}:
                self.refusals[f"{status} {body.get('error', '')} ({method} {step(url)})"] += 1
                await asyncio.sleep(min(retry, 2.0) * (0.5 + self.rng.random()))
                continue
            if status >= 400:
                self.refusals[f"{status} {body.get('error', '')} ({method} {step(url)})"] += 1
            return status, body
        return 0, {}

    async def buyer(self, session, index: int) -> None:
        await asyncio.sleep(index / self.join_rate)
        buyer = self.buyer_ids[index]
        auth = {"Authorization": f"Bearer {self.tokens[index]}"}
        queue = f"/api/drops/{SLUG}/queue"
        status, body = await self.call(session, "POST", queue, auth)
        if status != 200:
            if status:
                self.answered.add(index)
                self.errors.append(f"join: {status} {body}")
            return
        ticket = str(body.get("queue_ticket") or "")
        self.tickets[index] = ticket
        tried = False
        asked = self.now()  # when the answer in `body` was asked for
        while not self.over():
            if body.get("ticket") is not None:
                self.numbers.setdefault(buyer, set()).add(int(body["ticket"]))
            offer = body.get("offer")
            if offer and offer.get("state") == "held":
                self.holds[int(offer["hold"])] = (buyer, "offer")
                self.held_at.append(self.now())
                self.answered.add(index)
                first = "offer" not in self.phase_at
                self.moved(
                    min(asked, self.first_expiry) if first and self.first_expiry is not None else asked
                )
                self.reach("offer")
                if self.rng.random() >= self.walk_offer:
                    await self.pay(session, auth, int(offer["hold"]))
                return  # walked away: the offer lapses and goes to the next ticket
            if body.get("admission_token") and not tried:
                tried = True
                self.moved(min(asked, self.starts_at) if "wave" not in self.phase_at else asked)
                self.reach("wave")
                key = uuid.uuid4().hex
                since = self.now()
                headers = {**auth, "Idempotency-Key": key, "X-Admission-Token": str(body["admission_token"])}
                status, held = await self.call(
                    session, "POST", f"/api/drops/{SLUG}/holds", headers, json={"quantity": 1}
                )
                if status in {200, 201}:
                    self.holds[int(held["id"])] = (buyer, key)
                    self.held_at.append(self.now())
                    self.answered.add(index)
                    self.moved(since)
                    if self.rng.random() >= self.walk_hold:
                        await self.pay(session, auth, int(held["id"]))
                    elif self.first_expiry is None:
                        self.first_expiry = self.now() + HOLD_SECONDS
                    return
                # too late (every unit held): wait on, for a unit that comes back
            if body.get("state") == "all_held" or body.get("remaining") == 0:
                self.reach("sell-out")
            if body.get("state") == "sold_out":
                self.sold_out_at = self.sold_out_at or self.now()
                self.answered.add(index)
                return
            if body.get("state") in {"ended", "closed"}:
                self.answered.add(index)
                return
            await asyncio.sleep((3.0 if body.get("unlikely") else 1.0) * (0.75 + self.rng.random() / 2))
            asked = self.now()
            status, polled = await self.call(session, "GET", queue, {**auth, "X-Queue-Ticket": ticket})
            if status == 200:
                body = {**body, **polled}
                ticket = str(polled.get("queue_ticket") or ticket)
            elif status:
                self.answered.add(index)
                self.errors.append(f"poll: {status} {polled}")
                return

    async def pay(self, session, auth: dict[str, str], hold: int) -> None:
        """Start paying, pay at the provider, wait for the order; a declined card is tried again."""
        for _card in range(5):
            since = self.now()
            status, started = await self.call(session, "POST", f"/api/holds/{hold}/payment", auth)
            if status != 202:
                if started.get("error") == "hold_not_active":
                    self.too_late += 1  # its hold ran out before the buyer got to pay
                elif status:
                    self.errors.append(f"payment: {status} {started}")
                return
            order = int(started["order"]["id"])
            self.orders[order] = hold
            self.moved(since)
            since = self.now()
            status, _ = await self.call(
                session, "POST", str(started["redirect_url"]), {}, data={"action": "pay"}
            )
            if status != 303:
                continue
            self.moved(since)
            paid = self.now()
            while not self.over():
                await asyncio.sleep(1.0)
                status, listed = await self.call(session, "GET", "/api/orders", auth)
                mine = {o["id"]: o["state"] for o in listed.get("orders", [])}
                if mine.get(order) == "confirmed":
                    self.moved(paid)
                    return
                if mine.get(order) == "failed":
                    break  # declined: another card

    async def run(self) -> None:
        for phase in PHASES:
            self.phases[phase] = asyncio.Event()

        async def timers() -> None:
            await asyncio.sleep(max(0.0, self.starts_at - 0.5 - self.now()))
            self.reach("draw")  # the fault is in force when the draw is due
            while self.first_expiry is None and not self.over():
                await asyncio.sleep(0.1)
            if self.first_expiry is not None:
                await asyncio.sleep(max(0.0, self.first_expiry - 0.5 - self.now()))
                self.reach("expiry")

        resolver = Records(self.names) if self.names else None
        # a connection per buyer, as real buyers have; a name asked again for each new one
        connector = aiohttp.TCPConnector(limit=0, resolver=resolver, use_dns_cache=resolver is None)
        timeout = aiohttp.ClientTimeout(total=30)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
            clock = asyncio.create_task(timers())
            await asyncio.gather(*(self.buyer(session, i) for i in range(len(self.tokens))))
            clock.cancel()
            if self.sold_out_at is not None:
                await self.last_word(session)

    async def last_word(self, session) -> None:
        """The crowd stops at the first "sold out"; every other buyer still waiting asks once more,
        as their page would, and must be told it too (or hold a unit) within half a minute."""
        until = self.now() + 30
        queue = f"/api/drops/{SLUG}/queue"

        async def ask(index: int) -> None:
            auth = {"Authorization": f"Bearer {self.tokens[index]}"}
            ticket = self.tickets.get(index)
            if ticket is None:  # never got into the line: joining now must say sold out
                status, body = await self.call(session, "POST", queue, auth, until=until)
            else:
                status, body = await self.call(
                    session, "GET", queue, {**auth, "X-Queue-Ticket": ticket}, until=until
                )
            offered = (body.get("offer") or {}).get("state") == "held"
            if status and (status != 200 or offered or body.get("state") in {"sold_out", "ended", "closed"}):
                self.answered.add(index)

        waiting = [i for i in range(len(self.tokens)) if i not in self.answered]
        await asyncio.gather(*(ask(i) for i in waiting))


class Records(AbstractResolver):
    """A name's A records, rotated at each lookup as round-robin DNS does; aiohttp tries the next
    address when one refuses or times out, as a browser does."""

    def __init__(self, names: dict[str, list[str]]) -> None:
        self.names = names
        self.turn = 0

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        addresses = self.names.get(host, [host])
        self.turn += 1
        first = self.turn % len(addresses)
        return [
            ResolveResult(hostname=host, host=a, port=port, family=socket.AF_INET, proto=0, flags=0)
            for a in addresses[first:] + addresses[:first]
        ]

    async def close(self) -> None:
        return None


@dataclass
class Injection:
    fault: str
    phase: str
    at: float
    end: float
    moved_again: float | None = None  # the longest standstill from its start to the next move after its end
    recovery: float | None = None  # seconds from its end until the last buyer caught then was answered


async def inflict(fault: str, shop: Shop, *, lasting: float = 0.0) -> None:
    """Put the fault on the shop and lift it again; `lasting` seconds for beat (in chaos)."""
    cluster, redis = shop.cluster, shop.redis
    if fault in {"redis-master-killed", "redis-paused", PATRONI} and shop.reviving is not None:
        await shop.reviving  # the last killed master is a replica again: there is one to promote
        shop.reviving = None
    if fault.startswith("postgres"):
        mode = "fast" if "fast" in fault else "immediate"
        log = str(shop.folder / "db.log")
        await asyncio.to_thread(
            cluster.run, "pg_ctl", "-D", str(cluster.folder), "-m", mode, "-w", "restart", "-l", log
        )
    elif fault == "backend-killed":
        for _ in range(5):  # every app backend, a few times while claims run
            await asyncio.to_thread(
                cluster.query,
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = 'floodgate' AND pid <> pg_backend_pid()",
                database="postgres",
            )
            await asyncio.sleep(0.1)
    elif fault == "web-killed":
        web = shop.processes["web"].pid
        children = subprocess.run(["pgrep", "-P", str(web)], capture_output=True, text=True).stdout.split()
        os.kill(int(children[0]), signal.SIGKILL)  # one of the two workers, mid-request
    elif fault == "redis-paused":
        assert redis is not None  # this module's runs put Redis under Sentinel
        pid = await asyncio.to_thread(redis.master_pid)
        os.kill(pid, signal.SIGSTOP)
        await asyncio.sleep(2.0)
        os.kill(pid, signal.SIGCONT)
    elif fault == "redis-master-killed":
        assert redis is not None  # this module's runs put Redis under Sentinel
        old = await asyncio.to_thread(redis.kill_master)
        await asyncio.to_thread(redis.wait_for_promotion, old)
        # the fault is over with the promotion; the old master rejoins meanwhile
        shop.reviving = asyncio.create_task(asyncio.to_thread(redis.revive, old))
    elif fault == PATRONI:  # the leader's machine dies: Patroni and its PostgreSQL together
        nodes = shop.patroni
        assert nodes is not None  # the Patroni fault's run is on a Patroni cluster (servers(patroni=True))
        leader = await asyncio.to_thread(nodes.wait_for_leader)
        await asyncio.to_thread(leader.kill)
        await asyncio.to_thread(nodes.wait_for_leader, other_than=leader)
        # the fault is over when Patroni has promoted the standby; the dead leader rejoins meanwhile
        shop.reviving = asyncio.create_task(asyncio.to_thread(nodes.rejoin, leader))
    elif fault in {"worker-killed", "beat-stopped"}:
        name = "worker" if fault == "worker-killed" else "beat"
        os.killpg(shop.processes[name].pid, signal.SIGKILL)  # mid-webhook, mid-sweep, mid-tick
        await asyncio.sleep(2.0 if name == "worker" else lasting)
        shop.start(name)
    elif fault in PROVIDER:
        await asyncio.to_thread(shop.configure_provider, **PROVIDER[fault])
        await asyncio.sleep(lasting)
        await asyncio.to_thread(shop.configure_provider, **DEFAULT_PROVIDER)


async def on_phases(
    fault: str, shop: Shop, crowd: Crowd, done: list[Injection], phases: list[str] = PHASES
) -> None:
    """A fault run: an instant fault on each phase as it comes; a lasting one from the draw to past the
    first offer."""
    if fault == "none":
        return
    for phase in phases if fault not in LASTING else PHASES[:1]:
        await crowd.until(phase)
        if crowd.over():
            return
        at = crowd.now()
        say(f"{fault} on the {phase} at {at:.1f} s")
        try:
            if fault in LASTING:
                await inflict_lasting(fault, shop, until_offered(crowd))
            else:
                await inflict(fault, shop)
        finally:
            done.append(Injection(fault, "draw to offer" if fault in LASTING else phase, at, crowd.now()))


async def until_offered(crowd: Crowd) -> None:
    """Until a few seconds past the first offer (or the end of the sale)."""
    await crowd.until("offer")
    if not crowd.finished.is_set():
        await asyncio.sleep(5)


async def inflict_lasting(fault: str, shop: Shop, until: Awaitable[None]) -> None:
    """A fault that lasts until `until` is done."""
    if fault == "beat-stopped":
        os.killpg(shop.processes["beat"].pid, signal.SIGKILL)
    else:
        await asyncio.to_thread(shop.configure_provider, **PROVIDER[fault])
    try:
        await until
    finally:
        await lift(fault, shop)


async def lift(fault: str, shop: Shop) -> None:
    if fault == "beat-stopped":
        shop.start("beat")
    else:
        await asyncio.to_thread(shop.configure_provider, **DEFAULT_PROVIDER)


async def chaos(
    shop: Shop, crowd: Crowd, done: list[Injection], *, seconds: float, every_fault: bool, rng: random.Random
) -> None:
    """A random fault every few seconds from the draw on (or every fault once, shuffled)."""
    await crowd.until("draw")
    picks = rng.sample(ONE_SERVER, len(ONE_SERVER)) if every_fault else []
    started = crowd.now()
    while not crowd.over() and (picks if every_fault else crowd.now() - started < seconds):
        fault = picks.pop() if every_fault else rng.choice(CHAOS)
        at = crowd.now()
        say(f"chaos: {fault} at {at:.1f} s")
        try:
            await inflict(fault, shop, lasting=3.0 if every_fault else rng.uniform(4, 10))
        finally:
            done.append(Injection(fault, "chaos", at, crowd.now()))
        await asyncio.sleep(rng.uniform(0.5, 1.5) if every_fault else rng.uniform(1, 4))
    crowd.walk_hold = crowd.walk_offer = 0.0  # the chaos is over: the rest of the crowd buys


def standstill(moves: list[tuple[float, float]], start: float, end: float) -> float | None:
    """The longest time, from a fault's start until the sale's first move after its end, in which
    some buyer was waiting and nobody's purchase moved on (None: the sale never moved again)."""
    after = [at for _since, at in moves if at > end]
    if not after:
        return None
    stop = min(after)
    points = [start, *sorted(at for _since, at in moves if start < at < stop), stop]
    waits = sorted(moves)
    worst = 0.0
    for a, b in itertools.pairwise(points):
        if b - a > worst and any(since <= a and at >= b for since, at in waits):
            worst = b - a
    return round(worst, 2)


@dataclass
class Result:
    run: str
    units: int
    buyers: int
    injections: list[Injection]
    held: int
    sold: int
    drift: int
    holds_told: int
    holds_lost: int
    orders_told: int
    orders_lost: int
    offers: int
    too_late: int
    admission_exact: bool
    offers_in_order: bool
    moved_again: float | None  # the longest the sale stood still over a fault (the worst injection)
    recovery: float | None
    first_hold: float | None  # seconds from the start to the first hold
    expiry_to_offer: float | None  # from the first expiry to the first offer a buyer saw
    sold_out: float | None  # from the start to the sale's last unit sold
    statuses: dict[str, int]
    passed: dict[str, bool]
    details: dict[str, object]  # what a failed check found
    unanswered: int = 0  # buyers never given a last word (a unit, sold out, a refusal)


def check(
    run: str, shop: Shop, crowd: Crowd, injections: list[Injection], units: int, *, every_fault: bool = False
) -> Result:
    query = shop.cluster.query
    drop = query("SELECT id FROM shop_drop WHERE slug = %s", [SLUG])[0][0]
    rows = {
        hold: (state, key, buyer)
        for hold, state, key, buyer in query(
            "SELECT id, state, idempotency_key, buyer_id FROM holds_hold WHERE drop_id = %s", [drop]
        )
    }
    lost = [
        hold
        for hold, (buyer, key) in crowd.holds.items()
        if hold not in rows
        or rows[hold][0] not in {"held", "sold", "expired", "released"}
        or rows[hold][2] != buyer
        or (rows[hold][1] != key if key != "offer" else not rows[hold][1].startswith("offer:"))
    ]
    invariant = json.loads(manage(shop.env, "check_invariant", SLUG) or "{}")
    # Admission: numbers 1..N once each; a buyer told one number, the one on record; no claim (offers
    # aside) by a ticket the last wave before it had not admitted.
    # The draw numbers its entries 1..D (unique: a constraint); a later join gets a number past
    # them (a counter rebuilt after a fault may skip some, never reuse one).
    count, numbered, drawn, in_draw = query(
        "SELECT count(*), count(t.number), q.drawn_entries,"
        " count(*) FILTER (WHERE t.number <= q.drawn_entries)"
        " FROM admission_ticket t JOIN admission_queue q ON q.drop_id = t.drop_id WHERE t.drop_id = %s"
        " GROUP BY q.drawn_entries",
        [drop],
    )[0]
    numbers = dict(query("SELECT buyer_id, number FROM admission_ticket WHERE drop_id = %s", [drop]))
    skipped = query(
        "SELECT count(*) FROM holds_hold h JOIN admission_ticket t"
        " ON t.drop_id = h.drop_id AND t.buyer_id = h.buyer_id"
        " WHERE h.drop_id = %s AND h.idempotency_key NOT LIKE 'offer:%%' AND t.number > COALESCE("
        "(SELECT max(w.admitted_through) FROM admission_wave w WHERE w.drop_id = h.drop_id"
        " AND w.at <= h.created_at), 0)",
        [drop],
    )[0][0]
    admission_exact = (
        count == numbered
        and in_draw == drawn
        and skipped == 0
        and all(told == {numbers.get(buyer)} for buyer, told in crowd.numbers.items())
    )
    # Offers: in ticket order, batch by batch; none passed over a ticket that never held a unit.
    offers = query(
        "SELECT h.created_at, t.number FROM holds_hold h JOIN admission_ticket t"
        " ON t.drop_id = h.drop_id AND t.buyer_id = h.buyer_id"
        " WHERE h.drop_id = %s AND h.idempotency_key LIKE 'offer:%%' ORDER BY h.created_at, t.number",
        [drop],
    )
    batches: dict[dt.datetime, list[int]] = {}
    for at, number in offers:
        batches.setdefault(at, []).append(number)
    ordered = [batches[at] for at in sorted(batches)]
    passed_over = query(
        "SELECT count(*) FROM admission_ticket t WHERE t.drop_id = %s AND t.number < %s"
        " AND NOT EXISTS (SELECT 1 FROM holds_hold h"
        "  WHERE h.drop_id = t.drop_id AND h.buyer_id = t.buyer_id)",
        [drop, max((n for _, n in offers), default=0)],
    )[0][0]
    offers_in_order = passed_over == 0 and all(max(a) < min(b) for a, b in itertools.pairwise(ordered))
    # Orders: told ones exist; every one decided; confirmed <=> sold; captured once.
    found = dict(query("SELECT id, state FROM checkout_order WHERE id = ANY(%s)", [list(crowd.orders)]))
    orders_lost = len(set(crowd.orders) - set(found))
    twice, mismatched, uncaptured = query(
        "SELECT (SELECT count(*) FROM (SELECT o.id FROM checkout_order o JOIN checkout_payment p"
        "   ON p.order_id = o.id WHERE p.state = 'captured' GROUP BY o.id HAVING count(*) > 1) x),"
        " (SELECT count(*) FROM checkout_order o JOIN holds_hold h ON h.id = o.hold_id"
        "   WHERE o.state = 'confirmed' AND h.state <> 'sold'),"
        " (SELECT count(*) FROM checkout_order o WHERE o.state = 'confirmed' AND NOT EXISTS"
        "   (SELECT 1 FROM checkout_payment p WHERE p.order_id = o.id AND p.state = 'captured'))"
    )[0]
    sold_without = query(
        "SELECT count(*) FROM holds_hold h WHERE h.drop_id = %s AND h.state = 'sold' AND NOT EXISTS"
        " (SELECT 1 FROM checkout_order o WHERE o.hold_id = h.id AND o.state = 'confirmed')",
        [drop],
    )[0][0]
    sold_out = query(
        "SELECT EXTRACT(EPOCH FROM max(o.updated_at) - d.starts_at) FROM shop_drop d"
        " JOIN holds_hold h ON h.drop_id = d.id JOIN checkout_order o ON o.hold_id = h.id"
        " WHERE d.id = %s AND o.state = 'confirmed' GROUP BY d.starts_at",
        [drop],
    )
    for injection in injections:
        injection.moved_again = standstill(crowd.moves, injection.at, injection.end)
        # the last buyer caught waiting at the fault's end: how long after it they had their answer
        # (nobody waiting then: the first answer after it, from when its buyer began to wait)
        caught = [at - injection.end for since, at in crowd.moves if since <= injection.end < at]
        later = [at - since for since, at in crowd.moves if since > injection.end]
        injection.recovery = round(max(caught) if caught else min(later), 2) if caught or later else None
    tail_ok = all(i.moved_again is not None or i.end >= (crowd.sold_out_at or 1e9) - 0.5 for i in injections)
    recoveries = [i.recovery for i in injections if i.recovery is not None]
    stalls = [i.moved_again for i in injections if i.moved_again is not None]
    first_hold = min(crowd.held_at, default=None)
    offered_at = crowd.phase_at.get("offer")
    sold = int(invariant.get("sold", -1))
    passed = {
        "holds lost: 0": not lost,
        "orders lost: 0": orders_lost == 0,
        "invariant exact": invariant.get("drift") == 0,
        "sold out": sold == units,
        "admission order exact": admission_exact,
        "offers in order": offers_in_order and bool(offers),
        "every order decided, confirmed = sold, captured once": (
            shop.unsettled() == (0, 0) and twice == mismatched == uncaptured == sold_without == 0
        ),
        "no 500 and no unexpected refusal": not crowd.errors,
        "every buyer answered": len(crowd.answered) == len(crowd.tokens),
        "the sale moved after every fault": tail_ok,
        "every phase reached": set(crowd.phase_at) == set(PHASES),
    }
    if every_fault:
        passed["every fault put on the sale"] = {i.fault for i in injections} == set(ONE_SERVER)
    rejoined = None
    if shop.patroni is not None:  # the next failover needs a synchronous standby to promote
        nodes = shop.patroni
        leader = nodes.leader()
        rejoined = (
            leader is not None
            and nodes.sync_standby(leader) is not None
            and all(node.role() for node in nodes.nodes)
        )
        passed["every killed leader rejoined, a synchronous standby"] = rejoined
    return Result(
        run=run,
        units=units,
        buyers=len(crowd.tokens),
        injections=injections,
        held=int(invariant.get("held", -1)),
        sold=sold,
        drift=int(invariant.get("drift", -1)),
        holds_told=len(crowd.holds),
        holds_lost=len(lost),
        orders_told=len(crowd.orders),
        orders_lost=orders_lost,
        offers=len(offers),
        too_late=crowd.too_late,
        admission_exact=admission_exact,
        offers_in_order=offers_in_order,
        moved_again=max(stalls) if stalls else None,
        recovery=max(recoveries) if recoveries else None,
        first_hold=round(first_hold - crowd.starts_at, 2) if first_hold is not None else None,
        expiry_to_offer=(
            round(offered_at - crowd.first_expiry, 2) if offered_at and crowd.first_expiry else None
        ),
        sold_out=round(float(sold_out[0][0]), 2) if sold_out else None,
        statuses={str(k): v for k, v in sorted(crowd.statuses.items())},
        passed=passed,
        unanswered=len(crowd.tokens) - len(crowd.answered),
        details={
            "rejoined": rejoined,
            "errors": crowd.errors[:10],
            "tickets": {"count": count, "numbered": numbered, "drawn": drawn, "numbered 1..drawn": in_draw},
            "holds past the admitted mark": skipped,
            "buyers told another number": sum(
                1 for buyer, told in crowd.numbers.items() if told != {numbers.get(buyer)}
            ),
            "passed over by offers": passed_over,
            "offer batches": ordered[:20],
            "lost holds": lost[:10],
            "phases": crowd.phase_at,
            "refusals": dict(crowd.refusals),
            "held per 5 s": dict(
                sorted(Counter(int((t - crowd.starts_at) // 5 * 5) for t in crowd.held_at).items())
            ),
        },
    )


def run_one(run: str, args: argparse.Namespace) -> Result:
    folder = ROOT / ".data" / f"faults-{os.getpid()}-{run}"
    lead = 2 + args.buyers / args.join_rate  # every buyer has joined before the start
    phases = args.phase or PHASES
    failovers = len(phases) if run == PATRONI else 0
    with servers(folder, args.buyers, args.units, int(lead) + 4, patroni=run == PATRONI) as (
        shop,
        tokens,
        ids,
    ):
        starts = shop.cluster.query(
            "SELECT EXTRACT(EPOCH FROM starts_at - now()) FROM shop_drop WHERE slug = %s", [SLUG]
        )[0][0]
        is_chaos = run == "chaos"
        crowd = Crowd(
            shop.base,
            tokens,
            [ids[i] for i in range(len(tokens))],
            starts_at=float(starts),
            join_rate=args.join_rate,
            walk_hold=0.5 if is_chaos else 0.3,
            walk_offer=0.5 if is_chaos else 0.0,
            deadline=float(starts)
            + (args.chaos_seconds if is_chaos else 0)
            + failovers * FAILOVER_SECONDS
            + 150,
        )
        injections: list[Injection] = []

        async def sale() -> None:
            if is_chaos:
                rng = random.Random(args.seed)
                faults: Coroutine[None, None, None] = chaos(
                    shop, crowd, injections, seconds=args.chaos_seconds, every_fault=args.every_fault, rng=rng
                )
            else:
                faults = on_phases(run, shop, crowd, injections, phases)
            task = asyncio.create_task(faults)
            await crowd.run()
            crowd.finished.set()
            await task  # a fault under way is lifted, never cut off
            if shop.reviving is not None:
                await shop.reviving

        asyncio.run(sale())
        for name in ("worker", "beat"):  # a fault that ended the run may have left one down
            if shop.processes[name].poll() is not None:
                shop.start(name)
        shop.settle()
        result = check(run, shop, crowd, injections, args.units, every_fault=is_chaos and args.every_fault)
        if not all(result.passed.values()):  # the servers' logs, for whoever reads the failure
            logs = args.out / f"faults-logs-{run}"
            shutil.rmtree(logs, ignore_errors=True)
            logs.mkdir(parents=True)
            for log in folder.glob("*.log"):
                shutil.copy(log, logs / log.name)
            say(f"{run}: logs kept in {logs}")
        return result


def report(results: list[Result], args: argparse.Namespace) -> str:
    lines = [
        f"Measured {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC: a waiting-room drop of {args.units} units "
        f"(holds {HOLD_SECONDS} s, offers {OFFER_SECONDS} s, one-second waves, drawn at the start), "
        f"{args.buyers:,} buyers joining before it at {args.join_rate:.0f}/s; floodgate-web (2 workers), "
        "a Celery worker and beat, Redis under Sentinel, the simulated provider, one PostgreSQL (two "
        "under Patroni for its fault). A fault run lands its "
        "fault on the draw, a wave, the sell-out, the first expiry and the first offer (a lasting one "
        "spans them); chaos is a random fault every few seconds.",
        "",
        "| run | faults | held | sold | drift | admission order exact | offers in order | "
        "moved again | last caught answered | holds lost | paid too late | first hold | expiry to offer | "
        "sold out | checks |",
        "| --- | --- | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| --- |",
    ]

    def seconds(value: float | None) -> str:
        return f"{value:.2f} s" if value is not None else "-"

    for r in results:
        faults = Counter(i.fault for i in r.injections)
        named = ", ".join(f"{k} x{v}" if v > 1 else k for k, v in faults.items()) or "-"
        verdict = (
            "PASS"
            if all(r.passed.values())
            else "FAIL: " + "; ".join(k for k, v in r.passed.items() if not v)
        )
        lines.append(
            f"| {r.run} | {named} | {r.held} | {r.sold} | {r.drift} | "
            f"{'yes' if r.admission_exact else 'no'} | "
            f"{'yes' if r.offers_in_order else 'no'} ({r.offers}) | {seconds(r.moved_again)} | "
            f"{seconds(r.recovery)} | "
            f"{r.holds_lost} | {r.too_late} | "
            f"{seconds(r.first_hold)} | {seconds(r.expiry_to_offer)} | {seconds(r.sold_out)} | {verdict} |"
        )
    lines += [
        "",
        "Moved again: the longest the sale stood still with buyers waiting, from a fault's start to "
        "its first move after the fault's end (a move: a hold, an offer, a payment, an order "
        "confirmed; the worst of the run's faults). Last caught answered: from a fault's end until "
        "the last buyer caught waiting at it had that answer (the worst). Paid too late: a payment "
        "started after its hold had run out (refused, the unit offered on). "
        "First hold and sold out count from the drop's start; expiry to offer from the first "
        "walked-away hold's end to the first buyer who saw its unit offered.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="floodgate.py prove faults")
    parser.add_argument("--only", action="append", choices=["none", *FAULTS], help="this run (repeatable)")
    parser.add_argument("--chaos", action="store_true", help="the chaos run only (with --only: as well)")
    parser.add_argument("--chaos-seconds", type=float, default=120.0)
    parser.add_argument("--every-fault", action="store_true", help="chaos: every fault once, shuffled")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--phase", action="append", choices=PHASES, help="instant faults on this phase only (repeatable)"
    )
    parser.add_argument("--units", type=int, default=100)
    parser.add_argument("--buyers", type=int, default=2000)
    parser.add_argument("--join-rate", type=float, default=500.0, help="buyers joining a second")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    cleanup_on_signal()
    runs = list(args.only or ([] if args.chaos else ["none", *FAULTS]))
    if args.chaos or not args.only:
        runs.append("chaos")
    results = []
    args.out.mkdir(parents=True, exist_ok=True)
    for number, run in enumerate(runs, 1):
        say(f"fault run {number} of {len(runs)}: {run}")
        results.append(run_one(run, args))
        say(f"{run}: " + ", ".join(f"{k}: {'PASS' if v else 'FAIL'}" for k, v in results[-1].passed.items()))
        # the report so far, after every run: a long run read (or cut short) midway still has it
        (args.out / "faults.json").write_text(json.dumps([asdict(r) for r in results], indent=2))
        text = report(results, args)
        (args.out / "faults.md").write_text(text)
    sys.stdout.write(text)
    return 0 if all(all(r.passed.values()) for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
