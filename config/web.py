"""`floodgate-web --host H --port P [--workers N]`: serve config.asgi:application in production.

uvicorn with uvloop and httptools, one worker process per core: on a 2-core machine a bare
ASGI callable answers about 9x faster than under one daphne process (README, "Which
server"), and the edge's cheap "no" can go no faster than the server around it. WebSockets
(Channels over the Redis layer) run on the `websockets` package (sans-I/O API). Each worker is a whole
process with its own edge, snapshot subscriber and channel-layer connection, so nothing is
shared between workers but the listening socket.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

APP = "config.asgi:application"
CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


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
        "--access-log", action="store_true", help="log every request (the proxy in front usually does)"
    )
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import uvicorn

    uvicorn.run(
        APP,
        host=args.host,
        port=args.port,
        workers=args.workers,
        loop="uvloop",
        http="httptools",
        ws="websockets-sansio",  # the websockets package's current API, not its deprecated legacy one
        # Django's handler has no lifespan; "auto" would log its refusal at every start.
        lifespan="off",
        # The app reads X-Forwarded-* itself (TRUST_X_FORWARDED_FOR, SECURE_PROXY_SSL_HEADER),
        # as under daphne: uvicorn must not rewrite the client address or scheme first.
        proxy_headers=False,
        server_header=False,
        access_log=args.access_log,
        # Waiting-room pages keep sockets open for minutes; the client reconnects on its own,
        # but a server ping finds dead peers so their sockets do not pile up.
        ws_ping_interval=20,
        ws_ping_timeout=20,
        timeout_graceful_shutdown=10,
    )


if __name__ == "__main__":
    main()
