"""`python3 floodgate.py prove failover`: the primary dies mid-sale and its standby loses no sale.

Two real PostgreSQL servers on this machine (the embedded binaries: initdb, pg_basebackup,
pg_ctl), the second a synchronous streaming standby of the first (`synchronous_standby_names`,
`synchronous_commit = on`: a commit returns only once the standby has its WAL). floodgate-web
(2 workers) connects with one multi-host DATABASE_URL, `target_session_attrs=read-write`. An
HTTP crowd of buyers with bearer tokens reserves; after a while the primary's postmaster is
SIGKILLed, and after a detection delay the standby is promoted (`pg_ctl promote`). The crowd
goes on throughout, retrying 503s after Retry-After with the same Idempotency-Key.

Checked on the new primary: every hold a buyer was told about (201/200) exists, held, with the
buyer's key; the invariant is exact; buyers saw 503s (no 500s) in the gap, and holds were made
after it. Writes bench/out/failover.md (and .json); exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from devtools import embedded, patroni
from devtools.pg_servers import ROOT, Cluster, pg_bin, server_folder
from devtools.ports import free_port, wait_for_port

OUT = ROOT / "bench" / "out"
BIN = Path(sys.executable).parent
SLUG = "failover"


def say(message: str) -> None:
    print(f"failover: {message}", flush=True)  # noqa: T201 (a command's own output)


def make_pair(folder: Path) -> tuple[Cluster, Cluster]:
    """A primary and its synchronous streaming standby, both running."""
    bin_path = pg_bin()
    if folder.exists():
        shutil.rmtree(folder)
    server_folder(folder)
    primary = Cluster("primary", folder / "primary", free_port(), bin_path)
    standby = Cluster("standby", folder / "standby", free_port(), bin_path)
    primary.run("initdb", "-D", str(primary.folder), "-U", "postgres", "--auth=trust", "-E", "UTF8")
    settings = [
        "listen_addresses = '127.0.0.1'",
        f"unix_socket_directories = '{folder}'",
        "max_connections = 200",
        "wal_level = replica",
        "max_wal_senders = 5",
        "hot_standby = on",
        "fsync = on",
        "synchronous_commit = on",
        # A commit waits for the standby's flush of its WAL: an acknowledged hold is on both.
        "synchronous_standby_names = 'FIRST 1 (standby1)'",
    ]
    with open(primary.folder / "postgresql.conf", "a") as conf:
        conf.write("\n".join([*settings, f"port = {primary.port}"]) + "\n")
    primary.start()
    standby.run(
        "pg_basebackup",
        "-h",
        "127.0.0.1",
        "-p",
        str(primary.port),
        "-U",
        "postgres",
        "-D",
        str(standby.folder),
        "-X",
        "stream",
    )
    # standby.signal by hand, not -R: -R's primary_conninfo (in postgresql.auto.conf) would win over
    # the one below, which names the standby for synchronous_standby_names.
    (standby.folder / "standby.signal").touch()
    with open(standby.folder / "postgresql.conf", "a") as conf:
        conf.write(
            f"port = {standby.port}\n"
            f"primary_conninfo = 'host=127.0.0.1 port={primary.port} user=postgres "
            "application_name=standby1'\n"
            # after a promotion nobody follows it here: it must not wait for a standby it lacks
            "synchronous_standby_names = ''\n"
        )
    standby.start()
    deadline = time.monotonic() + 30
    while primary.query("SELECT sync_state FROM pg_stat_replication", database="postgres") != [("sync",)]:
        if time.monotonic() > deadline:
            raise RuntimeError("the standby did not become synchronous")
        time.sleep(0.2)
    primary.query("CREATE DATABASE floodgate", database="postgres")
    return primary, standby


@dataclass
class Said:
    """One answer a buyer got: when the request started and ended (seconds from the crowd's start)."""

    started: float
    ended: float
    status: int  # 0: no HTTP answer (connection refused or reset)
    hold: int | None = None
    order: int | None = None  # a payment start's answer: the order the buyer was told about
    key: str = ""
    buyer: int = 0
    error: str = ""


@dataclass
class Crowd:
    base: str
    tokens: list[str]
    buyer_ids: list[int]
    in_flight: int
    rate: float  # new buyers a second
    said: list[Said] = field(default_factory=list)
    stop_at: float = float("inf")
    t0: float = 0.0

    def headers(self, index: int, key: str) -> dict[str, str]:
        """A buyer's API headers: their bearer token and one Idempotency-Key for their claim."""
        return {
            "Authorization": f"Bearer {self.tokens[index]}",
            "Idempotency-Key": key,
            "Content-Type": "application/json",
        }

    async def buyer(self, session, index: int) -> None:
        key = uuid.uuid4().hex
        headers = self.headers(index, key)
        hold = await self.ask(session, f"/api/drops/{SLUG}/holds", headers, index, key)
        if hold is not None and index % 2 == 0:  # every second buyer goes on to pay
            await self.ask(session, f"/api/holds/{hold}/payment", headers, index, key, hold=hold)

    async def ask(
        self, session, path: str, headers: dict[str, str], index: int, key: str, hold: int | None = None
    ) -> int | None:
        """POST until a final answer (503/429 retried after Retry-After); the hold or order id told."""
        import aiohttp

        # a payment start cut by the kill answers 503 payment_opening until its opening times out
        # (30 s, checkout.services): the buyer gives up sooner and was told of no order
        for _ in range(120 if hold is None else 10):
            started = time.monotonic() - self.t0
            try:
                async with session.post(
                    f"{self.base}{path}", data=b'{"quantity": 1}', headers=headers
                ) as response:
                    body = await response.json(content_type=None)
                    status = response.status
                    retry = float(response.headers.get("Retry-After") or 0.5)
            except (TimeoutError, aiohttp.ClientError) as error:
                self.said.append(Said(started, time.monotonic() - self.t0, 0, key=key, error=repr(error)))
                await asyncio.sleep(0.5)
                continue
            ended = time.monotonic() - self.t0
            told = None
            if hold is None and status in {200, 201}:
                told = body.get("id")
                self.said.append(Said(started, ended, status, told, None, key, self.buyer_ids[index]))
            elif hold is not None and status == 202:
                told = (body.get("order") or {}).get("id")
                self.said.append(Said(started, ended, status, hold, told, key, self.buyer_ids[index]))
            else:
                refusal = str(body.get("error", ""))
                self.said.append(
                    Said(started, ended, status, None, None, key, self.buyer_ids[index], refusal)
                )
            if status in {429, 503}:
                await asyncio.sleep(min(retry, 1.0))
                continue
            return told
        return None

    async def run(self) -> None:
        import aiohttp

        self.t0 = time.monotonic()
        gate = asyncio.Semaphore(self.in_flight)
        timeout = aiohttp.ClientTimeout(total=30)
        connector = aiohttp.TCPConnector(limit=self.in_flight)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:

            async def one(i: int) -> None:
                await asyncio.sleep(i / self.rate)  # buyers arrive at a steady pace
                async with gate:
                    if time.monotonic() - self.t0 < self.stop_at:
                        await self.buyer(session, i)

            await asyncio.gather(*(one(i) for i in range(len(self.tokens))))


def migrate(env: dict[str, str]) -> None:
    """The schema and the migrations' rows on env's DATABASE_URL. The suite passes MIGRATED_DUMP, a
    pg_dump of its own test database as migrate left it: restored in ~0.5 s against migrate's ~8 s."""
    dump = env.get("MIGRATED_DUMP")
    if not dump:
        manage(env, "migrate", "--no-input", "-v", "0")
        return
    command = [str(pg_bin() / "pg_restore"), "--no-owner", "--no-privileges", "--exit-on-error"]
    done = subprocess.run([*command, "-d", env["DATABASE_URL"], dump], text=True, capture_output=True)
    if done.returncode != 0:
        raise RuntimeError(f"pg_restore {dump}: {done.stderr}")


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args], env=env, cwd=ROOT, text=True, capture_output=True
    )
    if done.returncode not in (0, 1):
        raise RuntimeError(f"manage {' '.join(args)}: {done.stderr}")
    return done.stdout


def wait_listening(port: int, process: subprocess.Popen, log: Path) -> None:
    wait_for_port(port, process=process, seconds=60, failed=lambda: f"{log.stem} did not start; see {log}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="floodgate.py prove failover")
    parser.add_argument("--rate", type=float, default=200.0, help="new buyers a second")
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--before", type=float, default=8.0, help="seconds of sale before the kill")
    parser.add_argument("--detect", type=float, default=1.0, help="seconds from the kill to the promotion")
    parser.add_argument("--after", type=float, default=10.0, help="seconds of sale after the promotion")
    parser.add_argument("--out", type=Path, default=OUT, help="where failover.md and failover.json go")
    parser.add_argument(
        "--patroni",
        action="store_true",
        help="the two servers under Patroni with etcd (devtools/patroni.py): Patroni promotes, not a script",
    )
    args = parser.parse_args(argv)
    # enough buyers to keep arriving until the run ends (each buys one unit)
    args.buyers = int(args.rate * (args.before + args.detect + args.after + 10))

    folder = ROOT / ".data" / f"failover-{os.getpid()}"
    stops: list = []
    web = None
    try:
        if args.patroni:
            say("etcd and two Patroni nodes (synchronous mode): a leader and its synchronous standby")
            if folder.exists():
                shutil.rmtree(folder)
            server_folder(folder)
            managed = patroni.running(folder / "patroni")
            cluster = managed.__enter__()
            stops.append(lambda: managed.__exit__(None, None, None))
            leader = cluster.wait_for_leader()
            follower = next(n for n in cluster.nodes if n is not leader)
            primary, standby = leader.cluster(), follower.cluster()
            database_url = cluster.database_url
        else:
            say("two PostgreSQL servers: a primary and its synchronous standby")
            primary, standby = make_pair(folder)
            stops.append(
                lambda: standby.run("pg_ctl", "-D", str(standby.folder), "-m", "fast", "stop", check=False)
            )
            stops.append(
                lambda: primary.run(
                    "pg_ctl", "-D", str(primary.folder), "-m", "immediate", "stop", check=False
                )
            )
            database_url = (
                f"postgresql://postgres@127.0.0.1:{primary.port},127.0.0.1:{standby.port}/floodgate"
                "?target_session_attrs=read-write&connect_timeout=2"
            )
        redis_url, stop_redis, _running = embedded.start_redis(folder / "redis-data")
        stops.append(stop_redis)
        env = {
            **os.environ,
            "FLOODGATE_PROFILE": "dev",
            "DEBUG": "0",
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
            # one address plays the whole crowd: the per-address limit would be the test's limit
            "IP_RATE_LIMIT_BURST": "1000000",
            "IP_RATE_LIMIT_PER_SECOND": "1000000",
            # a request waits at most this long for a connection before its 503
            "DB_POOL_TIMEOUT": "2",
            "LOG_LEVEL": "WARNING",
        }
        migrate(env)
        manage(
            env,
            "create_drop",
            "--slug",
            SLUG,
            "--quantity",
            "100000",
            "--buckets",
            "8",
            "--per-buyer-limit",
            "1",
            "--starts-in",
            "0",
            "--no-waiting-room",
            "--hold-seconds",
            "3600",
        )
        lines = manage(env, "create_buyers", "--count", str(args.buyers), "--prefix", "fo").splitlines()
        tokens = [json.loads(line)["token"] for line in lines]
        names = [json.loads(line)["username"] for line in lines]
        ids = dict(primary.query("SELECT username, id FROM auth_user WHERE username LIKE 'fo%%'"))
        # the simulated payment provider, so a payment start writes its order as in production
        provider_port = free_port()
        with open(folder / "provider.log", "wb") as out:
            provider = subprocess.Popen(
                [
                    str(BIN / "daphne"),
                    "-b",
                    "127.0.0.1",
                    "-p",
                    str(provider_port),
                    "devtools.provider_sim:app",
                ],
                env={
                    **env,
                    "PROVIDER_LATENCY_MS": "20",
                    "PROVIDER_FAILURE_RATE": "0",
                    "PROVIDER_PUBLIC_URL": f"http://127.0.0.1:{provider_port}",
                },
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

        def stop_provider() -> None:
            provider.terminate()
            provider.wait(10)

        stops.append(stop_provider)
        wait_listening(provider_port, provider, folder / "provider.log")
        env["PAYMENT_PROVIDER_URL"] = f"http://127.0.0.1:{provider_port}"
        env["PAYMENT_PROVIDER_PUBLIC_PREFIXES"] = f"http://127.0.0.1:{provider_port}"
        port = free_port()
        log = folder / "web.log"
        with open(log, "wb") as out:
            web = subprocess.Popen(
                [str(BIN / "floodgate-web"), "--host", "127.0.0.1", "--port", str(port), "--workers", "2"],
                env=env,
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_listening(port, web, log)
        say(f"floodgate-web on :{port}; DATABASE_URL lists both servers")

        crowd = Crowd(f"http://127.0.0.1:{port}", tokens, [ids[n] for n in names], args.in_flight, args.rate)
        marks: dict[str, float] = {}

        async def fault() -> None:
            await asyncio.sleep(args.before)
            marks["synchronous"] = float(
                primary.query(
                    "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'", database="postgres"
                )[0][0]
            )
            marks["kill"] = time.monotonic() - crowd.t0
            if args.patroni:  # the leader's machine dies: Patroni and its PostgreSQL together
                await asyncio.to_thread(leader.kill)
                say(f"leader {leader.name} (Patroni and PostgreSQL) SIGKILLed at {marks['kill']:.2f} s")
                elected = await asyncio.to_thread(cluster.wait_for_leader, other_than=leader)
                assert elected is follower
                marks["promoted"] = time.monotonic() - crowd.t0
                say(f"Patroni promoted {follower.name} at {marks['promoted']:.2f} s")
            else:
                os.kill(primary.postmaster_pid(), signal.SIGKILL)
                say(f"primary SIGKILLed at {marks['kill']:.2f} s")
                await asyncio.sleep(args.detect)
                await asyncio.to_thread(standby.run, "pg_ctl", "-D", str(standby.folder), "-w", "promote")
                marks["promoted"] = time.monotonic() - crowd.t0
                say(f"standby promoted at {marks['promoted']:.2f} s")
            crowd.stop_at = marks["promoted"] + args.after

        async def both() -> None:
            task = asyncio.create_task(fault())
            await crowd.run()
            await task

        crowd.stop_at = args.before + args.detect + (patroni.TTL + 60 if args.patroni else 60)
        asyncio.run(both())
        return report(crowd, marks, standby, env, args)
    except BaseException:
        for name in ("primary.log", "standby.log", "web.log"):
            if (folder / name).exists():
                say(f"{name}, last lines:\n" + "\n".join((folder / name).read_text().splitlines()[-15:]))
        raise
    finally:
        if web is not None and web.poll() is None:
            os.killpg(web.pid, signal.SIGTERM)
            try:
                web.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(web.pid, signal.SIGKILL)
        for stop in reversed(stops):
            with contextlib.suppress(Exception):
                stop()
        shutil.rmtree(folder, ignore_errors=True)


def report(crowd: Crowd, marks: dict[str, float], new_primary: Cluster, env: dict[str, str], args) -> int:
    said = crowd.said
    kill, promoted = marks["kill"], marks["promoted"]
    told = [s for s in said if s.hold is not None and s.order is None]
    told_before = [s for s in told if s.ended < kill]
    rows = {
        hold: (state, key, buyer)
        for hold, state, key, buyer in new_primary.query(
            "SELECT id, state, idempotency_key, buyer_id FROM holds_hold WHERE id = ANY(%s)",
            [[s.hold for s in told]],
        )
    }
    lost = [s for s in told if rows.get(s.hold) is None or rows[s.hold][1:] != (s.key, s.buyer)]
    ordered = [s for s in said if s.order is not None]
    orders = dict(
        new_primary.query(
            "SELECT id, hold_id FROM checkout_order WHERE id = ANY(%s)", [[s.order for s in ordered]]
        )
    )
    lost_orders = [s for s in ordered if orders.get(s.order) != s.hold]
    not_held = [s for s in told if s.hold in rows and rows[s.hold][0] != "held"]
    ordered_before = [s for s in ordered if s.ended < kill]
    invariant = json.loads(manage(env, "check_invariant", SLUG))
    first_after = min((s.ended for s in told if s.started >= kill), default=None)
    statuses: dict[str, int] = {}
    for s in said:
        if kill <= s.ended and (first_after is None or s.started < first_after):
            label = str(s.status) if s.status else "no answer"
            statuses[label] = statuses.get(label, 0) + 1
    after = [s for s in told if s.started >= promoted]
    errors_500 = [s for s in said if s.status >= 500 and s.status != 503]
    checks = {
        "standby synchronous at the kill": marks.get("synchronous") == 1.0,
        "every hold told before the kill exists on the new primary": not [
            s for s in told_before if s in lost
        ],
        "every hold told at any time exists, held, with its buyer and key": not lost and not not_held,
        "every order told (202 to a payment start) exists for its hold": bool(ordered) and not lost_orders,
        "invariant exact on the new primary": invariant.get("drift") == 0,
        "no 500 answers (the gap is 503 + Retry-After)": not errors_500,
        "buyers got 503s during the gap": statuses.get("503", 0) > 0,
        "the sale goes on after the promotion": len(after) > 0,
    }
    gap = (first_after - kill) if first_after is not None else None
    lines = [
        f"## Failover: `python3 floodgate.py prove failover{' --patroni' if args.patroni else ''}` "
        f"({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)",
        "",
        f"Buyers arriving at {args.rate:.0f}/s (at most {args.in_flight} in flight, each one hold), "
        "floodgate-web (2 workers); "
        + (
            f"the Patroni leader (Patroni and PostgreSQL) SIGKILLed {kill:.1f} s into the sale; Patroni "
            f"(etcd, leader key TTL {patroni.TTL} s, synchronous mode) promoted the synchronous standby "
            f"at {promoted:.1f} s; {args.after:.0f} s more of sale."
            if args.patroni
            else f"primary SIGKILLed {kill:.1f} s into the sale, standby promoted {args.detect:.1f} s later "
            f"(`pg_ctl promote` done at {promoted:.1f} s), {args.after:.0f} s more of sale."
        ),
        "",
        "| measured | value |",
        "| --- | ---: |",
        f"| holds told to buyers before the kill | {len(told_before):,} |",
        f"| holds told in all | {len(told):,} |",
        f"| of those missing or changed on the new primary | {len(lost)} |",
        f"| orders told to buyers (202 to a payment start): before the kill, in all | "
        f"{len(ordered_before):,}, {len(ordered):,} |",
        f"| of those missing on the new primary | {len(lost_orders)} |",
        f"| invariant on the new primary (quantity, available, held, sold, drift) | "
        f"{invariant.get('quantity')}, {invariant.get('available')}, {invariant.get('held')}, "
        f"{invariant.get('sold')}, {invariant.get('drift')} |",
        f"| kill to promotion done | {promoted - kill:.2f} s |",
        f"| gap: kill to the first hold of a request sent after it | "
        f"{'-' if gap is None else f'{gap:.2f} s'} |",
        "| answers that came in the gap, by status | "
        f"{', '.join(f'{k}: {v}' for k, v in sorted(statuses.items()))} |",
        f"| holds made after the promotion | {len(after):,} |",
        f"| 500 answers | {len(errors_500)} |",
        "",
        *[f"- {'PASS' if ok else 'FAIL'}: {name}" for name, ok in checks.items()],
    ]
    text = "\n".join(lines) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    name = "failover-patroni" if args.patroni else "failover"
    (args.out / f"{name}.md").write_text(text)
    (args.out / f"{name}.json").write_text(
        json.dumps(
            {
                "marks": marks,
                "checks": checks,
                "statuses": statuses,
                "gap": gap,
                "told": len(told),
                "lost": len(lost),
                "orders": len(ordered),
                "lost_orders": len(lost_orders),
                "invariant": invariant,
            },
            indent=2,
        )
    )
    print(text, flush=True)  # noqa: T201
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
