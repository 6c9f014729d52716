"""Proof of work for a place in line: a cost per join a person does not notice and a bot farm does.

A challenge is issued fresh, once the waiting room is open (ROOM_OPENS before the start): the
drop's expiry (unix seconds, JOIN_WORK_CHALLENGE_SECONDS ahead) and a random server nonce, signed
for this account and drop: "<expires>.<nonce>.<mac>". A join carries it back (X-Join-Challenge)
with a nonce (X-Join-Proof) whose sha256("<challenge>:<nonce>") starts with the drop's
`join_work_bits` zero bits. Nothing can be solved before the challenge exists, an expired one is
refused, and each is spent once (a Redis key until it expires). Checking is one HMAC and one
hash; finding it about 2**bits hashes (the page does it in a Web Worker, static/js/work.js).
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext_lazy
from django_redis import get_redis_connection
from redis.exceptions import RedisError

from admission import tally
from core.errors import Busy, Detail, FloodgateError, ProofRequired, fill
from shop.models import Drop

NONCE = re.compile(r"[0-9a-z]{1,32}")
# "<expires>.<nonce>.<mac>": 36 characters, so "<challenge>:<nonce>" fits one SHA-256 block.
CHALLENGE = re.compile(r"([0-9]{10})\.([0-9a-f]{8})\.([0-9a-f]{16})")
# Challenges are issued from this long before the start (the hour a tick opens the queue in):
# earlier, there is nothing to work on.
ROOM_OPENS = timedelta(hours=1)
SPENT = "fg:work:{drop}:{buyer}:{nonce}"


class RoomNotOpen(FloodgateError):
    code, status = "room_not_open", 409


@dataclass(frozen=True)
class Challenge:
    text: str
    bits: int
    expires_at: datetime


def room_opens_at(drop: Drop) -> datetime:
    return drop.starts_at - ROOM_OPENS


def _mac(drop_id: int, buyer_id: int, expires: int, nonce: str) -> str:
    message = f"join-work:{drop_id}:{buyer_id}:{expires}:{nonce}".encode()
    return hmac.new(settings.SECRET_KEY.encode(), message, hashlib.sha256).hexdigest()[:16]


def issue(*, drop: Drop, buyer_id: int, now: datetime | None = None) -> Challenge:
    """A fresh challenge for this buyer's place in this drop's line; RoomNotOpen before it opens."""
    now = now or timezone.now()
    opens = room_opens_at(drop)
    if now < opens:
        raise RoomNotOpen(
            fill(
                gettext_lazy("This waiting room opens at %(opens)s UTC, an hour before the sale."),
                opens=format(opens, "%Y-%m-%d %H:%M"),
            ),
            opens_at=opens.isoformat(),
        )
    expires = int(now.timestamp()) + settings.JOIN_WORK_CHALLENGE_SECONDS
    nonce = secrets.token_hex(4)
    text = f"{expires}.{nonce}.{_mac(drop.pk, buyer_id, expires, nonce)}"
    return Challenge(text=text, bits=drop.join_work_bits, expires_at=datetime.fromtimestamp(expires, tz=UTC))


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


def check(
    *, drop: Drop, buyer_id: int, challenge: str | None, proof: str | None, now: datetime | None = None
) -> None:
    """Raise 428 with a fresh challenge unless the drop asks no work or the proof solves a live,
    unspent challenge issued to this buyer for this drop. Spends the challenge."""
    bits = drop.join_work_bits
    if not bits:
        return
    now = now or timezone.now()
    parsed = CHALLENGE.fullmatch(challenge or "")
    if parsed is None:
        refuse = _refuse if challenge else _ask  # none yet: asking for its first is no failed proof
        refuse(drop, buyer_id, now, gettext_lazy("Joining this waiting room needs a small proof of work."))
    assert parsed is not None and challenge is not None
    expires, nonce = int(parsed[1]), parsed[2]
    if not hmac.compare_digest(parsed[3], _mac(drop.pk, buyer_id, expires, nonce)):
        _refuse(
            drop, buyer_id, now, gettext_lazy("That challenge was not issued to this account for this drop.")
        )
    if expires <= now.timestamp():
        _refuse(drop, buyer_id, now, gettext_lazy("That challenge has expired; here is a fresh one."))
    if not solves(challenge, proof, bits):
        _refuse(drop, buyer_id, now, gettext_lazy("That nonce does not solve the challenge."))
    if not _spend(drop.pk, buyer_id, nonce, expires):
        _refuse(
            drop, buyer_id, now, gettext_lazy("That challenge has been used already; here is a fresh one.")
        )


def _refuse(drop: Drop, buyer_id: int, now: datetime, why: Detail) -> None:
    """A presented challenge that failed: counted for the drop's report, and a fresh one in a 428."""
    tally.note(drop.slug, tally.PROOF_FAILED)
    _ask(drop, buyer_id, now, why)


def _ask(drop: Drop, buyer_id: int, now: datetime, why: Detail) -> None:
    fresh = issue(drop=drop, buyer_id=buyer_id, now=now)
    raise ProofRequired(
        fill(
            gettext_lazy(
                "%(why)s Find a nonce whose sha256('%(text)s:<nonce>') starts with %(bits)s zero bits "
                "and send it as X-Join-Proof, the challenge as X-Join-Challenge, before "
                "%(expires_at)s UTC. The waiting-room page does this for you."
            ),
            why=why,
            text=fresh.text,
            bits=fresh.bits,
            expires_at=format(fresh.expires_at, "%H:%M:%S"),
        ),
        challenge=fresh.text,
        bits=fresh.bits,
        expires_at=fresh.expires_at.isoformat(),
    )


def _spend(drop_id: int, buyer_id: int, nonce: str, expires: int) -> bool:
    """Mark the challenge used until it expires; False if it was already. Redis away: Busy (the
    join is turned away for a moment rather than let a proof count twice)."""
    try:
        client = get_redis_connection("default")
        key = SPENT.format(drop=drop_id, buyer=buyer_id, nonce=nonce)
        return bool(client.set(key, "1", nx=True, exat=expires + 1))
    except (RedisError, OSError):
        raise Busy(
            gettext_lazy("The waiting room is catching its breath; please try again in a moment.")
        ) from None


def solve(challenge_: str, bits: int) -> str:
    """What a client does (tests and the bench): count up until a nonce solves it."""
    for n in itertools.count():
        nonce = format(n, "x")
        if solves(challenge_, nonce, bits):
            return nonce
    raise AssertionError("unreachable")
