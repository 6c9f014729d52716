"""`python3 floodgate.py prove partitions`: the shop's servers as hosts of their own, and the network cut
between them mid-sale.

Every server is a host (devtools/netns.py: a network namespace with its own address, on one
bridge), in docker-compose.ha.yml's shape: three etcd members, two PostgreSQL nodes under Patroni
(synchronous mode, the shipped deploy/patroni/patroni.yml), HAProxy routing to the Patroni leader
(deploy/patroni/haproxy.cfg) and PgBouncer before it (deploy/pgbouncer/pgbouncer.ini), Redis (a
master, its replica, three sentinels), the simulated provider, three floodgate-web hosts (2
workers each) behind two HAProxy routers (deploy/haproxy/haproxy.cfg), the Celery worker and beat,
and the crowd. The shipped configs are used as they are, but for addresses in place of Docker's
DNS and trust auth in place of the password. The shop's name has both routers' addresses (two A
records, as round-robin DNS gives): a client that finds one dead tries the other, as browsers do.
Namespaces rather than compose containers: the same configs, no image to build, and a run that
sets up in seconds; the processes are the ones a container would run.

Each run is a fresh waiting-room sale (devtools/faults.py's: it sells out, holds expire and are
offered on) with one fault landed on its first wave: the partition is made, held until Patroni has
promoted the replica where it must (or for LASTING seconds where nothing fails over), and healed;
a demoted leader rejoins as the new leader's synchronous standby. The crowd records every answer
it is given, and faults.py's checker reads the database after the heal: any hold or order a buyer
was told about that is missing, an invariant off, an admission out of ticket order, an offer that
passed a ticket over, an order undecided or captured twice, any 5xx but a 503.

The control is the run that must fail: the leader cut off from etcd and its replica while the web
hosts still reach it, with synchronous mode off. The old leader goes on taking holds until Patroni
demotes it; the promoted replica never had them, and the checker counts them lost (the control's
crowd stops at the heal: the rest of its sale shows nothing more). With synchronous mode on, the
same commits wait for the standby and are never acknowledged.

The report goes to bench/out/partitions.{md,json}; docs/FAULTS.md shows the last one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path

import psycopg
import redis

from devtools import netns, patroni, pgbouncer, sentinel
from devtools.failover import BIN, OUT, manage, migrate
from devtools.faults import (
    HOLD_SECONDS,
    OFFER_SECONDS,
    REDIS_DOWN_AFTER_MS,
    SLUG,
    Crowd,
    Injection,
    Result,
    Shop,
    check,
    spawn,
    stop_group,
)
from devtools.pg_servers import ROOT, server_folder
from devtools.ports import cleanup_on_signal

HOSTS = [
    "etcd1",
    "etcd2",
    "etcd3",
    "pg1",
    "pg2",
    "pgrouter",
    "pgbouncer",
    "redis1",
    "redis2",
    "sentinel1",
    "sentinel2",
    "sentinel3",
    "provider",
    "web1",
    "web2",
    "web3",
    "router1",
    "router2",
    "worker",
    "crowd",
]
ETCD = ["etcd1", "etcd2", "etcd3"]
REDIS = ["redis1", "redis2"]  # the first starts as master
SENTINELS = ["sentinel1", "sentinel2", "sentinel3"]
SENTINEL_PORT = 26379
WEB = ["web1", "web2", "web3"]
WEB_PORT = 8000
ROUTERS = ["router1", "router2"]
ROUTER_PORT = 8080  # deploy/haproxy/haproxy.cfg's
SHOP = "shop.test"  # the shop's name: both routers' addresses
BALANCER = ROOT / "deploy" / "haproxy" / "haproxy.cfg"
DATABASE_ROUTER = ROOT / "deploy" / "patroni" / "haproxy.cfg"
POOLER = ROOT / "deploy" / "pgbouncer" / "pgbouncer.ini"
LASTING = 10.0  # seconds a partition that fails nothing over is held
RELAY_PORT = 5433  # on PgBouncer's host: devtools/delayer.py to the leader's router, on one run only
DOWN = 5.0  # seconds a killed server stays down before it is started again
FAULTS = {
    "leader-isolated": "the Patroni leader cut off from every other host",
    "leader-cut-from-cluster": "the leader cut off from etcd and its replica; its router still reaches it",
    "leader-cut-from-etcd": "the leader cut off from the three etcd members only",
    "leader-cut-from-replica": "the leader cut off from its replica only",
    "etcd-quorum-lost": "two of the three etcd members cut off from everything",
    "web-cut-from-postgres": "one web host cut off from PgBouncer (its way to PostgreSQL), not from Redis",
    "web-cut-from-redis": "one web host cut off from Redis and its sentinels, not from PostgreSQL",
    "redis-split-brain": "the Redis master cut off from its sentinels and replica; the app still reaches it",
    "database-link-lossy": "30% of the packets between the app's hosts and PgBouncer dropped",
    "database-link-slow": "+100 ms on every round trip from PgBouncer to PostgreSQL",
    "redis-link-capped": "the Redis master sends at most 1 Mbit/s",
    "router-killed": f"one of the two routers killed (SIGKILL), started again {LASTING:.0f} s later",
    "pgbouncer-killed": f"PgBouncer killed (SIGKILL), started again {DOWN:.0f} s later",
}
# Patroni promotes the replica (held until it has); under failsafe mode (shipped on), a leader cut off
# from etcd that still reaches every member stays the leader (the replica does not race it).
FAILS_OVER = {"leader-isolated", "leader-cut-from-cluster", "leader-cut-from-etcd"}
CONTROL = "control"  # leader-cut-from-cluster with synchronous mode off: it must lose holds
VARIANTS: dict[str, tuple[str, dict[str, object]]] = {  # run -> its fault, the Patroni settings it changes
    "leader-cut-from-etcd-no-failsafe": ("leader-cut-from-etcd", {"failsafe_mode": False}),
    "etcd-quorum-lost-no-failsafe": ("etcd-quorum-lost", {"failsafe_mode": False}),
    CONTROL: ("leader-cut-from-cluster", {"synchronous_mode": False}),
}
RUNS = {**{name: (name, {}) for name in FAULTS}, **VARIANTS}


def say(message: str) -> None:
    print(f"partitions: {message}", flush=True)  # noqa: T201 (a command's own output)


def wait_listening(address: str, port: int, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            with socket.create_connection((address, port), timeout=0.5):
                return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{log.stem} did not start; see {log}") from None
            time.sleep(0.1)


def start_etcd(net: netns.Network, folder: Path) -> list[subprocess.Popen]:
    members = ",".join(f"{name}=http://{net[name].address}:2380" for name in ETCD)
    started = []
    for name in ETCD:
        address = net[name].address
        started.append(
            spawn(
                name,
                net[name].command(
                    [patroni.ETCD, "--name", name, "--data-dir", str(folder / name),
                     "--listen-client-urls", f"http://{address}:2379",
                     "--advertise-client-urls", f"http://{address}:2379",
                     "--listen-peer-urls", f"http://{address}:2380",
                     "--initial-advertise-peer-urls", f"http://{address}:2380",
                     "--initial-cluster", members, "--initial-cluster-state", "new"]
                ),
                dict(os.environ),
                folder,
            )
        )  # fmt: skip
    return started


def start_patroni(
    net: netns.Network, folder: Path, python: Path, *, dcs: dict[str, object]
) -> patroni.Patroni:
    server_folder(folder / "patroni")
    cluster = patroni.Patroni(folder / "patroni", start_etcd(net, folder), python)
    etcd = [f"{net[name].address}:2379" for name in ETCD]
    for name in ("pg1", "pg2"):
        host = net[name]
        node = patroni.Node(
            name, 5432, 8008, folder / "patroni" / name, address=host.address, prefix=host.command([])
        )
        server_folder(node.folder)
        cluster.nodes.append(node)
        patroni.write_config(node, patroni.config(node, etcd, node.folder, network=netns.RANGE, dcs=dcs))
    patroni.bootstrap(cluster, synchronous=dcs.get("synchronous_mode", True) is True)
    return cluster


def start_shop(
    net: netns.Network,
    folder: Path,
    python: Path,
    args: argparse.Namespace,
    *,
    fault: str,
    dcs: dict[str, object],
) -> tuple[Shop, list[str], dict[int, int], float]:
    """Every server on its host, the drop and its buyers; run inside a host (the crowd's)."""
    nodes = start_patroni(net, folder, python, dcs=dcs)
    provider = net["provider"].address
    env = {
        **os.environ,
        "FLOODGATE_PROFILE": "dev",
        "DEBUG": "0",
        # through PgBouncer, as docker-compose.yml's app; migrate straight to the leader's router
        "DATABASE_URL": f"postgresql://postgres@{net['pgbouncer'].address}:6432/floodgate?connect_timeout=2",
        "DB_POOLER": "pgbouncer",
        "REDIS_URL": f"redis://{net['redis1'].address}:6379/0",  # with sentinels: only its database
        "REDIS_SENTINELS": ",".join(f"{net[name].address}:{SENTINEL_PORT}" for name in SENTINELS),
        "REDIS_SENTINEL_MASTER": sentinel.MASTER_NAME,
        "IP_RATE_LIMIT_BURST": "1000000",  # one address plays the whole crowd
        "IP_RATE_LIMIT_PER_SECOND": "1000000",
        "DB_POOL_TIMEOUT": "2",
        "LOG_LEVEL": "WARNING",
        "DUTY_TAKEOVER": "1",
        "ALLOWED_HOSTS": ",".join([SHOP, "localhost"]),
        "PUBLIC_BASE_URL": f"http://{SHOP}:{ROUTER_PORT}",
        "PAYMENT_PROVIDER_URL": f"http://{provider}:{WEB_PORT}",
        "PAYMENT_PROVIDER_PUBLIC_PREFIXES": f"http://{provider}:{WEB_PORT}",
        "PROVIDER_PUBLIC_URL": f"http://{provider}:{WEB_PORT}",
        "PROVIDER_LATENCY_MS": "50",
    }
    redis = start_redis(net, folder)
    route = net["pgrouter"].command(["/usr/sbin/haproxy", "-db", "-f", str(database_router(net, folder))])
    pgrouter = spawn("pgrouter", route, dict(os.environ), folder)
    wait_listening(net["pgrouter"].address, 5432, pgrouter, folder / "pgrouter.log")
    direct = f"postgresql://postgres@{net['pgrouter'].address}:5432/floodgate?connect_timeout=2"
    routed_to_the_leader(direct)
    relayed = fault == "database-link-slow"  # no netem here: a userspace relay adds the latency
    if relayed:
        relay = net["pgbouncer"].command(
            [sys.executable, "-m", "devtools.delayer", f"{net['pgbouncer'].address}:{RELAY_PORT}",
             f"{net['pgrouter'].address}:5432", "--delay-ms", "50"]
        )  # fmt: skip
        delayer = spawn("delayer", relay, dict(os.environ), folder)
        wait_listening(net["pgbouncer"].address, RELAY_PORT, delayer, folder / "delayer.log")
    pool = net["pgbouncer"].command([pgbouncer.BINARY, str(pooler(net, folder, relayed=relayed))])
    bouncer = spawn("pgbouncer", pool, dict(os.environ), folder)
    wait_listening(net["pgbouncer"].address, 6432, bouncer, folder / "pgbouncer.log")
    migrate({**env, "DATABASE_URL": direct, "DB_POOLER": ""})
    lines = manage(env, "create_buyers", "--count", str(args.buyers), "--prefix", "pt").splitlines()
    tokens = [json.loads(line)["token"] for line in lines]
    names = {json.loads(line)["username"]: i for i, line in enumerate(lines)}
    following = nodes.following()
    ids = {names[n]: i for n, i in following.query("SELECT username, id FROM auth_user")}
    celery = [str(BIN / "celery"), "-A", "config.celery:app"]
    web = [str(BIN / "floodgate-web"), "--port", str(WEB_PORT), "--workers", "2"]
    shop = Shop(
        folder,
        following,
        None,
        env,
        f"http://{SHOP}:{ROUTER_PORT}",
        f"http://{provider}:{WEB_PORT}",
        patroni=nodes,
        commands={
            "pgbouncer": pool,
            "provider": net["provider"].command(
                [str(BIN / "daphne"), "-b", provider, "-p", str(WEB_PORT), "devtools.provider_sim:app"]
            ),
            **{name: net[name].command([*web, "--host", net[name].address]) for name in WEB},
            **{
                name: net[name].command(["/usr/sbin/haproxy", "-db", "-f", str(balancer(net, name, folder))])
                for name in ROUTERS
            },
            "worker": net["worker"].command([*celery, "worker", "-l", "warning", "--concurrency", "2"]),
            "beat": net["worker"].command(
                [*celery, "beat", "-l", "warning", "-s", str(folder / "beat-schedule")]
            ),
        },
    )
    shop.processes |= redis | {"pgrouter": pgrouter, "pgbouncer": bouncer}
    if relayed:
        shop.processes["delayer"] = delayer
    for name in ("provider", *WEB, *ROUTERS, "worker", "beat"):
        shop.start(name)
    wait_listening(provider, WEB_PORT, shop.processes["provider"], folder / "provider.log")
    for name in WEB:
        wait_listening(net[name].address, WEB_PORT, shop.processes[name], folder / f"{name}.log")
    for name in ROUTERS:
        wait_listening(net[name].address, ROUTER_PORT, shop.processes[name], folder / f"{name}.log")
    lead = int(2 + args.buyers / args.join_rate) + 4  # every buyer has joined before the start
    manage(
        env, "create_drop", "--slug", SLUG, "--quantity", str(args.units), "--buckets", "4",
        "--per-buyer-limit", "1", "--starts-in", str(lead), "--waiting-room",
        "--wave-seconds", "1", "--hold-seconds", str(HOLD_SECONDS),
        "--offer-seconds", str(OFFER_SECONDS), "--join-work-bits", "0",
    )  # fmt: skip
    starts = following.query(
        "SELECT EXTRACT(EPOCH FROM starts_at - now()) FROM shop_drop WHERE slug = %s", [SLUG]
    )
    return shop, tokens, ids, float(starts[0][0])


def start_redis(net: netns.Network, folder: Path) -> dict[str, subprocess.Popen]:
    """A master, its replica and three sentinels (quorum two), each on a host of its own."""
    master = net[REDIS[0]].address
    started = {}
    for name in REDIS:
        (folder / name).mkdir()
        follow = [] if name == REDIS[0] else ["--replicaof", master, "6379"]
        started[name] = spawn(
            name,
            net[name].command(
                [sentinel.REDIS_SERVER, "--bind", net[name].address, "--port", "6379", "--save", "",
                 "--appendonly", "no", "--protected-mode", "no", "--dir", str(folder / name), *follow]
            ),
            dict(os.environ),
            folder,
        )  # fmt: skip
    for name in SENTINELS:
        conf = folder / f"{name}.conf"  # a sentinel rewrites its own file
        conf.write_text(
            f"port {SENTINEL_PORT}\nbind {net[name].address}\nprotected-mode no\ndir {folder}\n"
            f"sentinel monitor {sentinel.MASTER_NAME} {master} 6379 2\n"
            f"sentinel down-after-milliseconds {sentinel.MASTER_NAME} {REDIS_DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {sentinel.MASTER_NAME} 5000\n"
        )
        started[name] = spawn(
            name, net[name].command([sentinel.REDIS_SENTINEL, str(conf)]), dict(os.environ), folder
        )
    deadline = time.monotonic() + 30
    while redis_master(net) != REDIS[0] or replication(net, REDIS[1]).get("master_link_status") != "up":
        if time.monotonic() > deadline:
            raise RuntimeError(f"the sentinels did not agree on the master; see {folder}/sentinel*.log")
        time.sleep(0.2)
    return started


def redis_master(net: netns.Network) -> str | None:
    """The Redis host a majority of the sentinels name master (None: no majority)."""
    named = []
    for name in SENTINELS:
        with contextlib.suppress(redis.RedisError):
            client = redis.Redis(
                net[name].address,
                SENTINEL_PORT,
                socket_timeout=0.5,
                socket_connect_timeout=0.5,
                decode_responses=True,
            )
            found = client.sentinel_get_master_addr_by_name(sentinel.MASTER_NAME)
            assert isinstance(found, tuple), found  # one sentinel, asked directly: (host, port)
            address, _port = found
            named.append(next(r for r in REDIS if net[r].address == address))
            client.close()
    best = max(set(named), key=named.count, default=None)
    return best if best is not None and named.count(best) >= 2 else None


def replication(net: netns.Network, name: str) -> dict:
    with contextlib.suppress(redis.RedisError):
        client = redis.Redis(
            net[name].address, 6379, socket_timeout=0.5, socket_connect_timeout=0.5, decode_responses=True
        )
        return dict(client.info("replication"))
    return {}


def routed_to_the_leader(url: str) -> None:
    """HAProxy starts with every server up until its checks say otherwise, so for its first
    seconds a connection may reach the replica (read-only): wait until four in a row reach the
    leader."""
    deadline, in_a_row = time.monotonic() + 30, 0
    while in_a_row < 4:
        if time.monotonic() > deadline:
            raise RuntimeError("the leader's router still sends connections to a read-only node")
        try:
            with psycopg.connect(url, autocommit=True) as connection:
                standby = connection.execute("SELECT pg_is_in_recovery()").fetchone() != (False,)
        except psycopg.OperationalError:
            standby = True
        in_a_row = 0 if standby else in_a_row + 1
        if standby:
            time.sleep(0.2)


def balancer(net: netns.Network, name: str, folder: Path) -> Path:
    """The shipped web balancer on router `name`, the web hosts named in its server template's place."""
    servers = [f"    server {web} {net[web].address}:{WEB_PORT} check" for web in WEB]
    return on_host(BALANCER, net[name].address, servers, {}, folder / f"{name}.cfg")


def database_router(net: netns.Network, folder: Path) -> Path:
    """The shipped router to the Patroni leader, the nodes by address."""
    nodes = {node: net[node].address for node in ("pg1", "pg2")}
    return on_host(DATABASE_ROUTER, net["pgrouter"].address, [], nodes, folder / "pgrouter.cfg")


def on_host(source: Path, address: str, template: list[str], names: dict[str, str], path: Path) -> Path:
    """A shipped HAProxy config bound to a host's address, its servers by address instead of found
    through Docker's DNS: the resolvers section and its settings go, a server-template becomes
    `template`, and a server's name:port gets its address."""
    lines, resolvers = [], False
    for line in source.read_text().splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            resolvers = line.startswith("resolvers")
        if resolvers:
            continue
        if line.strip().startswith("server-template"):
            lines += template
            continue
        line = re.sub(r"bind :(\d+)", rf"bind {address}:\1", line)
        line = line.replace(" resolvers docker", "").replace(" init-addr none", "")
        for name, at in names.items():
            line = line.replace(f" {name}:", f" {at}:")
        lines.append(line)
    path.write_text("\n".join(lines) + "\n")
    return path


def pooler(net: netns.Network, folder: Path, *, relayed: bool = False) -> Path:
    """The shipped PgBouncer config on its host: to the leader's router (through the delaying
    relay on its own host, if `relayed`), trust auth (no user list), as the embedded servers' system
    user (PgBouncer refuses root), logging to its output."""
    upstream = (
        f"host={net['pgbouncer'].address} port={RELAY_PORT}"
        if relayed
        else f"host={net['pgrouter'].address} port=5432"
    )
    lines = []
    for line in POOLER.read_text().splitlines():
        key = line.split("=")[0].strip()
        if key == "floodgate":
            line = f"floodgate = {upstream} dbname=floodgate user=postgres"
        elif key == "listen_addr":
            line = f"listen_addr = {net['pgbouncer'].address}"
        elif key == "auth_type":
            line = "auth_type = any"
        elif key == "auth_file":
            continue
        lines.append(line)
    user = pgbouncer.system_user()
    path = folder / "pgbouncer.ini"
    path.write_text("\n".join([*lines, *([f"user = {user}"] if user else [])]) + "\n")
    return path


async def inflict(
    fault: str, net: netns.Network, shop: Shop, seen: dict[str, object], *, fails_over: bool
) -> None:
    """Make the partition, hold it (until a promotion, or LASTING seconds), heal it, and wait until a
    demoted leader is the new leader's standby again; what the fault showed goes into `seen`."""
    nodes = shop.patroni
    assert nodes is not None  # start_shop gives every partition run its Patroni cluster
    leader = await asyncio.to_thread(nodes.wait_for_leader)
    replica = next(n for n in nodes.nodes if n is not leader).name
    master = await asyncio.to_thread(redis_master, net)
    assert master is not None, "no Redis master named"
    if fault == "leader-isolated":
        net.isolate(leader.name)
    elif fault == "leader-cut-from-cluster":
        for other in [*ETCD, replica]:
            net.cut(leader.name, other)
    elif fault == "leader-cut-from-etcd":
        for other in ETCD:
            net.cut(leader.name, other)
    elif fault == "leader-cut-from-replica":
        net.cut(leader.name, replica)
    elif fault == "etcd-quorum-lost":
        net.isolate("etcd2")
        net.isolate("etcd3")
    elif fault == "web-cut-from-postgres":
        net.cut("web1", "pgbouncer")
    elif fault == "web-cut-from-redis":
        for other in [*REDIS, *SENTINELS]:
            net.cut("web1", other)
    elif fault == "redis-split-brain":
        for other in [*SENTINELS, *(r for r in REDIS if r != master)]:
            net.cut(master, other)
    elif fault == "database-link-lossy":
        for app in (*WEB, "worker"):
            net.cut(app, "pgbouncer", loss=0.3)
    elif fault == "redis-link-capped":
        net.cap(master, "1mbit")
    elif fault == "database-link-slow":
        os.kill(shop.processes["delayer"].pid, signal.SIGUSR1)
    elif fault in {"router-killed", "pgbouncer-killed"}:
        killed = "router1" if fault == "router-killed" else "pgbouncer"
        os.killpg(shop.processes[killed].pid, signal.SIGKILL)
        shop.processes[killed].wait()
    try:
        if fails_over:
            await asyncio.to_thread(nodes.wait_for_leader, other_than=leader, timeout=120)
        elif fault == "redis-split-brain":
            await split_brain(net, master, seen)
        else:
            await asyncio.sleep(DOWN if fault == "pgbouncer-killed" else LASTING)
    finally:
        net.heal()
        if fault == "database-link-slow":
            os.kill(shop.processes["delayer"].pid, signal.SIGUSR2)
        if fault in {"router-killed", "pgbouncer-killed"}:
            shop.start(killed)
    new = await asyncio.to_thread(nodes.wait_for_leader, timeout=120)
    seen["leader after the heal"] = "the same node" if new.name == leader.name else "the other node"
    if synchronous_mode(nodes):
        await asyncio.to_thread(nodes.wait_for_sync_standby, new, 180)
    deadline = time.monotonic() + 60  # the old Redis master rejoins as a replica (its writes dropped)
    while (master := redis_master(net)) is None or any(
        replication(net, r).get("master_link_status") != "up" for r in REDIS if r != master
    ):
        if time.monotonic() > deadline:
            raise TimeoutError("Redis did not heal: a replica is not following the master")
        await asyncio.sleep(0.2)


async def split_brain(net: netns.Network, old: str, seen: dict[str, object]) -> None:
    """Until the sentinels promote the replica, then LASTING seconds of two masters: what the old one
    takes meanwhile (its replication offset's growth, in bytes) is dropped when it rejoins."""
    started = time.monotonic()
    while await asyncio.to_thread(redis_master, net) in {None, old}:
        if time.monotonic() - started > 60:
            raise TimeoutError("the sentinels promoted no replica")
        await asyncio.sleep(0.2)
    seen["seconds to the promotion"] = round(time.monotonic() - started, 1)
    before = int(replication(net, old).get("master_repl_offset", 0))
    await asyncio.sleep(LASTING)
    after = replication(net, old)
    seen["the old master's role meanwhile"] = after.get("role")
    seen["bytes the old master took after the promotion (dropped on the heal)"] = (
        int(after.get("master_repl_offset", 0)) - before
    )


def synchronous_mode(nodes: patroni.Patroni) -> bool:
    text = (nodes.nodes[0].folder / "patroni.yml").read_text()
    return bool(json.loads(text)["bootstrap"]["dcs"]["synchronous_mode"])


def run_one(run: str, net: netns.Network, python: Path, args: argparse.Namespace) -> Result:
    fault, dcs = RUNS[run]
    folder = ROOT / ".data" / f"partitions-{os.getpid()}-{run}"
    shutil.rmtree(folder, ignore_errors=True)
    server_folder(folder)
    shop: Shop | None = None
    try:
        shop, tokens, ids, starts = start_shop(net, folder, python, args, fault=fault, dcs=dcs)
        crowd = Crowd(
            shop.base,
            tokens,
            [ids[i] for i in range(len(tokens))],
            starts_at=starts,
            join_rate=args.join_rate,
            walk_hold=0.3,
            walk_offer=0.0,
            deadline=starts + 150 + (60 if fault in FAILS_OVER else 0),
            names={SHOP: [net[name].address for name in ROUTERS]},
        )
        injections: list[Injection] = []
        seen: dict[str, object] = {}

        async def sale() -> None:
            async def fault_on_first_wave() -> None:
                await crowd.until("wave")
                if crowd.over():
                    return
                at = crowd.now()
                say(f"{run}: {describe(run)}, at {at:.1f} s")
                try:
                    settings = {**patroni.load_config()["bootstrap"]["dcs"], **dcs}
                    kept = settings.get("failsafe_mode") and fault == "leader-cut-from-etcd"
                    fails_over = fault in FAILS_OVER and not kept
                    await inflict(fault, net, shop, seen, fails_over=fails_over)
                finally:
                    injections.append(Injection(fault, "wave", at, crowd.now()))
                    say(f"{run}: healed at {crowd.now():.1f} s")
                if run == CONTROL:  # what it must show is known now: the crowd stops here
                    crowd.deadline = crowd.now()

            task = asyncio.create_task(fault_on_first_wave())
            await crowd.run()
            crowd.finished.set()
            await task

        asyncio.run(sale())
        if run != CONTROL:
            shop.settle()
        result = check(run, shop, crowd, injections, args.units)
        result.details["fault"] = seen
        if not passed(result):  # the servers' logs, for whoever reads the failure
            logs = args.out / f"partitions-logs-{run}"
            shutil.rmtree(logs, ignore_errors=True)
            logs.mkdir(parents=True)
            for log in [*folder.glob("*.log"), *folder.glob("patroni/*.log")]:
                shutil.copy(log, logs / log.name)
            say(f"{run}: logs kept in {logs}")
        return result
    finally:
        if shop is not None:
            for process in shop.processes.values():
                stop_group(process)
            if shop.patroni is not None:
                shop.patroni.stop()
        shutil.rmtree(folder, ignore_errors=True)


def describe(run: str) -> str:
    fault, dcs = RUNS[run]
    changed = [f"{key} {'on' if value else 'off'}" for key, value in dcs.items()]
    return ", ".join([FAULTS[fault], *changed])


def verdict(result: Result) -> str:
    failed = [name for name, ok in result.passed.items() if not ok]
    if result.run == CONTROL:
        lost = result.holds_lost + result.orders_lost
        return f"FAILS AS IT MUST ({lost} acknowledged lost)" if lost else "MISS: the control lost nothing"
    return "PASS" if not failed else "FAIL: " + "; ".join(failed)


def passed(result: Result) -> bool:
    return verdict(result).startswith(("PASS", "FAILS AS IT MUST"))


def report(results: list[Result], args: argparse.Namespace) -> str:
    lines = [
        f"Measured {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC: each run a waiting-room drop of "
        f"{args.units} units (holds {HOLD_SECONDS} s, offers {OFFER_SECONDS} s), {args.buyers:,} "
        "buyers; every server a host of its own (network namespaces on one bridge): 3 etcd, 2 "
        "PostgreSQL under Patroni (synchronous), HAProxy to the leader and PgBouncer before it, Redis "
        "with a replica and 3 sentinels, the provider, three floodgate-web hosts (2 workers each) "
        "behind two HAProxy routers (the shop's name on both), the worker and beat, the crowd. The "
        f"fault lands on the first wave and is healed after the promotion (or {LASTING:.0f} s).",
        "",
        "| run | fault | acknowledged lost | 5xx but 503 | 503 | no answer | never answered | moved again "
        "| last caught answered | sold | drift | checks |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]

    def seconds(value: float | None) -> str:
        return f"{value:.1f} s" if value is not None else "-"

    for r in results:
        statuses = Counter({int(k): v for k, v in r.statuses.items()})
        errors = sum(v for k, v in statuses.items() if k >= 500 and k != 503)
        lines.append(
            f"| {r.run} | {describe(r.run)} | {r.holds_lost + r.orders_lost} | {errors} | {statuses[503]} | "
            f"{statuses[0]} | {r.unanswered if r.run != CONTROL else '-'} | {seconds(r.moved_again)} | "
            f"{seconds(r.recovery)} | {r.sold} | {r.drift} | {verdict(r)} |"
        )
    lines += [
        "",
        "Acknowledged lost: holds and orders a buyer was told about that the database does not have after "
        "the heal. No answer: requests that got no HTTP answer (a connection cut or timed out), retried. "
        "Never answered: buyers given no last word (a unit, sold out or a refusal) by the sale's end. "
        "Moved again: the longest the sale stood still with buyers waiting, from the fault to its first "
        "move after the heal. Last caught answered: from the heal until the last buyer waiting then had "
        "their answer. Checks: faults.py's (holds and orders lost, invariant, admission order, offers in "
        "order, orders decided and captured once, no 5xx but 503, every buyer answered).",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="floodgate.py prove partitions")
    parser.add_argument("--only", action="append", choices=list(RUNS), help="this run (repeatable)")
    parser.add_argument("--units", type=int, default=60)
    parser.add_argument("--buyers", type=int, default=600)
    parser.add_argument("--join-rate", type=float, default=300.0, help="buyers joining a second")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("prove partitions makes network namespaces: run it as root")
    cleanup_on_signal()
    python = patroni.ensure_venv()  # before the hosts: pip reaches the registry from this namespace
    runs = list(args.only or RUNS)
    results: list[Result] = []
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        with netns.network(HOSTS, aliases={SHOP: ROUTERS}) as net:
            for number, run in enumerate(runs, 1):
                say(f"run {number} of {len(runs)}: {run}")
                result = netns.inside(net["crowd"], run_one, run, net, python, args)
                results.append(result)
                say(f"{run}: {verdict(result)}")
                (args.out / "partitions.json").write_text(json.dumps([asdict(r) for r in results], indent=2))
                text = report(results, args)
                (args.out / "partitions.md").write_text(text)
    finally:  # a run stopped by a signal: its thread's own cleanup may not have run
        for folder in (ROOT / ".data").glob(f"partitions-{os.getpid()}-*"):
            shutil.rmtree(folder, ignore_errors=True)
    sys.stdout.write(text)
    return 0 if all(passed(r) for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
