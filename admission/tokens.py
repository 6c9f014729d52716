"""Admission tokens: a signed, short-lived "this buyer may claim in this drop now".

Checked on the reserve path with the secret key alone: no database, no Redis.
"""

from __future__ import annotations

from django.conf import settings
from django.core import signing

from core.errors import NotAdmitted

SALT = "floodgate.admission"


def issue(*, drop_id: int, buyer_id: int, ticket: int) -> str:
    return signing.TimestampSigner(salt=SALT).sign_object({"d": drop_id, "b": buyer_id, "t": ticket})


def claims(token: str | None, *, drop_id: int) -> dict[str, int]:
    """The token's claims if it is genuine, fresh and for this drop (the buyer is checked by `verify`)."""
    if not token:
        raise NotAdmitted(
            "You have not been admitted yet: join the waiting room and wait for your turn.",
            queue=True,
        )
    try:
        found = signing.TimestampSigner(salt=SALT).unsign_object(
            token, max_age=settings.ADMISSION_TOKEN_SECONDS
        )
    except signing.SignatureExpired:
        raise NotAdmitted(
            "Your admission has expired; open the waiting room again for a fresh one (you keep your place).",
            queue=True,
        ) from None
    except (signing.BadSignature, ValueError, UnicodeDecodeError):
        raise NotAdmitted("That admission token is not valid.", queue=True) from None
    if not isinstance(found, dict) or found.get("d") != drop_id:
        raise NotAdmitted("That admission token is for another drop.", queue=True)
    return found


def verify(token: str | None, *, drop_id: int, buyer_id: int) -> int:
    """The admitted ticket number; NotAdmitted (403) for a missing, forged, expired or foreign token."""
    found = claims(token, drop_id=drop_id)
    if found.get("b") != buyer_id:
        raise NotAdmitted("That admission token belongs to another buyer.", queue=True)
    return int(found["t"])
