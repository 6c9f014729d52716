"""A rehearsal a merchant can run: `python -m devtools.rehearse SLUG --buyers 5000 [--base URL]`.

Copies the drop (same settings, fresh stock, a `-rehearsal-N` slug, starting in a few seconds,
hidden from everyone but its own buyers: ops/rehearsal.py), makes the buyers, runs the Locust
crowd (devtools/rehearse_crowd.py, its own process) against the running store, samples the
copy's invariant and queue from the database while it runs, prints progress, writes a
self-contained HTML report (devtools/rehearse_report.py), and removes the buyers. The real drop
is only read. Bad arguments exit 2, an unknown drop or a crowd over REHEARSAL_MAX_BUYERS 1, each
with one line on stderr.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from devtools import rehearse_report

ROOT = Path(__file__).resolve().parent.parent
STOP = threading.Event()  # set by SIGTERM: the rehearsal ends early, and cleanly


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="floodgate.py rehearse", description=__doc__.splitlines()[0])
    parser.add_argument("slug", help="the drop to rehearse (it is copied, never touched)")
    parser.add_argument("--buyers", type=int, default=500, help="buyers in the crowd (1-20000)")
    parser.add_argument(
        "--base", default=os.environ.get("PUBLIC_BASE_URL", "http://127.0.0.1:8000"), help="the running store"
    )
    parser.add_argument("--out", type=Path, help="folder for the reports (default: REHEARSAL_DIR)")
    parser.add_argument("--starts-in", type=float, default=6.0, help="seconds until the copy goes on sale")
    parser.add_argument("--max-seconds", type=float, default=300.0, help="stop the crowd after this long")
    args = parser.parse_args(argv)
    if not 1 <= args.buyers <= 20_000:
        parser.error(f"--buyers must be between 1 and 20000, not {args.buyers}")
    if not args.base.startswith(("http://", "https://")):
        parser.error(f"--base must be an http(s) URL, not {args.base!r}")
    if not 0 <= args.starts_in <= 600 or not 1 <= args.max_seconds <= 3600:
        parser.error("--starts-in must be 0-600 and --max-seconds 1-3600")
    return args


def rehearse(args: argparse.Namespace) -> Path:
    """Run one rehearsal; return the report's path."""
    from django.conf import settings

    from core.errors import InvalidInput
    from holds.counts import invariant
    from ops import rehearsal
    from shop.models import Drop

    args.out = args.out or settings.REHEARSAL_DIR
    drop = Drop.objects.filter(slug=args.slug).select_related("product").first()
    if drop is None:
        sys.exit(f"rehearse: there is no drop {args.slug!r}")
    real_before = invariant(drop_id=drop.pk)
    try:
        copy, buyers = rehearsal.begin(
            drop=drop,
            buyers=args.buyers,
            starts_in=timedelta(seconds=args.starts_in),
            lasts=timedelta(seconds=args.max_seconds),
        )
    except InvalidInput as error:
        sys.exit(f"rehearse: {error.detail}")
    say(
        f"{len(buyers)} buyers made; hidden copy {copy.slug} of {drop.slug}: {copy.quantity} units, "
        f"starts in {args.starts_in:g}s{', waiting room' if copy.waiting_room else ''}"
    )
    # SIGTERM (the admin's process stopped, a deploy) ends the rehearsal as its end does: the
    # crowd stops, the copy closes and its buyers go. A SIGKILL leaves that to the
    # ops.end_rehearsals duty. A flag, not an exception: never in the middle of a query.
    signal.signal(signal.SIGTERM, lambda *_: STOP.set())
    try:
        return run_crowd(args, drop, copy, buyers, real_before)
    finally:
        say(f"rehearsal over: {rehearsal.end(copy=copy)} buyers removed")


def ship_to(product: Any) -> str:
    """A country the product ships to ("" for a product that is not shipped)."""
    if not product.ships:
        return ""
    zone = product.shipping_zones.order_by("pk").first()
    return zone.countries[0] if zone is not None and zone.countries else "DE"


def run_crowd(args: argparse.Namespace, drop: Any, copy: Any, buyers: list[Any], real_before: Any) -> Path:
    """The crowd against the copy, sampled while it runs; the report written. Returns its path."""
    from django.utils import timezone

    from checkout.models import Order
    from holds.counts import invariant

    work = args.out / copy.slug
    work.mkdir(parents=True, exist_ok=True)
    plan = {
        "base": args.base.rstrip("/"),
        "slug": copy.slug,
        "waiting_room": copy.waiting_room,
        "tokens": [b.token for b in buyers],
        # a sized drop's buyers name a size; a shipped product's give an address in a country it
        # ships to (one without zones ships everywhere)
        "sizes": {v.name: v.quantity for v in copy.variants.all() if v.name},
        "ship_to": ship_to(copy.product),
        "max_seconds": args.max_seconds,
        "spawn_rate": max(50, args.buyers // 5),
    }
    (work / "plan.json").write_text(json.dumps(plan))
    (work / "plan.json").chmod(0o600)  # bearer tokens
    events_path = work / "answers.csv"
    crowd = subprocess.Popen(
        [sys.executable, "-m", "devtools.rehearse_crowd", str(work / "plan.json"), str(events_path)],
        cwd=ROOT,
    )
    try:
        samples = sample(crowd, copy, events_path)
    finally:
        if crowd.poll() is None:  # stopped early: the crowd stops with it
            crowd.terminate()
            crowd.wait(10)
        (work / "plan.json").unlink(missing_ok=True)  # the tokens are no longer needed
    if STOP.is_set():
        sys.exit("rehearse: stopped (SIGTERM) before the crowd was done; no report")
    final = invariant(drop_id=copy.pk)  # the crowd is gone: nobody else can buy from the copy
    database = {
        "quantity": final.quantity,
        "available": final.available,
        "held": final.held,
        "sold": final.sold,
        "drift": final.drift,
        "orders_confirmed": Order.objects.filter(drop=copy, state="confirmed").count(),
        "real_drop_unchanged": invariant(drop_id=drop.pk) == real_before,
    }
    with open(events_path, newline="") as f:
        answers = [
            (float(t), step, int(status), code, float(ms)) for t, step, status, code, ms in csv.reader(f)
        ]
    meta = {
        "drop": drop.slug,
        "copy": copy.slug,
        "buyers": args.buyers,
        "base": args.base,
        "waiting_room": copy.waiting_room,
        "crowd_exit": crowd.returncode,
        "made_at": timezone.now().isoformat(timespec="seconds"),
    }
    summary = rehearse_report.summarise(answers, samples, database, meta)
    (work / "summary.json").write_text(json.dumps(summary, indent=1))
    report = work / "report.html"
    report.write_text(rehearse_report.render(answers, samples, summary))
    from ops import rehearsal

    # In the database, where every web replica finds it (the admin's drop page links it).
    rehearsal.keep_report(drop=drop, copy=copy, buyers=args.buyers, summary=summary, html=report.read_text())
    for line in rehearse_report.console_lines(summary):
        say(line)
    say(f"report: {report}")
    return report


def sample(crowd: subprocess.Popen[bytes], copy: Any, events_path: Path) -> list[dict[str, float]]:
    """The copy's invariant and line every half second until the crowd is done, with progress."""
    from admission.models import Queue, Ticket
    from holds.counts import invariant

    samples: list[dict[str, float]] = []
    started = time.monotonic()
    last_say = 0.0
    while True:
        done = crowd.poll() is not None
        now = invariant(drop_id=copy.pk)
        queue = Queue.objects.filter(drop=copy).first()
        through = queue.admitted_through if queue else 0
        tickets = Ticket.objects.filter(drop=copy)
        waiting = tickets.count() - tickets.filter(number__lte=through).count() if queue else 0
        t = time.monotonic() - started
        samples.append(
            {
                "t": round(t, 2),
                "available": now.available,
                "held": now.held,
                "sold": now.sold,
                "quantity": now.quantity,
                "drift": now.drift,
                "waiting": waiting,
            }
        )
        if t - last_say >= 2 or done:
            last_say = t
            answers = count_lines(events_path)
            say(
                f"{t:5.1f}s  answers {answers:7d}  available {now.available}  held {now.held}  "
                f"sold {now.sold}  waiting {waiting}  invariant {'ok' if now.drift == 0 else now.drift}"
            )
        if done or STOP.is_set():
            break
        time.sleep(0.5)
    return samples


def count_lines(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def say(message: str) -> None:
    print(f"rehearse: {message}", flush=True)


def main(argv: list[str]) -> int:
    args = parse(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    rehearse(args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
