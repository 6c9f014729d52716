"""Start a rehearsal of a drop in the background and find its last report (issue 13 §4).

The engine is dev tooling (devtools/rehearse.py, Locust); production code never imports it
(import-linter), so this module starts it as a process of its own, with the store's own
environment, and only reads the files it writes under settings.REHEARSAL_DIR.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from core.errors import InvalidInput
from shop.models import Drop

log = logging.getLogger(__name__)

MAX_BUYERS = 20_000  # as devtools/rehearse.py allows


@dataclass(frozen=True)
class Started:
    pid: int
    log_path: Path


def parse_buyers(raw: object) -> int:
    """The crowd's size from a form or a command line; InvalidInput with a readable message."""
    try:
        buyers = int(str(raw).strip())
    except ValueError:
        raise InvalidInput(f"Buyers must be a whole number from 1 to {MAX_BUYERS}, not {raw!r}.") from None
    if not 1 <= buyers <= MAX_BUYERS:
        raise InvalidInput(f"Buyers must be from 1 to {MAX_BUYERS}, not {buyers}.")
    return buyers


def start_rehearsal(*, drop: Drop, buyers: int) -> Started:
    """Start `python -m devtools.rehearse` on a copy of the drop against this store; do not wait."""
    buyers = parse_buyers(buyers)
    folder = Path(settings.REHEARSAL_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    pid_path = folder / f"{drop.slug}.pid"
    running = running_pid(pid_path)
    if running is not None:
        raise InvalidInput(f"A rehearsal of {drop.slug} is already running (process {running}).")
    log_path = folder / f"{drop.slug}.log"
    command = [
        sys.executable, "-m", "devtools.rehearse", drop.slug,
        "--buyers", str(buyers), "--base", settings.PUBLIC_BASE_URL, "--out", str(folder),
    ]  # fmt: skip
    with open(log_path, "wb") as out:
        process = subprocess.Popen(
            command,
            cwd=settings.BASE_DIR,
            env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # outlives the request; not killed with the web worker's group
        )
    pid_path.write_text(str(process.pid))
    threading.Thread(target=process.wait, daemon=True).start()  # reaped when it ends, no zombie
    log.info("rehearsal of drop %s started: pid %s, %s buyers", drop.pk, process.pid, buyers)
    return Started(process.pid, log_path)


def running_pid(pid_path: Path) -> int | None:
    """The process a pid file names, if it still runs (this host only; a stale file is ignored)."""
    try:
        pid = int(pid_path.read_text())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    try:  # a reaped pid may be reused: only a rehearsal counts
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return pid
    return pid if b"devtools.rehearse" in command else None


def last_report(*, drop: Drop) -> Path | None:
    """The last finished rehearsal's report of this drop, if any."""
    path = Path(settings.REHEARSAL_DIR) / f"{drop.slug}.html"
    return path if path.is_file() else None
