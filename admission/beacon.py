"""Public randomness for the draw: a drand round named before the first join, read after the list closes.

drand (the League of Entropy's beacon) publishes one BLS-signed value per round at a fixed
period; nobody, the shop included, knows a round's signature before its time. A queue names,
when it is created, the chain and the first round due after the entry list will close (the
start, plus a margin); the draw reads that round, checks its signature against the chain's
public key (drand-verify) and mixes sha256(signature), the round's randomness, into the order
(admission/draw.py). Where no relay answers, the draw records why and falls back to the
committed seed alone; it never takes a value it could not verify.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import drand_verify
import httpx

# The entry list closes before the start (the drop's line_close_seconds); the round named is due
# at least this long after that moment, so its hash is published before the round's value exists,
# even when the tick that closes it comes a second late.
CLOSE_MARGIN = timedelta(seconds=2)
# A close later than this before the named round's time names a later round (drawing.close_entries):
# relays publish a round at its time, a clock may run a little ahead.
LATE_GUARD = timedelta(seconds=0.5)
# A relay that answers "not yet" (its clock, or the network's) is asked again until this long
# after the round's time; then the draw gives up on it.
PATIENCE = timedelta(seconds=30)
# Any other failure (refused, timed out, a 5xx, a signature that does not verify) is asked again,
# every tick and of every relay, until this long after the round's time: one blip at the due time
# must not turn a draw into a seed-only one.
RETRY_FOR = timedelta(seconds=4)
FETCH_TIMEOUT = 2.0


@dataclass(frozen=True)
class Chain:
    """A drand network's fixed facts (its /info), as its operators publish them."""

    name: str
    hash: str
    public_key: str
    genesis: int  # unix seconds of round 1
    period: int  # seconds between rounds
    scheme: str

    def round_at(self, moment: datetime) -> int:
        """The first round whose time is at or after `moment`."""
        return max(1, math.ceil((moment.timestamp() - self.genesis) / self.period) + 1)

    def time_of(self, number: int) -> datetime:
        return datetime.fromtimestamp(self.genesis + (number - 1) * self.period, tz=UTC)


# The League of Entropy's two mainnet chains (https://api.drand.sh/<hash>/info).
QUICKNET = Chain(
    name="quicknet",
    hash="52db9ba70e0cc0f6eaf7803dd07447a1f5477735fd3f661792ba94600c84e971",
    public_key=(
        "83cf0f2896adee7eb8b5f01fcad3912212c437e0073e911fb90022d3e760183c8c4b450b6a0a6c3ac6a5776a2d1064510d"
        "1fec758c921cc22b0e17e63aaf4bcb5ed66304de9cf809bd274ca73bab4af5a6e9c76a4bc09e76eae8991ef5ece45a"
    ),
    genesis=1692803367,
    period=3,
    scheme="bls-unchained-g1-rfc9380",
)
MAINNET = Chain(
    name="mainnet",
    hash="8990e7a9aaed2ffed73dbd7092123d6f289930540d7651336225dc172e51b2ce",
    public_key="868f005eb8e6e4ca0a47c8a77ceaa5309a47978a7c71bc5cce96366b5d7a569937c529eeda66c7293784a9402801af31",
    genesis=1595431050,
    period=30,
    scheme="pedersen-bls-chained",
)
CHAINS = {chain.name: chain for chain in (QUICKNET, MAINNET)}
BY_HASH = {chain.hash: chain for chain in (QUICKNET, MAINNET)}


@dataclass(frozen=True)
class Round:
    """One round as a relay served it: what the draw keeps and publishes."""

    number: int
    signature: str
    previous_signature: str = ""  # chained schemes (mainnet) sign over the previous round's signature


class BadRound(ValueError):
    """The round's signature does not verify against the chain's public key."""


class NotReached(Exception):
    """No relay gave the round: why, in words, for the draw's page."""

    def __init__(self, reason: str, *, not_yet: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.not_yet = not_yet  # a relay said the round does not exist yet


def randomness(chain: Chain, drawn: Round) -> str:
    """The round's randomness, sha256(signature), once its signature verifies; BadRound otherwise."""
    try:
        if chain.scheme == "bls-unchained-g1-rfc9380":
            value = drand_verify.verify_quicknet(drawn.number, drawn.signature, chain.public_key)
        else:
            value = drand_verify.verify_mainnet(
                drawn.number, drawn.previous_signature, drawn.signature, chain.public_key
            )
    except (ValueError, TypeError, OverflowError) as error:  # the library's answer to a bad signature
        raise BadRound(
            f"round {drawn.number}'s signature does not verify against {chain.name}'s key"
        ) from error
    return str(value)


def fetch(chain: Chain, number: int, *, relays: list[str]) -> Round:
    """Round `number` from the first relay that serves it, verified; NotReached if none does."""
    reasons: list[str] = []
    not_yet = False
    for relay in relays:
        url = f"{relay.rstrip('/')}/{chain.hash}/public/{number}"
        try:
            answer = httpx.get(url, timeout=FETCH_TIMEOUT, follow_redirects=False)
        except httpx.HTTPError as error:
            reasons.append(f"{relay}: {type(error).__name__}: {error}"[:200])
            continue
        if answer.status_code in (404, 425):
            not_yet = True
            reasons.append(f"{relay}: round {number} not published yet ({answer.status_code})")
            continue
        drawn = _parsed(answer, number)
        if drawn is None:
            reasons.append(f"{relay}: answered {answer.status_code} without round {number}")
            continue
        try:
            randomness(chain, drawn)
        except BadRound as error:
            reasons.append(f"{relay}: {error}")
            continue
        return drawn
    raise NotReached("; ".join(reasons) or "no relay configured (DRAW_BEACON_URLS)", not_yet=not_yet)


def _parsed(answer: httpx.Response, number: int) -> Round | None:
    if answer.status_code != 200:
        return None
    try:
        body = answer.json()
    except ValueError:
        return None
    if not isinstance(body, dict) or body.get("round") != number:
        return None
    signature, previous = body.get("signature"), body.get("previous_signature", "")
    if not isinstance(signature, str) or not isinstance(previous, str):
        return None
    return Round(number=number, signature=signature[:400], previous_signature=previous[:400])
