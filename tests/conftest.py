"""Fixtures for tests against real PostgreSQL and Redis (never SQLite, never mocks)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis as redis_lib
from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def redis() -> Iterator[redis_lib.Redis]:
    client = redis_lib.Redis.from_url(settings.REDIS_URL)
    client.ping()
    yield client
    client.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def database_url_for_tests() -> str:
    """DATABASE_URL with the database swapped for the one pytest-django created."""
    from django.db import connection

    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit(parts._replace(path="/" + connection.settings_dict["NAME"]))


def start_process(name: str, command: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, Path]:
    log = ROOT / ".data" / "test" / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    return process, log


@pytest.fixture(scope="session")
def live_daphne(django_db_setup: None, django_db_blocker: object) -> Iterator[str]:
    """A real daphne process serving shop.asgi:application against the test database."""
    port = free_port()
    env = {**os.environ, "DATABASE_URL": database_url_for_tests(), "DB_POOL_MAX_SIZE": "10"}
    process, log = start_process(
        f"daphne-{port}",
        [
            str(Path(sys.executable).parent / "daphne"),
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "shop.asgi:application",
        ],
        env,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"daphne did not start:\n{log.read_text()}") from None
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}"
    process.terminate()
    process.wait(10)


@pytest.fixture
def celery_with_beat(transactional_db: None) -> Iterator[subprocess.Popen]:
    """A real Celery worker with an embedded beat, on the test database, sweeping every second."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url_for_tests(),
        "DB_POOL_MAX_SIZE": "4",
        "RECLAIM_EVERY_SECONDS": "1",
    }
    schedule = ROOT / ".data" / "test" / f"beat-{os.getpid()}"
    process, _log = start_process(
        "celery",
        [
            str(Path(sys.executable).parent / "celery"),
            "-A",
            "shop.celery:app",
            "worker",
            "-B",
            "-s",
            str(schedule),
            "--concurrency",
            "1",
            "-l",
            "info",
            "--without-heartbeat",
            "--without-gossip",
        ],
        env,
    )
    yield process
    process.terminate()
    try:
        process.wait(15)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture
def roles(db: None) -> None:
    """The Merchants and On-call groups; transactional tests flush what the migration made."""
    import importlib

    from django.apps import apps

    importlib.import_module("shop.migrations.0003_roles").create_groups(apps, None)
