"""Proof of work for a place in line: a cost per join a person does not notice and a bot farm does.

Each account gets a challenge for each drop (an HMAC of both, so the server keeps no state and one
solution opens one place); a join must carry a nonce whose sha256("<challenge>:<nonce>") starts
with the drop's `join_work_bits` zero bits. Checking it is one hash; finding it is about
2**bits hashes (the waiting-room page does it in a Web Worker, static/js/work.js).
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import re

from django.conf import settings

from core.errors import ProofRequired
from shop.models import Drop

NONCE = re.compile(r"[0-9a-z]{1,32}")


def challenge(*, drop_id: int, buyer_id: int) -> str:
    message = f"join-work:{drop_id}:{buyer_id}".encode()
    return hmac.new(settings.SECRET_KEY.encode(), message, hashlib.sha256).hexdigest()[:32]


def leading_zero_bits(digest: bytes) -> int:
    bits = 0
    for byte in digest:
        if byte:
            return bits + 8 - byte.bit_length()
        bits += 8
    return bits


def solves(challenge_: str, nonce: str | None, bits: int) -> bool:
    if not nonce or not NONCE.fullmatch(nonce):
        return False
    return leading_zero_bits(hashlib.sha256(f"{challenge_}:{nonce}".encode()).digest()) >= bits


def check(*, drop: Drop, buyer_id: int, proof: str | None) -> None:
    """Raise 428 with the challenge unless the drop asks no work or the proof solves it."""
    bits = drop.join_work_bits
    if not bits:
        return
    asked = challenge(drop_id=drop.pk, buyer_id=buyer_id)
    if not solves(asked, proof, bits):
        raise ProofRequired(
            "Joining this waiting room needs a small proof of work: find a nonce whose "
            f"sha256('{asked}:<nonce>') starts with {bits} zero bits, and send it as X-Join-Proof. "
            "The waiting-room page does this for you.",
            challenge=asked,
            bits=bits,
        )


def solve(challenge_: str, bits: int) -> str:
    """What a client does (tests and the bench): count up until a nonce solves it."""
    for n in itertools.count():
        nonce = format(n, "x")
        if solves(challenge_, nonce, bits):
            return nonce
    raise AssertionError("unreachable")
