"""Run callables on many threads at once, each thread with its own database connection."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

from django.db import connections

T = TypeVar("T")


def run_concurrently(jobs: Sequence[Callable[[], T]], *, threads: int) -> list[T | BaseException]:
    """Run every job on a pool of `threads` threads released together; results in job order."""
    results: list[T | BaseException] = [RuntimeError("not run")] * len(jobs)
    next_job = iter(range(len(jobs)))
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def worker() -> None:
        start.wait()
        try:
            while True:
                with lock:
                    index = next(next_job, None)
                if index is None:
                    return
                try:
                    results[index] = jobs[index]()
                except BaseException as error:  # collected for the test to inspect
                    results[index] = error
        finally:
            connections.close_all()

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return results
