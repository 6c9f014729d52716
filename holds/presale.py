"""Presale admission: a code spent by the claim that uses it, or a place on the drop's list.

In a drop's presale window (Drop.presale_starts_at until starts_at) a claim needs one of the two;
the claim statement itself checks the window (shop.sql.ON_SALE), and the code is spent in the
claim's own transaction, so a claim that fails (sold out, over the limit) gives its use back
with the rollback, and a code's uses can never pass its max_uses. A hold that ends unpaid
(released, expired) gives its use back too (holds.sql.UNSPEND_CODES), as a discount code's.
"""

from __future__ import annotations

import csv
import io
import re
import secrets
from collections.abc import Iterable

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.utils.translation import gettext_lazy

from core.errors import InvalidInput, InvalidPresaleCode, NotStarted, PresaleCodeUsed, fill
from holds import sql
from holds.models import PRESALE_CODE_MAX, PresaleCode, PresaleListEntry
from shop.models import Drop

# No 0/O, 1/I/L: a code is read off a screen or paper and typed in.
ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
GENERATED_LENGTH = 10  # 31**10: guessing one of a drop's codes is hopeless at any rate limit
GENERATE_MAX = 10_000  # codes in one go
USES_MAX = 1_000_000
CODE_SHAPE = re.compile(rf"[A-Za-z0-9]{{1,{PRESALE_CODE_MAX}}}")
CODE_HELP = fill(
    gettext_lazy("A presale code is 1-%(most)s letters and digits, as it was given to you."),
    most=PRESALE_CODE_MAX,
)


def code_of(value: object) -> str | None:
    """The presale code of a request body, upper-case; None when none was sent (absent, null or
    empty). Anything that cannot be a code (not a string, too long, other characters) is refused
    as an unknown code is: InvalidPresaleCode, before anything is written."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not CODE_SHAPE.fullmatch(value.strip()):
        raise InvalidPresaleCode(CODE_HELP)
    return value.strip().upper()


def refused_before_start(drop: Drop) -> NotStarted:
    """The answer to a claim in the presale window with neither a valid code nor a place on the list."""
    return NotStarted(
        fill(
            gettext_lazy(
                "This drop's presale is on: reserve with a presale code, or from an account on its "
                "list. Everyone can reserve from %(starts_at)s UTC."
            ),
            starts_at=format(drop.starts_at, "%H:%M:%S"),
        ),
        starts_at=drop.starts_at.isoformat(),
    )


def admit(cursor: CursorWrapper, *, drop: Drop, hold_id: int, buyer_id: int, code: str | None) -> int | None:
    """Admit the claim of `hold_id` (inserted by this transaction) to the drop's presale: spend
    one use of `code`, or without one find the buyer on the list. Returns the code's id (None: the
    list). Raises InvalidPresaleCode, PresaleCodeUsed, or NotStarted (not on the list); the caller
    rolls back with it."""
    assert connection.in_atomic_block, "a code is spent in the claim's own transaction"
    ids = {"drop": drop.pk, "code": code, "hold": hold_id, "buyer": buyer_id}
    if code is None:
        cursor.execute(sql.ON_PRESALE_LIST, ids)
        if cursor.fetchone() is None:
            raise refused_before_start(drop)
        return None
    cursor.execute(sql.SPEND_PRESALE_CODE, ids)
    row = cursor.fetchone()
    if row is not None:
        return int(row[0])
    cursor.execute(sql.PRESALE_CODE_USES, ids)
    if cursor.fetchone() is None:
        raise InvalidPresaleCode(
            gettext_lazy("This presale code is not valid for this drop; check it and try again.")
        )
    raise PresaleCodeUsed(gettext_lazy("This presale code has already been used."))


# The merchant's side (the admin, create_drop) ------------------------------------------------


def generate_codes(*, drop: Drop, count: int, max_uses: int = 1) -> list[PresaleCode]:
    """Make `count` new random codes for the drop, each admitting `max_uses` claims."""
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= GENERATE_MAX:
        raise InvalidInput(
            fill(
                gettext_lazy("Generate between 1 and %(generate_max)s codes at a time."),
                generate_max=GENERATE_MAX,
            )
        )
    if isinstance(max_uses, bool) or not isinstance(max_uses, int) or not 1 <= max_uses <= USES_MAX:
        raise InvalidInput(
            fill(gettext_lazy("Each code admits between 1 and %(uses_max)s claims."), uses_max=USES_MAX)
        )
    with transaction.atomic():
        taken = set(PresaleCode.objects.filter(drop=drop).values_list("code", flat=True))
        fresh: set[str] = set()
        while len(fresh) < count:
            code = "".join(secrets.choice(ALPHABET) for _ in range(GENERATED_LENGTH))
            if code not in taken:
                fresh.add(code)
        made = [PresaleCode(drop=drop, code=code, max_uses=max_uses) for code in sorted(fresh)]
        return PresaleCode.objects.bulk_create(made)


def codes_csv(*, drop: Drop) -> str:
    """The drop's codes as CSV: code, max_uses, uses (a header line first)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["code", "max_uses", "uses"])
    for code, max_uses, uses in PresaleCode.objects.filter(drop=drop).values_list("code", "max_uses", "uses"):
        writer.writerow([code, max_uses, uses])
    return out.getvalue()


LIST_MAX = 100_000


def addresses_in(text: str) -> list[str]:
    """The e-mail addresses of a pasted list or CSV (one per line, or separated by commas,
    semicolons or spaces), lower-case, in order, each once. InvalidInput names the first bad one."""
    found: dict[str, None] = {}
    for raw in re.split(r"[\s,;]+", text):
        address = raw.strip().strip('"').lower()
        if not address or address == "email":  # a CSV's header
            continue
        try:
            validate_email(address)
        except ValidationError:
            raise InvalidInput(
                fill(
                    gettext_lazy("%(value)s is not an e-mail address; nothing was added."),
                    value=repr(raw[:80]),
                )
            ) from None
        found[address] = None
    if len(found) > LIST_MAX:
        raise InvalidInput(fill(gettext_lazy("At most %(list_max)s addresses at a time."), list_max=LIST_MAX))
    return list(found)


def add_to_list(*, drop: Drop, emails: Iterable[str]) -> int:
    """Put the addresses on the drop's presale list (those already on it stay once); returns how
    many were new."""
    rows = [PresaleListEntry(drop=drop, email=email.lower()) for email in emails]
    with transaction.atomic():
        before = PresaleListEntry.objects.filter(drop=drop).count()
        PresaleListEntry.objects.bulk_create(rows, ignore_conflicts=True, batch_size=5000)
        return PresaleListEntry.objects.filter(drop=drop).count() - before
