"""The network's faults between hosts of their own (devtools/netns.py), and `prove partitions` inside the
suite, bounded: the Patroni leader cut off from everything, and the control that must lose holds
(devtools/partitions.py). The other partitions are `python3 floodgate.py prove partitions`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from devtools import netns, partitions, ports
from devtools.partitions import CONTROL

pytestmark = pytest.mark.servers  # namespaces and the processes in them

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--buyers", "300", "--units", "30", "--join-rate", "300"]


def reaches(host: netns.Host | None, address: str, port: int) -> str:
    """'ok', 'refused' or 'silent' (a timeout: dropped on the way), from inside the host (None: here)."""

    def attempt() -> str:
        try:
            with socket.create_connection((address, port), timeout=1):
                return "ok"
        except ConnectionRefusedError:
            return "refused"
        except TimeoutError:
            return "silent"
        except OSError as error:
            return f"error {error.errno}"

    return attempt() if host is None else netns.inside(host, attempt)


def namespaces(run: str | None) -> list[str]:
    """The namespaces of one run (None: of any)."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split("\n")
    prefix = netns.PREFIX if run is None else f"{netns.PREFIX}{run}-"
    return [line.split()[0] for line in listed if line.startswith(prefix)]


def test_hosts_reach_each_other_a_cut_is_silent_and_heals_and_this_namespace_reaches_none() -> None:
    with netns.network(["a", "b", "c"], run=f"{os.getpid()}", aliases={"shop.test": ["b", "c"]}) as net:
        a, b, c = net["a"], net["b"], net["c"]
        # names: every host's, and one name with two addresses (as round-robin DNS gives)
        looked_up = a.run("getent", "ahostsv4", "shop.test").stdout.split()
        assert {b.address, c.address} <= set(looked_up) and a.run("getent", "hosts", "c").stdout.startswith(
            c.address
        )
        server = subprocess.Popen(
            b.command([sys.executable, "-m", "http.server", "--bind", b.address, "8000"]),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while reaches(a, b.address, 8000) != "ok" and time.monotonic() < deadline:
            time.sleep(0.1)

        assert reaches(a, b.address, 8000) == "ok"
        assert reaches(a, b.address, 9) == "refused"  # a host answers for its closed ports
        # the blackhole route: the machine's own namespace reaches no host, nor routes the range out
        assert reaches(None, b.address, 8000) == "error 22"
        assert (
            "blackhole 198.18.0.0/15"
            in subprocess.run(["ip", "route"], capture_output=True, text=True).stdout
        )

        net.cut("a", "b")
        assert reaches(a, b.address, 8000) == "silent"  # dropped, as a cable cut: no refusal
        assert reaches(c, b.address, 8000) == "ok"  # the rest of the network is untouched
        net.cap("b", "1mbit")
        assert "tbf" in b.run("tc", "qdisc", "show", "dev", "eth0").stdout

        net.heal()
        assert reaches(a, b.address, 8000) == "ok"
        assert "tbf" not in b.run("tc", "qdisc", "show", "dev", "eth0").stdout
        assert net.faults == []
    # everything in the hosts was killed with them
    assert server.wait(5) == -signal.SIGKILL
    assert namespaces(f"{os.getpid()}") == []
    assert not (netns.HOSTS_FILES / a.namespace).exists()  # the hosts files went with them


def gone(pid: int) -> bool:
    """The process has ended (a zombie not yet reaped by its new parent has too), within 5 s."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            if "State:\tZ" in Path(f"/proc/{pid}/status").read_text():
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


CHILD = """
import sys, time
from devtools import netns, ports
ports.cleanup_on_signal()
with netns.network(["x", "y"]) as net:
    import subprocess
    subprocess.Popen(net["x"].command(["sleep", "600"]))
    print("ready", flush=True)
    time.sleep(600)
"""


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL])
def test_a_run_stopped_by_a_signal_or_killed_leaves_no_namespace_process_or_route(stop: int) -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    made = namespaces(str(child.pid))
    pids = subprocess.run(
        ["ip", "netns", "pids", f"{netns.PREFIX}{child.pid}-x"], capture_output=True, text=True
    )
    sleeper = int(pids.stdout.split()[0])
    assert sorted(made) == sorted(f"{netns.PREFIX}{child.pid}-{n}" for n in ("switch", "x", "y"))

    child.send_signal(stop)
    child.wait(30)
    if stop == signal.SIGKILL:  # nothing ran on the way out: the next run sweeps what is left
        assert namespaces(str(child.pid)) != []
        netns.sweep_stale()

    assert namespaces(str(child.pid)) == []
    assert gone(sleeper)
    if not namespaces(None):  # no other run: the route went with the last one
        assert "blackhole" not in subprocess.run(["ip", "route"], capture_output=True, text=True).stdout


@pytest.mark.django_db  # pytest-django makes the test database, which is dumped, for db tests only
@pytest.mark.migrated_dump
@pytest.mark.timeout(600)  # two sales on a cluster of hosts (about 3 min), beside another session
def test_the_leader_partitioned_mid_sale_loses_nothing_and_the_control_without_sync_loses_holds(
    tmp_path: Path, migrated_dump: dict[str, str]
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "devtools.partitions", *SMALL, "--only", "leader-isolated", "--only", CONTROL,
         "--out", str(tmp_path)],
        env={**os.environ, **migrated_dump},  # the suite's migrated database restored, not migrated again
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )  # fmt: skip
    assert (tmp_path / "partitions.json").exists(), done.stdout[-3000:] + done.stderr[-3000:]
    isolated, control = json.loads((tmp_path / "partitions.json").read_text())
    assert done.returncode == 0, json.dumps([isolated["details"], control["details"]], indent=1)[-4000:]

    assert isolated["run"] == "leader-isolated" and all(isolated["passed"].values()), isolated["passed"]
    assert isolated["holds_lost"] == isolated["orders_lost"] == 0
    assert isolated["sold"] == isolated["units"] == 30 and isolated["drift"] == 0
    assert not any(int(status) >= 500 and status != "503" for status in isolated["statuses"])
    assert isolated["statuses"].get("503", 0) > 0  # buyers were told to wait through the failover
    assert isolated["details"]["rejoined"], isolated["details"]  # the old leader is a sync standby again
    # the control: synchronous mode off, the old leader acknowledged holds its successor never had
    assert control["run"] == CONTROL and control["holds_lost"] > 0
    assert control["passed"]["holds lost: 0"] is False


def test_the_shipped_balancers_and_pooler_run_on_hosts_with_every_setting_but_the_addresses(
    tmp_path: Path,
) -> None:
    """The partition run's HAProxy and PgBouncer configs are the shipped files with addresses in
    place of Docker's DNS: every other line kept, and HAProxy accepts them."""
    names = ["pg1", "pg2", "pgrouter", "pgbouncer", *partitions.WEB, *partitions.ROUTERS]
    net = netns.Network("x", {n: netns.Host(n, f"ns-{n}", f"198.18.0.{i}") for i, n in enumerate(names, 1)})
    web = partitions.balancer(net, "router2", tmp_path).read_text()
    database = partitions.database_router(net, tmp_path).read_text()

    for config, shipped in ((web, partitions.BALANCER), (database, partitions.DATABASE_ROUTER)):
        settings = "\n".join(line for line in config.splitlines() if not line.lstrip().startswith("#"))
        assert "resolvers" not in settings and "docker" not in settings and "server-template" not in settings
        checked = subprocess.run(
            ["/usr/sbin/haproxy", "-c", "-f", "/dev/stdin"], input=config, text=True, capture_output=True
        )
        assert checked.returncode == 0, checked.stderr
        dns = ("bind", "server", "resolve", "hold ", "nameserver", "timeout retry")  # what had to change
        kept = [line for line in shipped.read_text().splitlines() if not any(w in line for w in dns)]
        assert [line for line in kept if line.strip() and line not in config] == []
    assert f"bind {net['router2'].address}:8080" in web
    assert all(f"server {w} {net[w].address}:8000 check" in web for w in partitions.WEB)
    assert f"server pg2 {net['pg2'].address}:5432 check port 8008" in database
    assert f"bind {net['pgrouter'].address}:5432" in database

    def ini(text: str) -> dict[str, str]:
        pairs = (line.split(" = ", 1) for line in text.splitlines() if " = " in line and line[0] != ";")
        return {key: value for key, value in pairs}

    pool = ini(partitions.pooler(net, tmp_path).read_text())
    shipped_ini = ini(partitions.POOLER.read_text())
    assert pool["floodgate"] == f"host={net['pgrouter'].address} port=5432 dbname=floodgate user=postgres"
    assert pool["listen_addr"] == net["pgbouncer"].address and pool["auth_type"] == "any"
    # the pool's mode, sizes and login retries are the shipped ones
    assert {key for key in shipped_ini if pool.get(key) != shipped_ini[key]} == {
        "floodgate",
        "listen_addr",
        "auth_type",
        "auth_file",
    }


def test_the_delaying_relay_adds_its_delay_each_way_on_signal_and_keeps_the_stream_whole() -> None:
    """devtools/delayer.py stands in for netem: off at start, SIGUSR1 adds the delay to each
    direction (a round trip pays it twice), SIGUSR2 lifts it; bytes arrive whole and in order, and
    chunks in flight wait side by side, not one behind the other."""
    echo = socket.create_server(("127.0.0.1", 0))
    port = echo.getsockname()[1]

    def serve() -> None:
        with contextlib.suppress(OSError):  # the listener closed at the end
            while True:  # the readiness probe's connection is one of them
                connection, _ = echo.accept()
                threading.Thread(target=answer, args=(connection,), daemon=True).start()

    def answer(connection: socket.socket) -> None:
        with connection:
            while data := connection.recv(65536):
                connection.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    relay_port = ports.free_port()
    relay = subprocess.Popen(
        [sys.executable, "-m", "devtools.delayer", f"127.0.0.1:{relay_port}", f"127.0.0.1:{port}",
         "--delay-ms", "100"],
        cwd=ROOT,
    )  # fmt: skip
    try:
        ports.wait_for_port(relay_port, process=relay, seconds=10)
        client = socket.create_connection(("127.0.0.1", relay_port))

        def round_trip(payload: bytes) -> tuple[bytes, float]:
            started = time.monotonic()
            client.sendall(payload)
            got = b""
            while len(got) < len(payload):
                got += client.recv(65536)
            return got, time.monotonic() - started

        assert round_trip(b"before")[0] == b"before"
        relay.send_signal(signal.SIGUSR1)
        time.sleep(0.2)  # the handler runs on the relay's loop
        got, took = round_trip(b"ping")
        assert got == b"ping" and took >= 0.2  # 100 ms each way
        # 200 chunks sent at once: one behind another they would take 20 s each way
        chunks = [bytes([i]) * 1000 for i in range(200)]
        started = time.monotonic()
        for chunk in chunks:
            client.sendall(chunk)
            time.sleep(0.001)
        got = b""
        while len(got) < 200_000:
            got += client.recv(65536)
        assert got == b"".join(chunks)
        assert time.monotonic() - started < 10
        relay.send_signal(signal.SIGUSR2)
        time.sleep(0.2)
        assert round_trip(b"after")[0] == b"after"
        client.close()
    finally:
        relay.terminate()
        relay.wait(5)
        echo.close()
