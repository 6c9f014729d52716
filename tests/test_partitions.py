"""The network's faults between hosts of their own (devtools/netns.py), and `prove partitions` inside the
suite, bounded: the Patroni leader cut off from everything, and the control that must lose holds
(devtools/partitions.py). The other partitions are `python3 floodgate.py prove partitions`."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from devtools import netns
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
    with netns.network(["a", "b", "c"], run=f"{os.getpid()}") as net:
        a, b, c = net["a"], net["b"], net["c"]
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
from devtools import faults, netns
faults.cleanup_on_signal()
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
