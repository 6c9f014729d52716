"""The draw's rule, and its check: pure functions, the same in Python, the verify page and the command.

The order of the early joiners is fixed by three published values, none of which the shop
alone controls after the fact:

- the seed, whose SHA-256 is published when the queue is created (before any join);
- the SHA-256 of the closed entry list (the entries, ascending, joined by ","), published when
  the list closes at the start;
- the randomness of a drand round named when the queue was created and due after the list
  closes: sha256 of the round's BLS signature, which the chain's public key verifies
  (admission/beacon.py). '' where no round was named, or none could be read (then the draw says
  why: the order rests on the seed alone).

Each entry's key is SHA-256 of "<seed>:<entries_sha256>:<beacon>:<entry>"; entries sorted by
their key's bytes get places 1, 2, 3, ... (static/js/verify.js computes the same).
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from django.utils.translation import gettext

from admission import beacon as drand

RULE = (
    "entries_sha256 = sha256(','.join(str(e) for e in sorted(entries))); "
    "sort the entries by sha256(f'{seed}:{entries_sha256}:{beacon}:{entry}'), beacon being "
    "sha256(bytes.fromhex(beacon_signature)).hexdigest() of the named drand round, verified against "
    "the chain's public key ('' if no round was named or it could not be read); "
    "the first gets ticket 1"
)


def seed_digest(seed: str) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()


def entries_digest(entries: list[int]) -> str:
    """SHA-256 of the closed entry list: ascending, decimal, comma-separated."""
    return hashlib.sha256(",".join(str(e) for e in sorted(entries)).encode()).hexdigest()


def entry_key(seed: str, entries_sha256: str, beacon: str, entry: int) -> bytes:
    """The key an entry is sorted by: a page that knows its entry computes its own after the draw
    and compares it with the published cut entries' (admission/state.Cuts) before it knows its number."""
    return hashlib.sha256(f"{seed}:{entries_sha256}:{beacon}:{entry}".encode()).digest()


def draw_order(seed: str, entries: list[int], *, beacon: str = "") -> list[int]:
    """Early joiners' entry numbers in their drawn order (the first gets ticket 1)."""
    listed = entries_digest(entries)
    return sorted(entries, key=lambda entry: entry_key(seed, listed, beacon, entry))


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
        problems.append("the entry list does not hash to the entries_sha256 published at the close")
    problems += _beacon_problems(body, beacon)
    if isinstance(order, list) and [int(e) for e in order] != draw_order(seed, numbers, beacon=beacon):
        problems.append("the places given (order) are not the order the rule gives")
    return problems


def _beacon_problems(body: dict[str, object], beacon: str) -> list[str]:
    """The round's signature against the chain's own public key (ours, by its hash: not the one the
    JSON names), its randomness against `beacon`, and its time against the list's close."""
    status, number = body.get("beacon_status"), body.get("beacon_round")
    if status in (None, "none"):
        return [] if not beacon else ["a beacon value is mixed in, but no beacon round was named"]
    chain = drand.BY_HASH.get(str(body.get("beacon_chain")))
    if chain is None or not isinstance(number, int):
        return ["the beacon round or its chain is missing, or the chain is not a known drand chain"]
    problems = []
    if str(body.get("beacon_public_key", chain.public_key)) != chain.public_key:
        problems.append(f"the public key given is not {chain.name}'s")
    closed = _moment(body.get("entries_closed_at"))
    if closed is None or closed >= chain.time_of(number):
        problems.append(f"the entry list did not close before round {number} was due")
    if status == "unreachable":
        return problems + ([] if not beacon else ["the round was not read, yet a beacon value is mixed in"])
    if status != "verified":
        return [*problems, f"the draw ran with its beacon {status}"]
    signed = drand.Round(
        number=number,
        signature=str(body.get("beacon_signature") or ""),
        previous_signature=str(body.get("beacon_previous_signature") or ""),
    )
    try:
        value = drand.randomness(chain, signed)
    except drand.BadRound:
        return [*problems, f"round {number}'s signature does not verify against {chain.name}'s public key"]
    if value != beacon:
        problems.append(f"the beacon mixed in is not round {number}'s randomness (sha256 of its signature)")
    return problems


def notes(body: dict[str, object]) -> list[str]:
    """What a checker should know that is not a mismatch: a draw that fell back to the seed alone."""
    if body.get("beacon_status") == "unreachable":
        return [
            f"the beacon round {body.get('beacon_round')} could not be read at the draw "
            f"({body.get('beacon_note') or 'no reason given'}): the order rests on the committed seed "
            "and the entry list alone, which the shop knew before the start"
        ]
    if body.get("beacon_status") in (None, "none"):
        return ["no beacon round was named: the order rests on the committed seed and the entry list alone"]
    return []


def unsteerable(body: dict[str, object]) -> bool:
    """Whether the published draw is tied to a verified drand round: only then could nobody, the shop
    included, choose the order (docs/FAIRNESS.md). A draw on the seed alone is not, however well it
    checks out: the shop knew the seed and could add entries until an order it liked came out."""
    return body.get("drawn") is True and body.get("beacon_status") == "verified"


def trust(body: dict[str, object]) -> str:
    """What a buyer must trust about this draw, in the buyer's words (the page, the JSON, verify_draw)."""
    status, number = body.get("beacon_status"), body.get("beacon_round")
    if status == "verified":
        return gettext(
            "The order was drawn with public randomness (drand round %(round)s) that did not exist until "
            "after the entry list was closed and published: nobody, the shop included, could choose who "
            "comes first."
        ) % {"round": number}
    if status == "waiting":
        return gettext(
            "Not drawn yet. The order will be drawn with public randomness (drand round %(round)s) that "
            "nobody, the shop included, knows before the entry list closes."
        ) % {"round": number}
    return gettext(
        "No public random round was used: the order was drawn on the shop's own secret number and the "
        "entry list alone. The shop knew that number before the start, so it could have added made-up "
        "entries until an order it liked came out, and this draw cannot show that it did not. Here you "
        "have to trust the shop."
    )


def _moment(value: object) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None
