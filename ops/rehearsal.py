"""Rehearsals: a crowd of made-up buyers on a hidden copy of a drop, and what is left of it after.

The copy (`Drop.rehearsal_of`) is a rehearsal everywhere: no catalogue lists it, its page and
API answer 404 to anyone but its own buyers, the claim statements let in only them (and them
nowhere else: shop.sql.AUDIENCE), and its payments go to the simulator. Its buyers go when it
ends, whichever way: `end` when the crowd is done (or its process is stopped), and the
`ops.end_rehearsals` duty for a copy whose time ran out with buyers still there (a process
killed outright). settings.REHEARSAL_MAX_BUYERS caps the crowd (production: none until set).

The engine is dev tooling (devtools/rehearse.py, Locust); production code never imports it
(import-linter), so this module starts it as a process of its own, with the store's own
environment. Its working files and log stay under settings.REHEARSAL_DIR on the host that ran it;
its finished report is kept in the database (`keep_report`), so every web replica shows it.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from allauth.account.models import EmailAddress
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Exists, F, OuterRef
from django.db.models.functions import Least
from django.utils import timezone

from catalogue import services
from core.errors import InvalidInput
from holds.models import Hold
from ops.models import RehearsalReport
from shop.models import ApiToken, Drop

log = logging.getLogger(__name__)

MAX_BUYERS = 20_000  # as devtools/rehearse.py allows
GRACE = timedelta(seconds=60)  # the copy's sale outlasts the crowd's time by this much


@dataclass(frozen=True)
class Started:
    pid: int
    log_path: Path


def parse_buyers(raw: object) -> int:
    """The crowd's size from a form or a command line; InvalidInput with a readable message."""
    most = min(settings.REHEARSAL_MAX_BUYERS, MAX_BUYERS)
    if most < 1:
        raise InvalidInput(
            "Rehearsals are off on this shop: set REHEARSAL_MAX_BUYERS to the largest crowd it may aim "
            "at itself beside its real buyers."
        )
    try:
        buyers = int(str(raw).strip())
    except ValueError:
        raise InvalidInput(f"Buyers must be a whole number from 1 to {most}, not {raw!r}.") from None
    if not 1 <= buyers <= most:
        raise InvalidInput(f"Buyers must be from 1 to {most} (REHEARSAL_MAX_BUYERS), not {buyers}.")
    return buyers


def begin(
    *, drop: Drop, buyers: object, starts_in: timedelta, lasts: timedelta
) -> tuple[Drop, list[services.NewBuyer]]:
    """The hidden copy of `drop` and its buyers; it goes on sale `starts_in` after they are made
    (20,000 take seconds) and stays on sale `lasts` (the crowd's time) plus GRACE at most."""
    count = parse_buyers(buyers)
    if drop.rehearsal_of_id is not None:
        raise InvalidInput(f"{drop.slug} is itself a rehearsal's copy; rehearse the drop it copies.")
    lasts = min(drop.ends_at - drop.starts_at, lasts + GRACE)
    copy = services.duplicate_drop(
        drop=drop, starts_in=timedelta(days=1), slug_word="rehearsal", rehearsal=True, lasts=lasts
    )
    made = services.create_buyers(count=count, prefix=f"rehearsal-{drop.pk}", rehearsal=copy)
    copy.starts_at = timezone.now() + starts_in
    copy.ends_at = copy.starts_at + lasts
    Drop.objects.filter(pk=copy.pk).update(starts_at=copy.starts_at, ends_at=copy.ends_at)
    log.info("rehearsal %s of drop %s: %s buyers", copy.slug, drop.pk, count)
    return copy, made


def end(*, copy: Drop) -> int:
    """Close the rehearsal's copy and remove its buyers; returns how many were still there.

    A buyer who never held a unit is deleted (token, address and ticket with it). One whose hold
    or order is part of the copy's record (holds and orders keep their buyer) is deactivated,
    with no token, password or address left. Safe to run twice, or beside another run."""
    assert copy.rehearsal_of_id is not None, "only a rehearsal's copy is ended this way"
    now = timezone.now()
    Drop.objects.filter(pk=copy.pk, ends_at__gt=now).update(
        starts_at=Least(F("starts_at"), now - timedelta(seconds=1)), ends_at=now
    )
    User = get_user_model()
    with transaction.atomic():
        ids = list(User.objects.filter(rehearsal__drop=copy, is_active=True).values_list("pk", flat=True))
        ApiToken.objects.filter(user_id__in=ids).delete()  # every web process hears each (accounts.apps)
        EmailAddress.objects.filter(user_id__in=ids).delete()
        held = User.objects.filter(pk__in=ids).filter(Exists(Hold.objects.filter(buyer=OuterRef("pk"))))
        held.update(is_active=False, password="!rehearsal-ended", email="")  # "!": no password works
        User.objects.filter(pk__in=ids, is_active=True).delete()
    log.info("rehearsal %s ended: %s buyers removed", copy.slug, len(ids))
    return len(ids)


def end_overdue() -> int:
    """End every rehearsal whose copy's time is up with buyers still there (its process was killed,
    or its host went). Returns how many were ended."""
    overdue = Drop.objects.filter(
        rehearsal_of__isnull=False, ends_at__lte=timezone.now(), rehearsal_buyers__user__is_active=True
    ).distinct()
    copies = list(overdue)
    for copy in copies:
        end(copy=copy)
    return len(copies)


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


REPORTS_SHOWN = 5  # the drop's admin page links this many of its latest reports


def keep_report(
    *, drop: Drop, copy: Drop, buyers: int, summary: dict[str, object], html: str
) -> RehearsalReport:
    """Store a finished rehearsal's report of `drop` (the engine calls this when its crowd is done)."""
    assert copy.rehearsal_of_id == drop.pk, "a report belongs to the drop its copy rehearsed"
    report = RehearsalReport.objects.create(
        drop=drop, copy_slug=copy.slug, buyers=buyers, summary=summary, html=html
    )
    log.info("rehearsal %s of drop %s: report %s kept", copy.slug, drop.pk, report.pk)
    return report


def latest_reports(*, drop: Drop, count: int = REPORTS_SHOWN) -> list[RehearsalReport]:
    """The drop's latest reports, newest first, without their (large) HTML."""
    return list(RehearsalReport.objects.filter(drop=drop).defer("html", "summary")[:count])


def report_of(*, drop: Drop, report_id: int | None = None) -> RehearsalReport | None:
    """One report of this drop (the latest when no id is given), or None."""
    reports = RehearsalReport.objects.filter(drop=drop)
    if report_id is not None:
        reports = reports.filter(pk=report_id)
    return reports.first()
