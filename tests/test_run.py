"""`floodgate.py run` as a person starts and stops it: the whole store on embedded servers of its own
(a folder of this test's), stopped whole by a signal to its group even when it was started with
SIGINT ignored (a script's background job), and stopped whole when one of its servers dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

from devtools.ports import free_port, wait_for_port
from tests.conftest import ROOT

# servers: floodgate.py run
pytestmark = [pytest.mark.timeout(600), pytest.mark.servers]  # two starts, the first migrating a new database


def ignore_sigint_in_a_group_of_its_own() -> None:
    os.setpgrp()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as `cmd &` in a script starts it


@contextmanager
def store(data: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path, list[int]]]:
    port, provider = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "PGBIN"}}
    env |= {
        "FLOODGATE_DATA": str(data),
        "PORT": str(port),
        "PROVIDER_PORT": str(provider),
        "WEB_WORKERS": "1",
        "EMAIL_FILE_PATH": str(data / "mail"),
    }
    log = data.parent / f"run-{port}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "devtools.devstack", "run"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=ignore_sigint_in_a_group_of_its_own,
        )
    try:
        wait_for_port(port, process=process, seconds=240, failed=lambda: log.read_text()[-3000:])
        wait_for_port(provider, process=process, seconds=30, failed=lambda: log.read_text()[-3000:])
        yield process, log, [port, provider]
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(60)


def gone(port: int) -> bool:
    try:
        wait_for_port(port, seconds=0)
    except RuntimeError:
        return True
    return False


def assert_all_stopped(process: subprocess.Popen[bytes], log: Path, data: Path, ports: list[int]) -> None:
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the store did not stop:\n{log.read_text()[-3000:]}") from None
    text = log.read_text()
    assert "embedded PostgreSQL and Redis stopped" in text, text[-3000:]
    assert all(gone(port) for port in ports), text[-3000:]  # web, provider, Redis
    assert not (data / "postgres" / "postmaster.pid").exists(), text[-3000:]
    # each process's reconnect tracebacks at most (25 on a loaded machine: the supervisor's poll
    # comes later), not the ~600 a minute of a store left without Redis
    assert text.count("Traceback") < 60, text[-3000:]


def test_a_group_sigint_stops_the_whole_store_and_a_dead_redis_stops_it_too(tmp_path: Path) -> None:
    data = tmp_path / "data"

    with store(data) as (process, log, ports):
        redis_port = int((data / "redis" / "port").read_text())
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C in the terminal, or kill -INT -PGID
        assert_all_stopped(process, log, data, [*ports, redis_port])
        assert "stopping" in log.read_text()

    # Started again on the same folder, its Redis killed from outside: the rest stops too.
    with store(data) as (process, log, ports):
        redis_port = int((data / "redis" / "port").read_text())
        server = redis.Redis(port=redis_port)
        os.kill(int(server.info("server")["process_id"]), signal.SIGKILL)
        started = time.monotonic()
        assert_all_stopped(process, log, data, [*ports, redis_port])
        assert "embedded Redis exited; stopping the rest" in log.read_text()
        assert time.monotonic() - started < 30
