"""Run callables on many threads at once, each thread with its own database connection."""

from __future__ import annotations

import random
import threading
import time
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


def run_spread(
    jobs: Sequence[Callable[[], T]], *, over: float, threads: int, seed: int
) -> list[T | BaseException]:
    """Run every job at its own random moment in the next `over` seconds; results in job order.

    A race around a deadline needs jobs on both sides of it however slowly the machine starts
    threads: a job that runs when it is picked up lands wherever the scheduler put it.
    """
    rng = random.Random(seed)
    start = time.monotonic()
    moments = [rng.uniform(0, over) for _ in jobs]

    def at(moment: float, job: Callable[[], T]) -> Callable[[], T]:
        def timed() -> T:
            time.sleep(max(0.0, start + moment - time.monotonic()))
            return job()

        return timed

    # in time order, so a thread waiting for a late job never holds back an earlier one
    order = sorted(range(len(jobs)), key=moments.__getitem__)
    results = run_concurrently([at(moments[i], jobs[i]) for i in order], threads=threads)
    by_job: list[T | BaseException] = [RuntimeError("not run")] * len(jobs)
    for position, index in enumerate(order):
        by_job[index] = results[position]
    return by_job
