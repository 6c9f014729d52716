"""The draw's rule, and its check: pure functions, the same in Python, the verify page and the command.

The order of the early joiners is fixed by three published values, none of which the shop
alone controls after the fact:

- the seed, whose SHA-256 is published when the queue is created (before any join);
- the SHA-256 of the closed entry list (the entries, ascending, joined by ","), fixed at the draw;
- an optional public randomness beacon value named by the merchant for the drop.

Each entry's key is SHA-256 of "<seed>:<entries_sha256>:<beacon>:<entry>"; entries sorted by
their key's bytes get places 1, 2, 3, ... (static/js/verify.js computes the same).
"""

from __future__ import annotations

import hashlib

RULE = (
    "entries_sha256 = sha256(','.join(str(e) for e in sorted(entries))); "
    "sort the entries by sha256(f'{seed}:{entries_sha256}:{beacon}:{entry}') (beacon '' if none); "
    "the first gets ticket 1"
)


def seed_digest(seed: str) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()


def entries_digest(entries: list[int]) -> str:
    """SHA-256 of the closed entry list: ascending, decimal, comma-separated."""
    return hashlib.sha256(",".join(str(e) for e in sorted(entries)).encode()).hexdigest()


def draw_order(seed: str, entries: list[int], *, beacon: str = "") -> list[int]:
    """Early joiners' entry numbers in their drawn order (the first gets ticket 1)."""
    listed = entries_digest(entries)
    return sorted(
        entries, key=lambda entry: hashlib.sha256(f"{seed}:{listed}:{beacon}:{entry}".encode()).digest()
    )


def check(body: dict[str, object]) -> list[str]:
    """What does not add up in a published draw (GET /api/drops/<slug>/queue/draw); [] = verified."""
    if body.get("drawn") is not True:
        return ["the draw has not run yet: nothing to check"]
    seed, entries, order = body.get("seed"), body.get("entries"), body.get("order")
    beacon = body.get("beacon") or ""
    if not isinstance(seed, str) or not isinstance(entries, list) or not isinstance(beacon, str):
        return ["the published draw lacks its seed or its entries"]
    numbers = [int(e) for e in entries]
    problems = []
    if seed_digest(seed) != body.get("seed_sha256"):
        problems.append("the seed does not hash to the seed_sha256 committed before the first join")
    if entries_digest(numbers) != body.get("entries_sha256"):
        problems.append("the entry list does not hash to the entries_sha256 published at the draw")
    if isinstance(order, list) and [int(e) for e in order] != draw_order(seed, numbers, beacon=beacon):
        problems.append("the places given (order) are not the order the rule gives")
    return problems
