"""`python3 floodgate.py prove faults`: a crowd buying while the shop's parts fail under it.

Each fault gets a fresh sale on its own servers (one PostgreSQL cluster from the embedded
binaries, an embedded Redis, floodgate-web with 2 workers): an HTTP crowd reserves one unit
per buyer at a steady pace (503/429 retried after Retry-After, as a client does), the fault
lands a few seconds in, and the sale goes on. Then, per fault:

- every hold a buyer was told about (200/201) exists on the database, held, with that buyer
  and Idempotency-Key;
- the invariant is exact;
- no buyer got a 500: during the fault the answers are 503 + Retry-After, or a refused
  connection (a killed web process);
- the recovery: from the fault's end to the first hold of a request sent after it.

The report (Markdown and JSON) goes to bench/out/faults.{md,json}; the README shows the last.
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
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from devtools.failover import (
    BIN,
    OUT,
    ROOT,
    Cluster,
    Crowd,
    Said,
    free_port,
    manage,
    pg_bin,
    say,
    server_folder,
    wait_listening,
)

SLUG = "fault-run"
CLAIM_FAULTS = [
    "postgres-fast-restart",
    "postgres-immediate-restart",
    "backend-killed",
    "web-killed",
    "redis-paused",
]
# Faults of the paying half: the crowd also pays at the simulated provider, the worker and beat run.
PAYMENT_FAULTS = [
    "provider-slow",
    "provider-failing",
    "provider-late-thrice",
    "worker-killed",
    "beat-stopped",
]
FAULTS = CLAIM_FAULTS + PAYMENT_FAULTS
# The provider's behaviour per fault (devtools/provider_sim.py); the others pay at a healthy one.
PROVIDER = {
    "provider-slow": {"PROVIDER_LATENCY_MS": "5000"},
    "provider-failing": {"PROVIDER_FAILURE_RATE": "0.5"},
    "provider-late-thrice": {"PROVIDER_DUPLICATES": "3", "PROVIDER_LATE_SECONDS": "3"},
}


class Reserving(Crowd):
    """The failover crowd, reserving only (no payment): the claim path is what is proven."""

    async def buyer(self, session, index: int) -> None:  # type: ignore[no-untyped-def]
        await self.reserve(session, index)

    async def reserve(self, session, index: int) -> tuple[int | None, str, dict[str, str]]:  # type: ignore[no-untyped-def]
        key = uuid.uuid4().hex
        headers = self.headers(index, key)
        return await self.ask(session, f"/api/drops/{SLUG}/holds", headers, index, key), key, headers


class Paying(Reserving):
    """Every buyer who gets a hold pays for it at the provider (the order told is recorded)."""

    async def buyer(self, session, index: int) -> None:  # type: ignore[no-untyped-def]
        hold, key, headers = await self.reserve(session, index)
        if hold is None:
            return
        for _ in range(20):  # 503 (the worker or database busy) retried after Retry-After
            started = time.monotonic() - self.t0
            try:
                async with session.post(
                    f"{self.base}/api/holds/{hold}/payment", data=b"{}", headers=headers
                ) as got:
                    body = await got.json(content_type=None)
                    status, retry = got.status, float(got.headers.get("Retry-After") or 0.5)
            except Exception as error:
                self.said.append(Said(started, time.monotonic() - self.t0, 0, key=key, error=repr(error)))
                await asyncio.sleep(0.5)
                continue
            order = (body.get("order") or {}).get("id") if status == 202 else None
            self.said.append(
                Said(
                    started,
                    time.monotonic() - self.t0,
                    status,
                    hold,
                    order,
                    key,
                    self.buyer_ids[index],
                    str(body.get("error", "")),
                )
            )
            if status in {429, 503}:
                await asyncio.sleep(min(retry, 1.0))
                continue
            if status == 202:
                with contextlib.suppress(Exception):
                    async with session.post(
                        body["redirect_url"], data={"action": "pay"}, allow_redirects=False
                    ):
                        pass
            return


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


def settle(cluster: Cluster, timeout: float = 90) -> None:
    """Wait until every order is decided and every confirmed one captured (the worker's work)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        open_orders = cluster.query(
            "SELECT (SELECT count(*) FROM checkout_order WHERE state = 'pending'),"
            " (SELECT count(*) FROM checkout_payment WHERE state IN ('capture_pending', 'void_pending'))"
        )[0]
        if open_orders == (0, 0):
            return
        time.sleep(1)
    say(f"not settled within {timeout:.0f} s: {open_orders}")


@dataclass
class Result:
    fault: str
    told: int
    missing: int
    drift: int
    statuses: dict[str, int]
    in_fault: dict[str, int]
    recovery: float | None
    fault_at: float
    fault_end: float
    passed: dict[str, bool]


def run_one(fault: str, args: argparse.Namespace) -> Result:
    from devtools import embedded

    folder = ROOT / ".data" / f"faults-{os.getpid()}-{fault}"
    shutil.rmtree(folder, ignore_errors=True)
    stops: list[Callable[[], object]] = []
    web: subprocess.Popen | None = None
    try:
        cluster = one_cluster(folder)
        stops.append(
            lambda: cluster.run("pg_ctl", "-D", str(cluster.folder), "-m", "immediate", "stop", check=False)
        )
        redis_url, stop_redis = embedded.start_redis(folder / "redis-data")
        stops.append(stop_redis)
        env = {
            **os.environ,
            "FLOODGATE_PROFILE": "dev",
            "DEBUG": "0",
            "DATABASE_URL": cluster.url("floodgate") + "?connect_timeout=2",
            "REDIS_URL": redis_url,
            "IP_RATE_LIMIT_BURST": "1000000",  # one address plays the whole crowd
            "IP_RATE_LIMIT_PER_SECOND": "1000000",
            "DB_POOL_TIMEOUT": "2",
            "LOG_LEVEL": "WARNING",
        }
        manage(env, "migrate", "--no-input", "-v", "0")
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
        buyers = int(args.rate * (args.before + args.after + 10))
        lines = manage(env, "create_buyers", "--count", str(buyers), "--prefix", "ft").splitlines()
        tokens = [json.loads(line)["token"] for line in lines]
        names = [json.loads(line)["username"] for line in lines]
        ids = dict(cluster.query("SELECT username, id FROM auth_user WHERE username LIKE 'ft%%'"))
        if fault in PAYMENT_FAULTS:
            provider_port = free_port()
            provider = spawn(
                "provider",
                [
                    str(BIN / "daphne"),
                    "-b",
                    "127.0.0.1",
                    "-p",
                    str(provider_port),
                    "devtools.provider_sim:app",
                ],
                {
                    **env,
                    "PROVIDER_LATENCY_MS": "50",
                    "PROVIDER_FAILURE_RATE": "0",
                    "PROVIDER_PUBLIC_URL": f"http://127.0.0.1:{provider_port}",
                    **PROVIDER.get(fault, {}),
                },
                folder,
            )
            stops.append(lambda: stop_group(provider))
            wait_listening(provider_port, provider, folder / "provider.log")
            env["PAYMENT_PROVIDER_URL"] = f"http://127.0.0.1:{provider_port}"
            env["PAYMENT_PROVIDER_PUBLIC_PREFIXES"] = f"http://127.0.0.1:{provider_port}"
        port = free_port()
        env["PUBLIC_BASE_URL"] = f"http://127.0.0.1:{port}"  # the provider's webhooks and return links
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
        paying = fault in PAYMENT_FAULTS
        if paying:
            celery = [str(BIN / "celery"), "-A", "config.celery:app"]
            worker = spawn("worker", [*celery, "worker", "-l", "warning", "--concurrency", "2"], env, folder)
            stops.append(lambda: stop_group(worker))
            beat = spawn(
                "beat", [*celery, "beat", "-l", "warning", "-s", str(folder / "beat-schedule")], env, folder
            )
            stops.append(lambda: stop_group(beat))
        kind = Paying if paying else Reserving
        crowd = kind(f"http://127.0.0.1:{port}", tokens, [ids[n] for n in names], args.in_flight, args.rate)
        marks: dict[str, float] = {}
        procs: dict[str, subprocess.Popen] = {}
        stops.append(lambda: [stop_group(p) for p in procs.values()])

        def now() -> float:
            return time.monotonic() - crowd.t0

        async def inject() -> None:
            await asyncio.sleep(args.before)
            marks["at"] = now()
            say(f"{fault} at {marks['at']:.2f} s")
            if fault.startswith("postgres"):
                mode = "fast" if "fast" in fault else "immediate"
                await asyncio.to_thread(
                    cluster.run,
                    "pg_ctl",
                    "-D",
                    str(cluster.folder),
                    "-m",
                    mode,
                    "-w",
                    "restart",
                    "-l",
                    str(folder / "db.log"),
                )
            elif fault == "backend-killed":
                for _ in range(10):  # every app backend, a few times while claims run
                    await asyncio.to_thread(
                        cluster.query,
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = 'floodgate' AND pid <> pg_backend_pid()",
                        database="postgres",
                    )
                    await asyncio.sleep(0.1)
            elif fault == "web-killed":
                children = subprocess.run(
                    ["pgrep", "-P", str(web.pid)], capture_output=True, text=True
                ).stdout.split()
                os.kill(int(children[0]), signal.SIGKILL)  # one of the two workers, mid-claim
            elif fault == "worker-killed":
                os.killpg(worker.pid, signal.SIGKILL)  # mid-webhook, mid-sweep, mid-tick: whatever it ran
                await asyncio.sleep(2)
                procs["worker"] = spawn("worker", worker.args, env, folder)
            elif fault == "beat-stopped":
                os.killpg(beat.pid, signal.SIGKILL)
                await asyncio.sleep(args.beat_down)
                procs["beat"] = spawn("beat", beat.args, env, folder)
            elif fault in PROVIDER:
                await asyncio.sleep(args.pause)  # the provider misbehaves for the whole sale
            elif fault == "redis-paused":
                import redis

                pid = int(redis.Redis.from_url(redis_url).info("server")["process_id"])
                os.kill(pid, signal.SIGSTOP)
                await asyncio.sleep(args.pause)
                os.kill(pid, signal.SIGCONT)
            marks["end"] = now()
            say(f"{fault} over at {marks['end']:.2f} s")
            crowd.stop_at = marks["end"] + args.after

        async def both() -> None:
            task = asyncio.create_task(inject())
            await crowd.run()
            await task

        crowd.stop_at = args.before + 120
        asyncio.run(both())
        if paying:
            settle(cluster)
        return check(fault, crowd.said, marks, cluster, paying=paying)
    finally:
        if web is not None and web.poll() is None:
            os.killpg(web.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                web.wait(15)
            if web.poll() is None:
                os.killpg(web.pid, signal.SIGKILL)
        for stop in reversed(stops):
            with contextlib.suppress(Exception):
                stop()
        shutil.rmtree(folder, ignore_errors=True)


def check(
    fault: str, said: list[Said], marks: dict[str, float], cluster: Cluster, *, paying: bool = False
) -> Result:
    told = [s for s in said if s.hold is not None and s.order is None and s.status in (200, 201)]
    rows = {
        hold: (state, key, buyer)
        for hold, state, key, buyer in cluster.query(
            "SELECT id, state, idempotency_key, buyer_id FROM holds_hold WHERE drop_id = "
            "(SELECT id FROM shop_drop WHERE slug = %s)",
            [SLUG],
        )
    }
    # a hold told may since have been paid for (sold) or have run out (expired): it must exist
    kept = {"held", "sold", "expired", "released"} if paying else {"held"}
    missing = [
        s
        for s in told
        if rows.get(s.hold) is None or rows[s.hold][0] not in kept or rows[s.hold][1:] != (s.key, s.buyer)
    ]
    quantity, available = cluster.query(
        "SELECT d.quantity, (SELECT sum(available) FROM inventory_stockbucket b WHERE b.drop_id = d.id) "
        "FROM shop_drop d WHERE d.slug = %s",
        [SLUG],
    )[0]
    held = sum(1 for state, _, _ in rows.values() if state in ("held", "sold"))  # one unit each
    drift = int(quantity) - (int(available) + held)
    statuses = Counter(str(s.status) for s in said)
    window = [s for s in said if s.started < marks["end"] and s.ended > marks["at"]]
    in_fault = Counter(str(s.status) for s in window)
    after = [s.ended for s in told if s.started >= marks["end"]]
    recovery = (min(after) - marks["end"]) if after else None
    passed = {
        "every hold told exists, with its buyer and key": not missing,
        "invariant exact": drift == 0,
        "no 500 answers": not any(s.status >= 500 and s.status != 503 for s in said),
        "the sale goes on after the fault": recovery is not None,
    }
    if paying:
        orders = [s.order for s in said if s.order is not None]
        found = dict(cluster.query("SELECT id, state FROM checkout_order WHERE id = ANY(%s)", [orders]))
        twice = cluster.query(
            "SELECT count(*) FROM (SELECT o.id FROM checkout_order o"
            " JOIN checkout_payment p ON p.order_id = o.id"
            " WHERE p.state = 'captured' GROUP BY o.id HAVING count(*) > 1) x"
        )[0][0]
        mismatched = cluster.query(
            "SELECT count(*) FROM checkout_order o JOIN holds_hold h ON h.id = o.hold_id"
            " WHERE (o.state = 'confirmed') <> (h.state = 'sold')"
        )[0][0]
        uncaptured = cluster.query(
            "SELECT count(*) FROM checkout_order o WHERE o.state = 'confirmed' AND NOT EXISTS"
            " (SELECT 1 FROM checkout_payment p WHERE p.order_id = o.id AND p.state = 'captured')"
        )[0][0]
        confirmed = sum(1 for state in found.values() if state == "confirmed")
        passed |= {
            "every order told exists": len(found) == len(set(orders)),
            "every order decided (none left pending)": all(v != "pending" for v in found.values()),
            "a confirmed order is a sold hold and the other way round": mismatched == 0,
            "every confirmed order captured, none twice": uncaptured == 0 and twice == 0,
            "orders were confirmed": confirmed > 0,
        }
    return Result(
        fault,
        len(told),
        len(missing),
        drift,
        dict(statuses),
        dict(in_fault),
        recovery,
        marks["at"],
        marks["end"],
        passed,
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="floodgate.py prove faults")
    parser.add_argument("--only", action="append", choices=FAULTS, help="this fault (repeatable)")
    parser.add_argument("--rate", type=float, default=150.0, help="new buyers a second")
    parser.add_argument("--in-flight", type=int, default=32)
    parser.add_argument("--before", type=float, default=4.0, help="seconds of sale before the fault")
    parser.add_argument("--after", type=float, default=5.0, help="seconds of sale after it")
    parser.add_argument("--pause", type=float, default=5.0, help="seconds Redis stays stopped")
    parser.add_argument("--beat-down", type=float, default=30.0, help="seconds beat stays stopped")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    results = []
    for fault in args.only or FAULTS:
        say(f"fault run: {fault}")
        results.append(run_one(fault, args))
        say(
            f"{fault}: " + ", ".join(f"{k}: {'PASS' if v else 'FAIL'}" for k, v in results[-1].passed.items())
        )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "faults.json").write_text(json.dumps([asdict(r) for r in results], indent=2))
    lines = [
        f"Measured {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC: buyers arriving at {args.rate:.0f}/s "
        f"(at most {args.in_flight} in flight, one unit each), floodgate-web (2 workers), the fault "
        f"{args.before:.0f} s into the sale, {args.after:.0f} s more after it.",
        "",
        "| fault | holds told | missing | drift | answers during the fault | recovery | checks |",
        "| --- | ---: | ---: | ---: | --- | ---: | --- |",
    ]
    for r in results:
        during = ", ".join(f"{k}: {v}" for k, v in sorted(r.in_fault.items()))
        recovery = f"{r.recovery:.2f} s" if r.recovery is not None else "-"
        verdict = (
            "PASS"
            if all(r.passed.values())
            else "FAIL: " + "; ".join(k for k, v in r.passed.items() if not v)
        )
        lines.append(
            f"| {r.fault} | {r.told:,} | {r.missing} | {r.drift} | {during} | {recovery} | {verdict} |"
        )
    lines += ["", "Status 0 is a connection refused or reset (no HTTP answer)."]
    (args.out / "faults.md").write_text("\n".join(lines) + "\n")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0 if all(all(r.passed.values()) for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
