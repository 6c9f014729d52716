"""Discount codes: a percentage or an amount off a hold's line, spent by the hold that uses it.

A use is spent by one conditional UPDATE in the hold's own transaction (holds.sql.SPEND_DISCOUNT_CODE:
uses < max_uses, the drop's or the shop's, inside its window), either the claim's (a code sent with
the reserve: a refused code refuses the claim, nothing is held) or the hold page's (a code entered on
a held hold before its payment starts: a refused code leaves the hold as it was). The statements that
release or expire a hold unpaid give its use back (holds.sql.UNSPEND_DISCOUNTS); a sold hold keeps it.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.utils.translation import gettext_lazy

from core.errors import (
    DiscountCodeExpired,
    DiscountCodeNotForDrop,
    DiscountCodeNotYet,
    DiscountCodeUsed,
    DiscountNotApplicable,
    InvalidDiscountCode,
    InvalidInput,
    fill,
)
from holds import sql
from holds.models import DISCOUNT_CODE_MAX, DiscountCode, Hold
from shop.models import Drop

ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # as presale codes: no 0/O, 1/I/L to misread
GENERATED_LENGTH = 10
GENERATE_MAX = 10_000
USES_MAX = 1_000_000
AMOUNT_MAX = 100_000_000
CODE_SHAPE = re.compile(rf"[A-Za-z0-9]{{1,{DISCOUNT_CODE_MAX}}}")


def code_of(value: object) -> str | None:
    """The discount code of a request, upper-case; None when none was sent (absent, null, empty).
    Anything that cannot be a code is refused as an unknown one, before anything is written."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not CODE_SHAPE.fullmatch(value.strip()):
        raise InvalidDiscountCode(
            fill(
                gettext_lazy("A discount code is 1-%(most)s letters and digits, as it was given to you."),
                most=DISCOUNT_CODE_MAX,
            )
        )
    return value.strip().upper()


def spend(cursor: CursorWrapper, *, drop: Drop, hold_id: int, code: str) -> DiscountCode:
    """Spend one use of `code` on `hold_id` (a hold of this transaction) and return the code as
    spent; raises the refusal, and the caller's transaction rolls back with it."""
    assert connection.in_atomic_block, "a code is spent in the hold's own transaction"
    ids: dict[str, int | str] = {"drop": drop.pk, "code": code, "hold": hold_id}
    cursor.execute(sql.SPEND_DISCOUNT_CODE, ids)
    row = cursor.fetchone()
    if row is not None:
        return DiscountCode(pk=row[0], code=code, percent=row[1], amount_minor=row[2], currency=row[3])
    cursor.execute(sql.DISCOUNT_CODE_STATE, ids)
    state = cursor.fetchone()
    if state is None:
        raise InvalidDiscountCode(gettext_lazy("There is no such discount code; check it and try again."))
    code_drop, used_up, not_yet, over, other_currency = state
    if (code_drop is not None and code_drop != drop.pk) or other_currency:
        raise DiscountCodeNotForDrop(gettext_lazy("This discount code is not valid for this drop."))
    if not_yet:
        raise DiscountCodeNotYet(gettext_lazy("This discount code is not valid yet."))
    if over:
        raise DiscountCodeExpired(gettext_lazy("This discount code has expired."))
    if used_up:
        raise DiscountCodeUsed(gettext_lazy("This discount code has already been used."))
    # Its row changed between the two statements (a use given back): the buyer may simply try again.
    raise DiscountCodeUsed(gettext_lazy("This discount code has already been used."))


def apply_code(*, hold: Hold, buyer_id: int, code: object) -> DiscountCode:
    """A code entered for a held hold whose payment has not started: spend a use on it. A refusal
    changes nothing (the hold stays as it was, without a discount)."""
    checked = code_of(code)
    if checked is None:
        raise InvalidDiscountCode(gettext_lazy("Enter a discount code."))
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        cursor.execute(sql.LOCK_HOLD_FOR_DISCOUNT, {"drop": hold.drop_id, "hold": hold.pk, "buyer": buyer_id})
        if cursor.fetchone() is None:
            raise DiscountNotApplicable(
                gettext_lazy(
                    "This hold cannot take a discount code now: it has one, its payment has started, "
                    "or it has ended."
                )
            )
        return spend(cursor, drop=hold.drop, hold_id=hold.pk, code=checked)


# The merchant's side (the admin, the discount_codes command) -----------------------------------


@dataclass(frozen=True)
class Terms:
    """What a batch of new codes gives: exactly one of percent and amount_minor."""

    percent: int | None = None
    amount_minor: int | None = None
    max_uses: int = 1
    starts_at: datetime | None = None
    ends_at: datetime | None = None


def _whole(value: object, low: int, high: int) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and low <= value <= high


def generate_codes(*, drop: Drop | None, count: int, terms: Terms, currency: str = "") -> list[DiscountCode]:
    """Make `count` new random codes for `drop` (None: every drop of the shop). An amount off is in
    the drop's currency, or for the shop in `currency`. InvalidInput says what is wrong."""
    if not _whole(count, 1, GENERATE_MAX):
        raise InvalidInput(
            fill(gettext_lazy("Make between 1 and %(most)s codes at a time."), most=GENERATE_MAX)
        )
    if (terms.percent is None) == (terms.amount_minor is None):
        raise InvalidInput(gettext_lazy("Give either a percentage or an amount off, not both."))
    if terms.percent is not None and not _whole(terms.percent, 1, 99):
        raise InvalidInput(gettext_lazy("A percentage off is a whole number from 1 to 99."))
    if terms.amount_minor is not None and not _whole(terms.amount_minor, 1, AMOUNT_MAX):
        raise InvalidInput(
            fill(gettext_lazy("An amount off is from 1 to %(most)s minor units."), most=AMOUNT_MAX)
        )
    if not _whole(terms.max_uses, 1, USES_MAX):
        raise InvalidInput(fill(gettext_lazy("Each code is usable 1 to %(most)s times."), most=USES_MAX))
    if terms.starts_at and terms.ends_at and terms.starts_at >= terms.ends_at:
        raise InvalidInput(gettext_lazy("A code's start must be before its end."))
    if terms.amount_minor is None:
        currency = ""
    elif drop is not None:
        currency = drop.product.currency
    elif not re.fullmatch(r"[A-Z]{3}", currency or ""):
        raise InvalidInput(gettext_lazy("A shop-wide amount off needs its currency, e.g. EUR."))
    with transaction.atomic():
        fresh: set[str] = set()
        while len(fresh) < count:
            wanted = count - len(fresh)
            drawn = {
                "".join(secrets.choice(ALPHABET) for _ in range(GENERATED_LENGTH)) for _ in range(wanted)
            }
            taken = set(DiscountCode.objects.filter(code__in=list(drawn)).values_list("code", flat=True))
            fresh |= drawn - taken
        made = [
            DiscountCode(
                code=code,
                drop=drop,
                percent=terms.percent,
                amount_minor=terms.amount_minor,
                currency=currency,
                max_uses=terms.max_uses,
                starts_at=terms.starts_at,
                ends_at=terms.ends_at,
            )
            for code in sorted(fresh)
        ]
        return DiscountCode.objects.bulk_create(made)
