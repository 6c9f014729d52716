"""bench work: what the join's proof of work costs a bot and the server (admission/work.py).

    python3 floodgate.py bench work

A bot on this machine solving in Python (hashlib, one core; a C or GPU solver is faster, the
ratio between the rows is what the difficulty buys) against the server's check of one proof.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import timeit


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("FLOODGATE_PROFILE", "dev")
    import django

    django.setup()
    from admission import work

    check = timeit.timeit(
        lambda: work.solves("0123456789abcdef0123456789abcdef", "1f2e3d", 18), number=20_000
    )
    rows = [
        "| bits | bot: seconds per join (median of 5) | bot: joins/s per core | server: check of one proof |",
        "| ---: | ---: | ---: | ---: |",
    ]
    for bits in (0, 12, 16, 18):
        times = []
        for attempt in range(5):
            asked = work.challenge(drop_id=attempt + 1, buyer_id=bits * 100 + attempt)
            began = time.perf_counter()
            work.solve(asked, bits)
            times.append(time.perf_counter() - began)
        median = statistics.median(times)
        rate = "no bound (the join itself is the limit)" if bits == 0 else f"{1 / median:,.0f}"
        rows.append(f"| {bits} | {median:.4f} | {rate} | {check / 20_000 * 1e6:.1f} µs |")
        print(f"bench work: {bits} bits done", file=sys.stderr, flush=True)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
