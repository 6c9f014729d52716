"""A test cluster's hosts on this machine: network namespaces on one bridge, and the network's faults.

Each host is a namespace `fgnet-<run>-<host>` with one link, `eth0`, and one address in
198.18.0.0/15 (the range set aside for benchmarks, RFC 2544); the far ends of the links sit on a
bridge in a namespace of their own (`fgnet-<run>-switch`), so the machine's own namespace has no
address on the cluster and no part in it. Before anything is made, a blackhole route for the whole
range goes into the machine's own namespace: nothing there can reach a host, and a stray packet for
the range never leaves by the default gateway. Nothing is ever sent to another address.

Faults are iptables rules in a host's own chain (`FG-OUT`, on OUTPUT; silent drops, as a cut cable
or a dead switch port, never a refusal), a qdisc on its link for a bandwidth cap. `heal()` clears
them all. On the way out (the context's end, an exception, SIGTERM turned into one) every process
in a host is killed and every namespace deleted, which takes its links, bridge, rules and qdiscs
with it; the route goes once no run is left. `sweep()` does the same for what a run killed with
SIGKILL left behind, and every run calls it first.

Code that must talk to the hosts runs in a thread that has entered one (`inside()`): a network
namespace belongs to a thread, and processes started from that thread are born in it.

Names: every host has a hosts file (`/etc/netns/<namespace>/hosts`, which `ip netns exec` puts in
place of /etc/hosts for what it starts) naming every host, and the names given to several (the
shop's name on both routers: two A records, as round-robin DNS gives them).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

RANGE = "198.18.0.0/15"
SUBNET = "198.18.0"  # the hosts' /24: .1 and up
PREFIX = "fgnet-"
CHAIN = "FG-OUT"
HOSTS_FILES = Path("/etc/netns")  # iproute2's: /etc/netns/<namespace>/hosts is a host's /etc/hosts
CLONE_NEWNET = 0x40000000


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


@dataclass
class Host:
    name: str
    namespace: str
    address: str

    def command(self, argv: list[str]) -> list[str]:
        """argv run in this host (from any thread: `ip netns exec` enters the namespace itself)."""
        return ["ip", "netns", "exec", self.namespace, *argv]

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command(list(argv)), capture_output=True, text=True, check=check)

    def pids(self) -> list[int]:
        return [int(pid) for pid in ip("netns", "pids", self.namespace, check=False).stdout.split()]


@dataclass
class Network:
    run: str
    hosts: dict[str, Host] = field(default_factory=dict)
    faults: list[str] = field(default_factory=list)  # what is in force now, as said in reports

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    def cut(self, source: str, target: str, *, both_ways: bool = True, loss: float = 1.0) -> None:
        """Drop what `source` sends to `target` (and back, unless one way); `loss` < 1: that share."""
        pairs = [(source, target), (target, source)] if both_ways else [(source, target)]
        for a, b in pairs:
            rule = ["-A", CHAIN, "-d", self.hosts[b].address]
            if loss < 1.0:
                rule += ["-m", "statistic", "--mode", "random", "--probability", f"{loss:.2f}"]
            self.hosts[a].run("iptables", *rule, "-j", "DROP")
        self.faults.append(
            f"{source} {'<' if both_ways else ''}-x-> {target}" + (f" {loss:.0%}" if loss < 1 else "")
        )

    def isolate(self, name: str, *, keep: tuple[str, ...] = ()) -> None:
        """Cut a host off from every other one but those kept."""
        for other in self.hosts:
            if other != name and other not in keep:
                self.cut(name, other)

    def cap(self, name: str, rate: str) -> None:
        """Cap what a host sends (`1mbit`): a token bucket on its link."""
        self.hosts[name].run(
            "tc",
            "qdisc",
            "replace",
            "dev",
            "eth0",
            "root",
            "tbf",
            "rate",
            rate,
            "burst",
            "16kb",
            "latency",
            "400ms",
        )
        self.faults.append(f"{name} sends at most {rate}")

    def heal(self) -> None:
        for host in self.hosts.values():
            host.run("iptables", "-F", CHAIN)
            host.run("tc", "qdisc", "del", "dev", "eth0", "root", check=False)  # none: nothing to do
        self.faults.clear()


def sweep(run: str = "") -> None:
    """Kill every process in the runs' namespaces (this run's, or all) and delete them; drop the
    blackhole route once no run is left."""
    listed = ip("netns", "list", check=False).stdout.split("\n")
    for namespace in (line.split()[0] for line in listed if line.startswith(PREFIX + run)):
        for _ in range(3):  # a process forking as it dies: look again
            pids = [int(p) for p in ip("netns", "pids", namespace, check=False).stdout.split()]
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if not pids:
                break
        ip("netns", "del", namespace, check=False)
        shutil.rmtree(HOSTS_FILES / namespace, ignore_errors=True)
    if not any(line.startswith(PREFIX) for line in ip("netns", "list", check=False).stdout.split("\n")):
        ip("route", "del", "blackhole", RANGE, check=False)


@contextlib.contextmanager
def network(
    names: list[str], *, run: str | None = None, aliases: dict[str, list[str]] | None = None
) -> Iterator[Network]:
    """Hosts `names` (addresses .1, .2, ... in order) on one bridge, each knowing the others by name
    and `aliases` (a name -> the hosts it stands for); all gone on the way out."""
    run = run or f"{os.getpid() % 100000}"
    sweep_stale()
    net = Network(run)
    try:
        # first: the machine's own namespace can never reach (or route out) the cluster's range
        if "blackhole" not in ip("route", "show", RANGE).stdout:
            ip("route", "add", "blackhole", RANGE)
        switch = f"{PREFIX}{run}-switch"
        ip("netns", "add", switch)
        ip("-n", switch, "link", "add", "br0", "type", "bridge")
        ip("-n", switch, "link", "set", "br0", "up")
        for number, name in enumerate(names, 1):
            host = Host(name, f"{PREFIX}{run}-{name}", f"{SUBNET}.{number}")
            ip("netns", "add", host.namespace)
            net.hosts[name] = host
            # the pair is made in the switch, and one end moved into the host as its eth0
            ip(
                "-n",
                switch,
                "link",
                "add",
                f"p{number}",
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                host.namespace,
            )
            ip("-n", switch, "link", "set", f"p{number}", "master", "br0", "up")
            ip("-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", "eth0")
            ip("-n", host.namespace, "link", "set", "eth0", "up")
            ip("-n", host.namespace, "link", "set", "lo", "up")
            host.run("iptables", "-N", CHAIN)
            host.run("iptables", "-A", "OUTPUT", "-j", CHAIN)
        known = [f"{host.address} {host.name}" for host in net.hosts.values()]
        known += [
            f"{net[host].address} {alias}" for alias, hosts in (aliases or {}).items() for host in hosts
        ]
        for host in net.hosts.values():
            (HOSTS_FILES / host.namespace).mkdir(parents=True, exist_ok=True)
            (HOSTS_FILES / host.namespace / "hosts").write_text(
                "\n".join(["127.0.0.1 localhost", *known]) + "\n"
            )
        yield net
    finally:
        sweep(run + "-")


def sweep_stale() -> None:
    """What runs killed with SIGKILL left: namespaces whose run's process is gone."""
    for line in ip("netns", "list", check=False).stdout.split("\n"):
        if line.startswith(PREFIX):
            run = line.split()[0][len(PREFIX) :].split("-")[0]
            if run.isdigit() and not _alive(int(run)):
                sweep(run + "-")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


_setns = ctypes.CDLL(None, use_errno=True).setns


def enter(host: Host) -> None:
    """Move the calling thread (only) into the host's namespace."""
    fd = os.open(f"/var/run/netns/{host.namespace}", os.O_RDONLY)
    try:
        if _setns(fd, CLONE_NEWNET) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"setns into {host.namespace}: {os.strerror(error)}")
    finally:
        os.close(fd)


def inside(host: Host, work, *args, **kwargs):
    """Run work(*args, **kwargs) in a thread inside the host; its result, or its exception."""
    outcome: dict[str, object] = {}

    def body() -> None:
        try:
            enter(host)
            outcome["value"] = work(*args, **kwargs)
        except BaseException as error:  # handed to the caller's thread
            outcome["error"] = error

    thread = threading.Thread(target=body, name=f"in-{host.name}", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(0.2)  # short waits: a signal still reaches the main thread
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome.get("value")
