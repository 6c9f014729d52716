"""500 buyers, 100 single-use presale codes, all at once: each code admits exactly one claim.

Five buyers share each code and run side by side, each on its own connection, through the real
reserve service in the drop's presale window. The control swaps the conditional spend for a
read-then-write one and shows the harness catches the double spend it allows.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.db.backends.utils import CursorWrapper
from django.db.models import Count
from django.utils import timezone

from core.errors import FloodgateError, PresaleCodeUsed
from holds import presale, services
from holds.counts import invariant
from holds.models import Hold, PresaleCode
from shop.models import Drop
from tests.concurrency import run_concurrently
from tests.factories import make_drop

pytestmark = pytest.mark.django_db(transaction=True)

BUYERS = 500
CODES = 100
SHARING = BUYERS // CODES  # buyers holding the same code
THREADS = 32


def presale_drop() -> Drop:
    now = timezone.now()
    return make_drop(
        quantity=BUYERS + 100,  # stock is never what stops a claim: only the codes are
        buckets=8,
        per_buyer_limit=1,
        starts_at=now + timedelta(hours=1),
        presale_starts_at=now - timedelta(minutes=1),
    )


def rush(drop: Drop, buyers: list[int], codes: list[str]) -> Counter[str]:
    """Every buyer claims one unit with their code (the same code's buyers side by side in the
    job order, so they run at once); the answers counted by outcome."""

    def attempt(buyer: int, code: str) -> str:
        try:
            services.reserve(
                drop=drop, buyer_id=buyer, quantity=1, idempotency_key=uuid.uuid4().hex, presale_code=code
            )
        except FloodgateError as error:
            return error.code
        return "held"

    jobs = [lambda b=b, c=codes[i // SHARING]: attempt(b, c) for i, b in enumerate(buyers)]
    results = run_concurrently(jobs, threads=THREADS)
    return Counter(r if isinstance(r, str) else repr(r) for r in results)


def naive_admit(gathering: dict[int, threading.Barrier]):
    """The read-then-write spend (django-oscar#2101's shape), kept here only as the control: read
    the uses, decide in Python, write the number read plus one. Each code's buyers meet at a
    barrier between the read and the write, so they all read the same count."""

    def admit(cursor: CursorWrapper, *, drop: Drop, hold_id: int, buyer_id: int, code: str | None) -> int:
        cursor.execute(
            "SELECT id, uses, max_uses FROM holds_presalecode WHERE drop_id = %s AND code = %s",
            [drop.pk, code],
        )
        code_id, uses, max_uses = cursor.fetchone()
        if uses >= max_uses:
            raise PresaleCodeUsed("used")
        with contextlib.suppress(threading.BrokenBarrierError):  # a straggler: write anyway
            gathering[code_id].wait(timeout=5)
        cursor.execute("UPDATE holds_presalecode SET uses = %s WHERE id = %s", [uses + 1, code_id])
        cursor.execute("UPDATE holds_hold SET presale_code_id = %s WHERE id = %s", [code_id, hold_id])
        return int(code_id)

    return admit


def spent_twice(drop: Drop) -> list[int]:
    """Codes that more than one hold carries."""
    per_code = Hold.objects.filter(drop=drop, presale_code__isnull=False).values("presale_code")
    return [row["presale_code"] for row in per_code.annotate(n=Count("id")).filter(n__gt=1)]


def test_control_a_read_then_write_spend_admits_one_code_twice(make_buyers, monkeypatch) -> None:
    # given the race below, with the conditional spend swapped for a read-then-write one
    drop = presale_drop()
    made = presale.generate_codes(drop=drop, count=CODES)
    buyers = make_buyers(BUYERS)
    monkeypatch.setattr(presale, "admit", naive_admit({c.pk: threading.Barrier(SHARING) for c in made}))

    # when the crowd runs it
    outcomes = rush(drop, buyers, [c.code for c in made])

    # then some code admitted more claims than it may: the harness sees a double spend
    assert outcomes["held"] > CODES, outcomes
    assert spent_twice(drop)
    assert PresaleCode.objects.filter(drop=drop, uses=1).count() == CODES  # and the counter hid it


def test_five_hundred_buyers_with_a_hundred_single_use_codes_make_exactly_a_hundred_holds(
    make_buyers,
) -> None:
    # given a drop in its presale window, 100 single-use codes, five buyers per code
    drop = presale_drop()
    made = presale.generate_codes(drop=drop, count=CODES)
    buyers = make_buyers(BUYERS)

    # when all of them claim at once
    outcomes = rush(drop, buyers, [c.code for c in made])

    # then each code admitted one claim, and the other four heard it was used
    assert outcomes == {"held": CODES, "code_used": BUYERS - CODES}, outcomes
    holds = Hold.objects.filter(drop=drop)
    assert holds.count() == CODES
    assert holds.filter(presale_code__isnull=False).values("presale_code").distinct().count() == CODES
    assert spent_twice(drop) == []
    assert set(PresaleCode.objects.filter(drop=drop).values_list("uses", flat=True)) == {1}
    numbers = invariant(drop_id=drop.pk)
    assert (numbers.held, numbers.drift) == (CODES, 0)
    assert connection.vendor == "postgresql"
