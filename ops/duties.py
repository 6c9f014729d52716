"""The scheduled duties a sale needs, and who runs them when beat or the worker is gone.

Every duty is a row of the table in ops/schedule.py, with one body: the service function that
Celery's task runs (ops/tasks.py registers them) and that a web process runs in its place. Beat
sends each duty of settings.CELERY_BEAT_SCHEDULE (made from the table) to a worker, and every run
that finishes there is stamped in its `ops_duty` row (a Celery signal, config/celery.py). Every
web process keeps a thread (`Keeper`) that asks once a second for the duties whose Celery runs are
late; one statement hands each such duty to one process across the fleet under a lease in
PostgreSQL, and that process runs it on its period, renewing the lease each time, until Celery's
runs come back (a Celery run clears the lease, and a duty on schedule is not handed out). Each duty
is safe to run twice at once (its own advisory try-lock, SKIP LOCKED, or rows claimed once), so
the moment of overlap when beat returns costs nothing. The ops package docstring says why PostgreSQL.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, connections
from django.utils.module_loading import import_string

from ops import schedule, sql

log = logging.getLogger(__name__)

POLL_SECONDS = 1.0  # how often each web process asks for late duties


def body(name: str) -> Callable[[], object]:
    """The one function a duty runs, by its task's name or an old one: in Celery's task and in a
    web process's cover alike. Looked up on each call, as the table names it by its path."""
    found: Callable[[], object] = import_string(schedule.BY_NAME[name].body)
    return found


@dataclass(frozen=True)
class Duty:
    name: str
    period: float
    late_after: float  # Celery's last run older than this: a web process covers it


def duties() -> dict[str, Duty]:
    """Every duty of beat's schedule, with the period it has there."""
    found: dict[str, Duty] = {}
    for entry in settings.CELERY_BEAT_SCHEDULE.values():
        name, period = str(entry["task"]), float(entry["schedule"])  # type: ignore[arg-type]
        # Two periods and a second: one beat message lost or one slow run is not yet "late".
        found[name] = Duty(name, period, late_after=2 * period + 1)
    return found


def ensure() -> None:
    """A row per duty, its period as this process's settings have it."""
    known = list(duties().values())
    params: dict[str, Any] = {
        "names": [d.name for d in known],
        "periods": [d.period for d in known],
        "lates": [d.late_after for d in known],
    }
    with connection.cursor() as cursor:
        cursor.execute(sql.ENSURE_DUTIES, params)
        cursor.execute(sql.UPDATE_DUTY_PERIODS, params)


def record_scheduled_run(name: str) -> None:
    """Celery finished a run of this duty (the signal's handler): it is on schedule. A run under an
    old name stamps the duty's row under its name now."""
    if name not in schedule.BY_NAME:
        return
    name = schedule.BY_NAME[name].task
    with connection.cursor() as cursor:
        cursor.execute(sql.RECORD_SCHEDULED_RUN, {"name": name})
        if cursor.rowcount == 0:  # a database that never met a keeper: make the rows, stamp again
            ensure()
            cursor.execute(sql.RECORD_SCHEDULED_RUN, {"name": name})


def take_late(names: list[str], *, me: str) -> list[str]:
    """The duties among `names` this process must run now, in Celery's place (the lease)."""
    with connection.cursor() as cursor:
        cursor.execute(sql.TAKE_LATE_DUTIES, {"names": names, "me": me})
        return sorted(row[0] for row in cursor.fetchall())


def renew(name: str, *, me: str) -> bool:
    """Whether this process still covers the duty for another period."""
    with connection.cursor() as cursor:
        cursor.execute(sql.RENEW_DUTY, {"name": name, "me": me})
        return cursor.fetchone() is not None


def run_covered(name: str, *, me: str) -> bool:
    """One run of a duty this process leased; recorded, whether it worked or not."""
    error = ""
    try:
        body(name)()
    except Exception as failed:  # recorded and logged; the next period tries again
        log.exception("duty %s failed in %s", name, me)
        error = f"{type(failed).__name__}: {failed}"[:300]
    with connection.cursor() as cursor:
        cursor.execute(sql.RECORD_COVERED_RUN, {"name": name, "me": me, "error": error})
    return not error


@dataclass(frozen=True)
class DutyState:
    name: str
    period: float
    late_after: float
    age: float  # seconds since its last run, by anyone
    covered: bool  # Celery is late with it: a web process runs it (or nobody does, if age is large)
    ran_by: str
    covered_runs: int
    last_error: str

    @property
    def late(self) -> bool:
        return self.age > self.late_after


def states() -> list[DutyState]:
    """Each duty of the table as its row has it. The row of a name no duty has now (a duty renamed,
    or gone) is left out: no process runs it, and it must not show as late."""
    with connection.cursor() as cursor:
        cursor.execute(sql.DUTY_STATES)
        return [DutyState(*row) for row in cursor.fetchall() if row[0] in schedule.DUTIES]


class Keeper:
    """The web process's thread that covers late duties: one per process, started by the server."""

    def __init__(self, *, poll: float = POLL_SECONDS) -> None:
        self.poll = poll
        self._pid: int | None = None
        self._covering: set[str] = set()
        self._lock = threading.Lock()

    @property
    def me(self) -> str:
        return f"web {socket.gethostname()}:{os.getpid()}"

    def start(self) -> None:
        """Start once per process (again in a forked child); off with DUTY_TAKEOVER=0."""
        if not settings.DUTY_TAKEOVER or self._pid == os.getpid():
            return
        with self._lock:
            if self._pid == os.getpid():
                return
            self._pid, self._covering = os.getpid(), set()
        threading.Thread(target=self._watch, name="duty-keeper", daemon=True).start()

    def _watch(self) -> None:
        ensured_at = -1e9
        while True:
            time.sleep(self.poll * random.uniform(0.8, 1.2))  # processes started together spread out
            try:
                if time.monotonic() - ensured_at > 30:  # rows a flush or a new duty removed or added
                    ensure()
                    ensured_at = time.monotonic()
                with self._lock:
                    idle = [name for name in duties() if name not in self._covering]
                for name in take_late(idle, me=self.me):
                    log.warning("duty %s: Celery is late with it; %s runs it meanwhile", name, self.me)
                    with self._lock:
                        self._covering.add(name)
                    threading.Thread(
                        target=self._cover, args=(name,), name=f"duty-{name}", daemon=True
                    ).start()
            except Exception as error:  # the database away: try again next time
                log.warning("duty keeper: %s", error)
            finally:
                connections.close_all()

    def _run_keeping_the_lease(self, name: str, period: float) -> None:
        """One run; a run longer than a period renews the lease meanwhile, so no other process
        starts the same duty beside it (its own period is the renewal's)."""
        done = threading.Event()

        def keep() -> None:
            try:
                while not done.wait(period):
                    renew(name, me=self.me)
            finally:
                connections.close_all()

        heartbeat = threading.Thread(target=keep, name=f"duty-{name}-lease", daemon=True)
        heartbeat.start()
        try:
            run_covered(name, me=self.me)
        finally:
            done.set()
            connections.close_all()
            heartbeat.join()

    def _cover(self, name: str) -> None:
        """Run the duty on its period while this process keeps the lease."""
        period = duties()[name].period
        try:
            while True:
                started = time.monotonic()
                self._run_keeping_the_lease(name, period)
                # Spread about the period: duties taken over in one instant drift apart, not in step.
                pause = period * random.uniform(0.9, 1.1) - (time.monotonic() - started)
                time.sleep(max(0.0, pause))
                if not renew(name, me=self.me):
                    log.warning(
                        "duty %s: handed back (Celery runs it again, or another process has it)", name
                    )
                    return
        except Exception as error:
            log.warning("duty %s: stopped covering it: %s", name, error)
        finally:
            connections.close_all()
            with self._lock:
                self._covering.discard(name)


keeper = Keeper()
