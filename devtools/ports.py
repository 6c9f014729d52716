"""Ports on this machine for the servers the dev tooling, the tests and the benchmarks start, and the
way every such run ends on a signal."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Callable
from typing import Any


def free_port() -> int:
    """A port nothing listens on now (the OS picks it; another process may take it later)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(
    port: int | str,
    *,
    process: subprocess.Popen[Any] | None = None,
    seconds: float = 30.0,
    failed: Callable[[], str] = lambda: "nothing answers",
) -> None:
    """Return once something accepts connections on 127.0.0.1:port. RuntimeError with `failed()`
    (called then, so it may read a log) if `process` exits first or `seconds` pass."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            with socket.create_connection(("127.0.0.1", int(port)), timeout=0.2):
                return
        except OSError:
            if (process is not None and process.poll() is not None) or time.monotonic() > deadline:
                raise RuntimeError(failed()) from None
            time.sleep(0.05)


def cleanup_on_signal() -> None:
    """SIGTERM/SIGHUP end the run as Ctrl-C does: through the finally blocks that stop every server."""

    def stop(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop)
