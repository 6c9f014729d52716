"""What the edge's parts share off the hot path: its own threads for the few database reads it
makes, and warnings that do not repeat per request."""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor

from django.db import connections

log = logging.getLogger("admission.edge")

# The few database reads the edge makes itself (a stale snapshot recomputed, a socket's drop with
# no snapshot looked up, a bearer poll's ticket) run here: never on the one thread Django's sync
# work shares, where a crowd's handshakes would queue behind each other and behind every view.
DB_THREADS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="admission-edge-db")


def close_connections() -> None:
    """Give this edge thread's database connection back to the pool (after each read)."""
    connections.close_all()


class Trouble:
    """Logs at most every ten seconds: under a crowd the same trouble repeats per request."""

    def __init__(self) -> None:
        self._warned = -float("inf")

    def __call__(self, message: str, *args: object, exc_info: bool = False) -> None:
        now = time.monotonic()
        if now - self._warned >= 10:
            self._warned = now
            log.warning("admission edge: " + message, *args, exc_info=exc_info)
