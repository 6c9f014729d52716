"""PostgreSQL under Patroni on this machine, for `prove failover --patroni`.

One etcd (Debian's `etcd-server`) holds the cluster's state; two Patroni nodes (PyPI's `patroni`)
each run a PostgreSQL of the embedded binaries, in synchronous mode: the leader's commits wait for
the standby, so a promoted standby has every acknowledged one. Patroni runs as the embedded
server's user (PostgreSQL refuses root) on Debian's Python, in a venv of its own under .data
(the project's interpreter may sit in root's home, out of that user's reach). Every process is in
a group of its own and is stopped on the way out, whatever ends the run.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devtools.pg_servers import ROOT, Cluster, as_server_user, pg_bin, server_folder
from devtools.ports import free_port

ETCD = "/usr/bin/etcd"
DEBIAN_PYTHON = "/usr/bin/python3"
VENV = ROOT / ".data" / "patroni-venv"
PACKAGES = ["patroni[etcd3]>=4,<5", "psycopg[binary]>=3.2,<4"]
SCOPE = "floodgate"
CONFIG = ROOT / "deploy" / "patroni" / "patroni.yml"  # compose's, which the fault run proves


def load_config() -> dict:
    import yaml

    return yaml.safe_load(CONFIG.read_text())


TTL = int(load_config()["bootstrap"]["dcs"]["ttl"])  # the leader key outlives a dead leader this long


@dataclass
class Node:
    name: str
    port: int  # PostgreSQL's
    api: int  # Patroni's REST API
    folder: Path
    process: subprocess.Popen | None = None
    address: str = "127.0.0.1"  # a host of its own (devtools/netns.py) has its own
    prefix: list[str] = field(default_factory=list)  # and runs its commands through `ip netns exec`

    def cluster(self) -> Cluster:
        """The node's PostgreSQL, for queries (trust auth)."""
        return Cluster(self.name, self.folder / "data", self.port, pg_bin(), self.address)

    def role(self) -> str | None:
        """'primary', 'replica' or None (down), as the node's Patroni says."""
        try:
            with urllib.request.urlopen(f"http://{self.address}:{self.api}/patroni", timeout=1) as answer:
                return str(json.load(answer).get("role"))
        except (OSError, ValueError):
            return None

    def start(self, python: Path, log_folder: Path) -> None:
        """Patroni on this node's configuration: it starts (or rejoins) its PostgreSQL itself."""
        self.process = _start(
            [*self.prefix, *as_server_user([str(python), "-m", "patroni", str(self.folder / "patroni.yml")])],
            log_folder / f"{self.name}.log",
            cwd=self.folder,
        )

    def kill(self) -> None:
        """SIGKILL Patroni and its PostgreSQL together, as a machine that dies."""
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)  # first: it starts no PostgreSQL after this
        self.process.wait()
        # PostgreSQL runs in a session of its own (Patroni starts it so): killed by its pid
        pid_file = self.folder / "data" / "postmaster.pid"
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int(pid_file.read_text().split()[0])
            # a file left by a postmaster killed before names a pid that may be another's by now
            if b"postgres" in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGKILL)


@dataclass
class Following(Cluster):
    """Whichever node takes writes, for queries: the multi-host address the app itself uses."""

    hosts: str = ""

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@{self.hosts}/{database}?target_session_attrs=read-write"


@dataclass
class Patroni:
    folder: Path
    etcd: list[subprocess.Popen]
    python: Path  # Patroni's venv
    nodes: list[Node] = field(default_factory=list)

    @property
    def hosts(self) -> str:
        return ",".join(f"{n.address}:{n.port}" for n in self.nodes)

    @property
    def database_url(self) -> str:
        return (
            f"postgresql://postgres@{self.hosts}/floodgate?target_session_attrs=read-write&connect_timeout=2"
        )

    def following(self) -> Following:
        return Following("leader", self.folder, 0, pg_bin(), hosts=self.hosts)

    def rejoin(self, node: Node, timeout: float = 180) -> None:
        """Start a killed node's Patroni again and wait until it is the leader's synchronous standby:
        Patroni rewinds its diverged data (pg_rewind) or, failing that, clones the leader afresh."""
        node.start(self.python, self.folder)
        leader = self.wait_for_leader(other_than=node, timeout=timeout)
        self.wait_for_sync_standby(leader, timeout=timeout)

    def leader(self, *, other_than: Node | None = None) -> Node | None:
        """The node whose Patroni says it is primary (a partitioned old leader may still say so)."""
        return next((n for n in self.nodes if n is not other_than and n.role() == "primary"), None)

    def wait_for_leader(self, *, other_than: Node | None = None, timeout: float = 90) -> Node:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for node in self.nodes:
                if node is not other_than and node.process is not None and node.process.poll() is not None:
                    raise RuntimeError(f"Patroni {node.name} exited; see {self.folder}/{node.name}.log")
            found = self.leader(other_than=other_than)
            if found is not None:
                with contextlib.suppress(Exception):
                    found.cluster().query("SELECT 1", database="postgres")  # it takes connections
                    return found
            time.sleep(0.1)
        raise TimeoutError(f"Patroni elected no leader within {timeout:.0f} s; see {self.folder}/*.log")

    def sync_standby(self, leader: Node) -> str | None:
        """The member Patroni has recorded as synchronous standby (only it may be promoted)."""
        try:
            with urllib.request.urlopen(f"http://{leader.address}:{leader.api}/cluster", timeout=1) as answer:
                members = json.load(answer)["members"]
        except (OSError, ValueError, KeyError):
            return None
        return next((m["name"] for m in members if m.get("role") == "sync_standby"), None)

    def wait_for_sync_standby(self, leader: Node, timeout: float = 180) -> None:
        """Until PostgreSQL waits for the standby's flush and Patroni has recorded it as the one.
        (The standby's clone and first sync took over 90 s once, with the suite's other session
        loading the machine; the nodes' own words say why when it does not come.)"""
        deadline = time.monotonic() + timeout
        while self.sync_standby(leader) is None or leader.cluster().query(
            "SELECT sync_state FROM pg_stat_replication", database="postgres"
        ) != [("sync",)]:
            if time.monotonic() > deadline:
                tails = {
                    log.name: log.read_text(errors="replace").splitlines()[-15:]
                    for log in self.folder.glob("*.log")
                }
                said = "".join(
                    f"\n--- {name}, its last lines:\n" + "\n".join(tail)
                    for name, tail in sorted(tails.items())
                )
                raise TimeoutError(f"the standby did not become synchronous within {timeout:.0f} s{said}")
            time.sleep(0.2)

    def stop(self) -> None:
        for node in self.nodes:
            if node.process is not None:  # an exited Patroni may have left its PostgreSQL running
                node.kill()
        for etcd in self.etcd:
            if etcd.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(etcd.pid, signal.SIGKILL)
                etcd.wait()


def ensure_venv() -> Path:
    """Patroni and psycopg in a venv on Debian's Python, made once."""
    stamp = VENV / "installed.txt"
    if stamp.exists() and stamp.read_text() == "\n".join(PACKAGES):
        return VENV / "bin" / "python"
    subprocess.run([DEBIAN_PYTHON, "-m", "venv", "--clear", str(VENV)], check=True)
    subprocess.run(
        [str(VENV / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", *PACKAGES], check=True
    )
    stamp.write_text("\n".join(PACKAGES))
    return VENV / "bin" / "python"


def config(
    node: Node,
    etcd: list[str],
    folder: Path,
    *,
    network: str = "127.0.0.1/32",
    dcs: dict[str, object] | None = None,
) -> str:
    """The compose nodes' configuration (deploy/patroni/patroni.yml: the cluster's settings, kept as
    they are) with this machine's addresses, paths and trust auth (YAML is a superset of JSON).
    `dcs` changes a cluster setting only for a run that shows what it is for (synchronous_mode
    off: the control; failsafe_mode on)."""
    trust = [
        "local all all trust",
        f"host all all {network} trust",
        f"host replication all {network} trust",
    ]
    config = load_config()
    config["name"] = node.name
    config["restapi"] = {
        "listen": f"{node.address}:{node.api}",
        "connect_address": f"{node.address}:{node.api}",
    }
    config["etcd3"] = {"hosts": etcd}
    config["bootstrap"]["dcs"].update(dcs or {})
    config["bootstrap"]["initdb"] = [{"encoding": "UTF8"}, {"auth": "trust"}, {"username": "postgres"}]
    config["bootstrap"]["pg_hba"] = trust
    config["postgresql"].update(
        listen=f"{node.address}:{node.port}",
        connect_address=f"{node.address}:{node.port}",
        data_dir=str(node.folder / "data"),
        bin_dir=str(pg_bin()),
        pgpass=str(node.folder / "pgpass"),
        authentication={
            "superuser": {"username": "postgres", "password": "postgres"},
            "replication": {"username": "replicator", "password": "replicator"},
        },
        parameters={"unix_socket_directories": str(folder)},
        pg_hba=trust,
    )
    return json.dumps(config)


def _start(command: list[str], log: Path, **options: Any) -> subprocess.Popen:
    with open(log, "ab") as out:  # a node started again appends to its log
        return subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, **options
        )


@contextlib.contextmanager
def running(folder: Path) -> Iterator[Patroni]:
    """etcd and two Patroni nodes with a leader, a synchronous standby and a floodgate database."""
    python = ensure_venv()
    server_folder(folder)
    etcd_port, peer_port = free_port(), free_port()
    etcd = _start(
        [ETCD, "--name", "fg", "--data-dir", str(folder / "etcd"),
         "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
         "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
         "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
         "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
         "--initial-cluster", f"fg=http://127.0.0.1:{peer_port}"],
        folder / "etcd.log",
    )  # fmt: skip
    cluster = Patroni(folder, [etcd], python)
    try:
        for name in ("pg1", "pg2"):
            node = Node(name, free_port(), free_port(), folder / name)
            server_folder(node.folder)
            cluster.nodes.append(node)
            write_config(node, config(node, [f"127.0.0.1:{etcd_port}"], folder))
        bootstrap(cluster)
        yield cluster
    finally:
        cluster.stop()


def write_config(node: Node, text: str) -> None:
    path = node.folder / "patroni.yml"
    path.write_text(text)
    if os.geteuid() == 0:
        os.chown(path, node.folder.stat().st_uid, node.folder.stat().st_gid)


def bootstrap(cluster: Patroni, *, synchronous: bool = True) -> None:
    """Start the configured nodes: the first bootstraps, the rest clone it; a floodgate database."""
    leader = None
    for node in cluster.nodes:
        node.start(cluster.python, cluster.folder)
        if leader is None:
            leader = cluster.wait_for_leader()
    assert leader is not None
    if synchronous:
        cluster.wait_for_sync_standby(leader)
    else:  # a replica streams (asynchronously), so a failover has one to promote
        deadline = time.monotonic() + 90
        while leader.cluster().query("SELECT state FROM pg_stat_replication", database="postgres") != [
            ("streaming",)
        ]:
            if time.monotonic() > deadline:
                raise TimeoutError("the replica did not start streaming")
            time.sleep(0.2)
    leader.cluster().query("CREATE DATABASE floodgate", database="postgres")
