"""A real PgBouncer (Debian's `pgbouncer`) in transaction mode in front of a PostgreSQL server.

The tests run the race, saga and kill-switch scenarios through it (tests/test_pgbouncer.py,
`pytest --through-pgbouncer`), as production runs behind the one in docker-compose.yml.
`floodgate.py test` installs the package the way it installs Chromium.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit, urlunsplit

from devtools.ports import free_port, wait_for_port

BINARY = "/usr/sbin/pgbouncer"


@dataclass
class Bouncer:
    url: str  # the upstream URL with PgBouncer's address in place of the server's
    port: int
    admin: Callable[[str], list[dict[str, object]]]  # a command on PgBouncer's console (SHOW POOLS)
    stop: Callable[[], None]


def version(binary: str = BINARY) -> tuple[int, int]:
    """(1, 18) for 'PgBouncer 1.18.0': below (1, 21) it cannot carry prepared statements."""
    first = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True).stdout
    major, minor = first.split()[1].split(".")[:2]
    return int(major), int(minor)


def start(upstream_url: str, folder: Path, *, pool_size: int = 20, binary: str = BINARY) -> Bouncer:
    """Start PgBouncer on a free loopback port, forwarding every database name to upstream_url's server."""
    if not Path(binary).exists():
        raise RuntimeError(f"{binary} is missing: install Debian's pgbouncer (floodgate.py test does)")
    parts = urlsplit(upstream_url)
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    server_host = query.get("host") or parts.hostname or "127.0.0.1"
    server_port = parts.port or 5432
    user = parts.username or "postgres"
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    ini = folder / "pgbouncer.ini"
    lines = [
        "[databases]",
        # The fallback entry: any database name (the tests' own, too) goes to the same server.
        f"* = host={server_host} port={server_port} user={user}",
        "[pgbouncer]",
        "listen_addr = 127.0.0.1",
        f"listen_port = {port}",
        "unix_socket_dir =",
        "pool_mode = transaction",
        "auth_type = any",
        f"default_pool_size = {pool_size}",
        "max_client_conn = 2000",
        "max_db_connections = 0",
        # psycopg sends these at connect; PgBouncer would otherwise refuse the connection.
        "ignore_startup_parameters = extra_float_digits,options",
        "admin_users = pgbouncer",
        f"logfile = {folder / 'pgbouncer.log'}",
        f"pidfile = {folder / 'pgbouncer.pid'}",
        "server_check_delay = 1",
        "server_login_retry = 1",
    ]
    runas = system_user()
    if runas:
        lines.append(f"user = {runas}")
        shutil.chown(folder, runas)
    ini.write_text("\n".join(lines) + "\n")
    log = folder / "pgbouncer.log"
    log.unlink(missing_ok=True)
    process = subprocess.Popen(
        [binary, str(ini)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    wait_for_port(
        port,
        process=process,
        seconds=10,
        failed=lambda: f"pgbouncer did not start:\n{log.read_text() if log.exists() else ''}",
    )

    netloc = f"{user}@127.0.0.1:{port}"
    kept = "&".join(f"{k}={v}" for k, v in query.items() if k != "host")
    url = urlunsplit((parts.scheme, netloc, parts.path, kept, ""))

    def admin(command: str) -> list[dict[str, object]]:
        import psycopg

        with psycopg.connect(
            host="127.0.0.1",
            port=port,
            dbname="pgbouncer",
            user="pgbouncer",
            autocommit=True,
            prepare_threshold=None,
        ) as conn:
            cursor = conn.cursor()
            cursor.execute(command)
            if cursor.description is None:
                return []  # a command (PAUSE, DISABLE, KILL ...): no rows
            names = [c.name for c in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def stop() -> None:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    return Bouncer(url=url, port=port, admin=admin, stop=stop)


def system_user() -> str | None:
    """Whom PgBouncer runs as: it refuses root, and the embedded server's own user reaches its socket."""
    if os.geteuid() != 0:
        return None
    return "pgserver" if _user_exists("pgserver") else "nobody"


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True
