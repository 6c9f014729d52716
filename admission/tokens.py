"""Admission tokens: a signed, short-lived "this buyer may claim in this drop now"; and queue tickets.

Both are checked with the secret key alone: no database, no Redis.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import TypeGuard

from django.conf import settings
from django.core import signing
from django.utils.translation import gettext_lazy

from core.errors import NotAdmitted

SALT = "floodgate.admission"


def issue(*, drop_id: int, buyer_id: int, ticket: int) -> str:
    return signing.TimestampSigner(salt=SALT).sign_object({"d": drop_id, "b": buyer_id, "t": ticket})


def claims(token: str | None, *, drop_id: int) -> dict[str, int]:
    """The token's claims if it is genuine, fresh and for this drop (the buyer is checked by `verify`)."""
    if not token:
        raise NotAdmitted(
            gettext_lazy("You have not been admitted yet: join the waiting room and wait for your turn."),
            queue=True,
        )
    try:
        found = signing.TimestampSigner(salt=SALT).unsign_object(
            token, max_age=settings.ADMISSION_TOKEN_SECONDS
        )
    except signing.SignatureExpired:
        raise NotAdmitted(
            gettext_lazy(
                "Your admission has expired; open the waiting room again for a fresh one "
                "(you keep your place)."
            ),
            queue=True,
        ) from None
    except (signing.BadSignature, ValueError, UnicodeDecodeError):
        raise NotAdmitted(gettext_lazy("That admission token is not valid."), queue=True) from None
    if not isinstance(found, dict) or found.get("d") != drop_id:
        raise NotAdmitted(gettext_lazy("That admission token is for another drop."), queue=True)
    return found


def verify(token: str | None, *, drop_id: int, buyer_id: int) -> int:
    """The admitted ticket number; NotAdmitted (403) for a missing, forged, expired or foreign token."""
    found = claims(token, drop_id=drop_id)
    if found.get("b") != buyer_id:
        raise NotAdmitted(gettext_lazy("That admission token belongs to another buyer."), queue=True)
    return int(found["t"])


# Queue tickets -------------------------------------------------------------------------------
#
# A signed "this buyer holds this place in this drop's line", handed out with every answer of
# the queue API (and as a cookie scoped to that path) so the edge can answer a poll without
# Django: the position is the ticket's number against the published mark. It is bound to the
# credential that asked (a hash of the bearer token or of the session key), so another buyer's
# ticket, or one kept after a new login, does not match and the poll goes to Django.

TICKET_SALT = "floodgate.queue-ticket"
TICKET_COOKIE = "fg_queue"
TICKET_HEADER = "X-Queue-Ticket"
MAX_TICKET = 512  # a genuine ticket is ~150 characters; anything longer is not one


def credential(*, bearer: str | None, session_key: str | None) -> str | None:
    """What a ticket is bound to: the bearer token if one was sent (the API prefers it), else the session."""
    if bearer:
        return hashlib.sha256(b"bearer:" + bearer.encode()).hexdigest()[:32]
    if session_key:
        return hashlib.sha256(b"session:" + session_key.encode()).hexdigest()[:32]
    return None


def ticket_cookie(slug: str, value: str) -> SimpleCookie:
    """The ticket as a cookie sent only to this drop's queue API, so the page's polls carry it
    (set by Django's answer and by the edge's when it hands out a ticket with the drawn number)."""
    cookie = SimpleCookie()
    cookie[TICKET_COOKIE] = value
    morsel = cookie[TICKET_COOKIE]
    morsel["max-age"] = settings.QUEUE_TICKET_SECONDS
    morsel["path"] = f"/api/drops/{slug}/queue"
    morsel["httponly"] = True
    morsel["samesite"] = "Lax"
    if settings.SESSION_COOKIE_SECURE:
        morsel["secure"] = True
    return cookie


def issue_ticket(
    *, drop_id: int, buyer_id: int, entry: int, number: int | None, bound_to: str, issued: float | None = None
) -> str:
    """number is None before the draw (the entry has no place yet); `issued` (epoch seconds, now
    unless given) is what a revocation is compared with (admission.state.revoke)."""
    at = round(time.time() if issued is None else issued, 3)
    claims = {"d": drop_id, "b": buyer_id, "e": entry, "t": number, "c": bound_to, "i": at}
    return signing.TimestampSigner(salt=TICKET_SALT).sign_object(claims)


@dataclass(frozen=True, slots=True)
class QueueTicket:
    drop_id: int
    buyer_id: int
    entry: int
    number: int | None
    issued: float = 0.0  # a ticket signed before tickets carried it counts as the oldest


def ticket(value: str | None, *, drop_id: int, bound_to: str | None) -> QueueTicket | None:
    """The ticket if it is genuine, unexpired, this drop's and bound to this credential; else None.

    None means "not sure": the caller lets Django answer, which ignores tickets altogether.
    """
    if not value or not bound_to or len(value) > MAX_TICKET:
        return None
    try:
        found = signing.TimestampSigner(salt=TICKET_SALT).unsign_object(
            value, max_age=settings.QUEUE_TICKET_SECONDS
        )
    except Exception:  # forged, expired, or bytes that do not even decode: all just "not a ticket"
        return None
    if not isinstance(found, dict) or found.get("d") != drop_id or found.get("c") != bound_to:
        return None
    buyer, entry, number = found.get("b"), found.get("e"), found.get("t")
    if not _whole(buyer) or not _whole(entry) or not (number is None or _whole(number)):
        return None
    issued = found.get("i", 0.0)
    if not isinstance(issued, int | float) or isinstance(issued, bool):
        return None
    return QueueTicket(drop_id=drop_id, buyer_id=buyer, entry=entry, number=number, issued=float(issued))


def _whole(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
