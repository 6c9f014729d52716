"""`floodgate-web --host H --port P [--workers N]`: serve config.asgi:application in production.

granian (a Rust HTTP server, ASGI interface, uvloop), one worker process per core. One daphne
process caps a bare ASGI callable at a few thousand answers a second on two cores, and the
edge's cheap "no" can go no faster than the server around it; `python3 floodgate.py bench
servers` measured granian ahead of daphne and uvicorn on the edge's answers (README, "Which
server"). WebSockets (Channels over the Redis layer) are granian's own. Each worker is a
whole process with its own edge, snapshot subscriber and channel-layer connection; the
workers share nothing but the listening socket.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import resource
import subprocess
import sys
from pathlib import Path

APP = "config.asgi:application"
CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
# Open connections one worker accepts. granian's own default (its backlog over the workers: 512
# for two) counts idle keep-alive connections: on two workers the 1,025th open connection was
# never read, its requests stalled until they timed out, and the shop's cheap answers and 503s
# never reached it. Connections cost the server a few KiB each; the shop sheds load itself.
CONNECTIONS = 16_384
BACKLOG = 4096  # connections the kernel queues before accept (it caps this at net.core.somaxconn)


def cores(cpu_max: Path = CPU_MAX) -> int:
    """The cores this process may use: its CPU set, capped by a cgroup CPU quota (`--cpus` of
    a container), since workers beyond the quota only take turns on it."""
    try:
        count = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        count = os.cpu_count() or 1
    try:
        quota, period = cpu_max.read_text().split()[:2]
        if quota != "max":
            count = min(count, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):  # no cgroup v2 here: the CPU set is all we know
        pass
    return count


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="floodgate-web", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: all)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--workers", type=int, default=cores(), help="worker processes (default: one per core)"
    )
    parser.add_argument(
        "--connections",
        type=int,
        default=CONNECTIONS,
        help=f"open HTTP connections per worker, idle keep-alive ones included (default {CONNECTIONS:,})",
    )
    parser.add_argument(
        "--access-log", action="store_true", help="log every request (the proxy in front usually does)"
    )
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    if args.connections < 1:
        parser.error("--connections must be at least 1")
    return args


def open_files(wanted: int) -> int:
    """Raise this process's open-file limit towards `wanted` (as far as the hard limit lets);
    the workers inherit it. Returns the connections a worker can then hold."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    spare = 256  # the worker's own files: the database and Redis pools, logs, the event loop
    target = wanted + spare if hard == resource.RLIM_INFINITY else min(hard, wanted + spare)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):  # a kernel cap below the hard limit (macOS): keep what we have
            pass
    held = max(1, min(wanted, soft - spare))
    if held < wanted:
        logging.getLogger(__name__).warning(
            "floodgate-web: %s open connections a worker (the open-file limit is %s)", held, soft
        )
    return held


# ops/checks.py's findings at start, one JSON object a line (see preflight).
CHECKS = "from ops.checks import report; report()"


def preflight() -> None:
    """Run the deploy checks (ops/checks.py) before serving; exit when one refuses the start.

    A configuration that cannot take a payment (the pay page outside the allow-list, Stripe's keys
    missing or wrong, the test-only card endpoint mounted) is refused: the shop would open and its
    first buyers would meet the failure. A missing or stale static manifest is said loudly on
    stderr but served: every page is then a 500, yet the API, the queue and the WebSocket work,
    and a rehearsal or bench of those runs without collected files. The checks run in a child
    process: this one forks the workers and stays free of Django.
    """
    done = subprocess.run([sys.executable, "-c", CHECKS], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit("floodgate-web: the settings do not load (above); not starting.")
    findings = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    refused = [f for f in findings if f["refuses"]]
    for finding in findings:
        verdict = "REFUSED" if finding in refused else "WARNING"
        hint = f" ({finding['hint']})" if finding.get("hint") else ""
        sys.stderr.write(f"floodgate-web: {verdict} {finding['id']}: {finding['msg']}{hint}\n")
    if refused:
        raise SystemExit(f"floodgate-web: not starting: {len(refused)} deploy check(s) failed (above).")


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    preflight()
    from granian import Granian
    from granian.constants import Interfaces, Loops

    Granian(
        APP,
        address=args.host,
        port=args.port,
        # ASGI with lifespan: the edge answers it and warms the claim lane before any request.
        interface=Interfaces.ASGI,
        workers=args.workers,
        backlog=BACKLOG,
        backpressure=open_files(args.connections),
        loop=Loops.uvloop,
        websockets=True,
        log_access=args.access_log,
        # A worker that dies (out of memory, a crash in C) is replaced instead of leaving the
        # instance with fewer workers behind a health check that still passes.
        respawn_failed_workers=True,
        # On stop, waiting-room sockets get this long to close before their worker is killed.
        workers_kill_timeout=10,
    ).serve()


if __name__ == "__main__":
    main()
