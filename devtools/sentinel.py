"""Redis under Sentinel on this machine, for the fault run that kills the master mid-sale.

Debian's `redis-server` (a master, and a replica of it) and `redis-sentinel` (three, quorum two,
a master down after one second), each in a process group of its own under one folder and stopped
with it, whatever ends the run. `kill_master()` SIGKILLs whichever server the sentinels name master;
`wait_for_promotion()` returns once they name the other one; `revive()` starts the killed one again,
and the sentinels make it the new master's replica (so the next kill has a replica to promote).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import redis

from devtools.ports import free_port

MASTER_NAME = "floodgate"
REDIS_SERVER = "/usr/bin/redis-server"
REDIS_SENTINEL = "/usr/bin/redis-sentinel"
DOWN_AFTER_MS = 1000


@dataclass
class Sentinels:
    folder: Path
    servers: dict[int, subprocess.Popen] = field(default_factory=dict)  # port -> redis-server
    sentinels: dict[int, subprocess.Popen] = field(default_factory=dict)  # port -> redis-sentinel
    commands: dict[int, list[str]] = field(default_factory=dict)  # port -> how its server was started

    @property
    def env(self) -> dict[str, str]:
        """What the store is started with: the sentinels and the master's name (REDIS_URL says the db)."""
        first = min(self.servers)
        return {
            "REDIS_URL": f"redis://127.0.0.1:{first}/0",
            "REDIS_SENTINELS": ",".join(f"127.0.0.1:{port}" for port in self.sentinels),
            "REDIS_SENTINEL_MASTER": MASTER_NAME,
        }

    def master(self) -> int | None:
        """The master's port as a majority of the sentinels name it now (None: no majority)."""
        named: list[int] = []
        for port in self.sentinels:
            with contextlib.suppress(redis.RedisError):
                client = redis.Redis(port=port, socket_timeout=0.5, socket_connect_timeout=0.5)
                found = client.sentinel_get_master_addr_by_name(MASTER_NAME)
                assert isinstance(found, tuple), found  # one sentinel, asked directly: (host, port)
                _host, master_port = found
                named.append(int(master_port))
                client.close()
        best = max(set(named), key=named.count, default=None)
        return best if best is not None and named.count(best) >= 2 else None

    def kill_master(self) -> int:
        port = self.master()
        assert port is not None, "no master named"
        self.servers[port].send_signal(signal.SIGKILL)
        self.servers[port].wait()
        return port

    def wait_for_promotion(self, old: int, timeout: float = 30) -> float:
        """Seconds until the sentinels name a master other than `old` and it takes writes."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            new = self.master()
            if new is not None and new != old:
                with contextlib.suppress(redis.RedisError):
                    client = redis.Redis(port=new, socket_timeout=0.5)
                    if client.info("replication")["role"] == "master":
                        return time.monotonic() - started
            time.sleep(0.05)
        raise TimeoutError(f"the sentinels promoted no replica within {timeout} s")

    def master_pid(self) -> int:
        port = self.master()
        assert port is not None, "no master named"
        return self.servers[port].pid

    def revive(self, port: int, timeout: float = 30) -> None:
        """Start a killed server again (no replicaof: the sentinels reconfigure it) and wait until it
        is a replica in sync with the master."""
        self.servers[port] = _start(self.folder, f"redis-{port}", self.commands[port])
        _wait(port, self.servers[port])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(redis.RedisError):
                info = redis.Redis(port=port, socket_timeout=0.5).info("replication")
                if info["role"] == "slave" and info.get("master_link_status") == "up":
                    return
            time.sleep(0.1)
        raise TimeoutError(f"redis on {port} did not rejoin as a replica within {timeout} s")

    def logs(self, tail: int = 800) -> str:
        """The end of each sentinel's log, for a failed run's message (who saw what, when)."""
        ends = []
        for port in self.sentinels:
            text = (self.folder / f"sentinel-{port}.log").read_text(errors="replace")
            ends.append(f"sentinel {port}: ...{text[-tail:]}")
        return "\n".join(ends)

    def stop(self) -> None:
        for process in [*self.sentinels.values(), *self.servers.values()]:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _start(folder: Path, name: str, command: list[str]) -> subprocess.Popen:
    log = open(folder / f"{name}.log", "wb")  # noqa: SIM115 (kept open for the process's life)
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _wait(port: int, process: subprocess.Popen, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(redis.RedisError):
            if redis.Redis(port=port, socket_timeout=0.5).ping():
                return
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"redis on {port} did not start (exit {process.poll()})")
        time.sleep(0.05)


@contextlib.contextmanager
def running(folder: Path, *, down_after_ms: int = DOWN_AFTER_MS) -> Iterator[Sentinels]:
    """A master, its replica and three sentinels, all stopped on the way out; a master that does
    not answer for `down_after_ms` is failed over."""
    folder.mkdir(parents=True, exist_ok=True)
    found = Sentinels(folder)
    try:
        master, replica = free_port(), free_port()
        for port, extra in ((master, []), (replica, ["--replicaof", "127.0.0.1", str(master)])):
            data = folder / f"redis-{port}"
            data.mkdir(exist_ok=True)
            found.commands[port] = [
                REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", str(data),
            ]  # fmt: skip
            found.servers[port] = _start(folder, f"redis-{port}", [*found.commands[port], *extra])
            _wait(port, found.servers[port])
        for _ in range(3):
            port = free_port()
            conf = folder / f"sentinel-{port}.conf"  # sentinels rewrite their own file
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {folder}\n"
                f"sentinel monitor {MASTER_NAME} 127.0.0.1 {master} 2\n"
                f"sentinel down-after-milliseconds {MASTER_NAME} {down_after_ms}\n"
                f"sentinel failover-timeout {MASTER_NAME} 5000\n"
                f"sentinel parallel-syncs {MASTER_NAME} 1\n"
            )
            found.sentinels[port] = _start(folder, f"sentinel-{port}", [REDIS_SENTINEL, str(conf)])
            _wait(port, found.sentinels[port])
        deadline = time.monotonic() + 15
        while found.master() != master:  # every sentinel has met the master
            if time.monotonic() > deadline:
                raise RuntimeError("the sentinels did not agree on the master")
            time.sleep(0.1)
        yield found
    finally:
        found.stop()
