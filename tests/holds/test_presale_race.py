"""500 buyers, 100 single-use presale codes, all at once: each code admits exactly one claim.

Five buyers share each code and run side by side, each on its own connection, through the real
reserve service in the drop's presale window. The control swaps the conditional spend for a
read-then-write one and shows the harness catches the double spend it allows.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections import Counter
from datetime import timedelta

import psycopg
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
from tests.harness import lock_stock, lock_waits

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


def claim_in_thread(drop: Drop, buyer: int, code: str, outcomes: dict[int, str]) -> threading.Thread:
    """A presale claim on its own thread and connection; its answer lands in outcomes[buyer]."""

    def run() -> None:
        try:
            services.reserve(
                drop=drop, buyer_id=buyer, quantity=1, idempotency_key=uuid.uuid4().hex, presale_code=code
            )
            outcomes[buyer] = "held"
        except FloodgateError as error:
            outcomes[buyer] = error.code
        except Exception as error:  # a deadlock's victim, say: the test shows what it was
            outcomes[buyer] = repr(error)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def wait_for_lock_waits(n: int) -> None:
    deadline = time.monotonic() + 20
    while lock_waits() < n:
        assert time.monotonic() < deadline, f"{lock_waits()} lock waits, expected {n}"
        time.sleep(0.02)


def test_claims_waiting_on_two_codes_and_the_stock_close_no_cycle_and_codes_can_be_made_meanwhile(
    make_buyers,
) -> None:
    # given: two single-use codes, and another session holding the stock row every claim ends on
    drop = presale_drop()
    first, second = (c.code for c in presale.generate_codes(drop=drop, count=2))
    buyers = make_buyers(4)
    outcomes: dict[int, str] = {}
    blocker = lock_stock(drop.pk)
    try:
        # when: a claim of each code spends it and waits for the stock (holding its code row), and a
        # second claim of each code waits for that code's row: both waits of a presale claim at once
        threads = [claim_in_thread(drop, buyers[0], first, outcomes)]
        threads.append(claim_in_thread(drop, buyers[1], second, outcomes))
        wait_for_lock_waits(2)
        threads.append(claim_in_thread(drop, buyers[2], second, outcomes))
        threads.append(claim_in_thread(drop, buyers[3], first, outcomes))
        wait_for_lock_waits(4)
        # and the merchant makes more codes meanwhile: that waits for none of them
        assert len(presale.generate_codes(drop=drop, count=5)) == 5
        assert lock_waits() == 4
    finally:
        blocker.rollback()
        blocker.close()
    for thread in threads:
        thread.join(timeout=30)

    # then: every claim finished (no deadlock's victim); each code admitted exactly one
    assert outcomes == {buyers[0]: "held", buyers[1]: "held", buyers[2]: "code_used", buyers[3]: "code_used"}
    assert spent_twice(drop) == []
    assert invariant(drop_id=drop.pk).drift == 0


def test_control_a_stock_holder_that_waits_for_a_code_row_closes_a_cycle_the_database_breaks(
    make_buyers,
) -> None:
    # given: a claim that spent its code and waits for the stock another session holds
    drop = presale_drop()
    (code,) = presale.generate_codes(drop=drop, count=1)
    (buyer,) = make_buyers(1)
    outcomes: dict[int, str] = {}
    blocker = lock_stock(drop.pk)
    try:
        thread = claim_in_thread(drop, buyer, code.code, outcomes)
        wait_for_lock_waits(1)
        # when: the stock's holder then waits for that code's row (the order of core.locks reversed)
        blocker_saw = ""
        try:
            blocker.execute("UPDATE holds_presalecode SET uses = uses WHERE id = %s", [code.pk])
        except psycopg.errors.DeadlockDetected as error:
            blocker_saw = str(error)
    finally:
        blocker.rollback()
        blocker.close()
    thread.join(timeout=30)

    # then: the database found the cycle and broke it, the claim (the first to wait) or the blocker
    # its victim: the harness above would see one as an answer other than held or code_used
    assert "deadlock detected" in blocker_saw + outcomes[buyer], (blocker_saw, outcomes)
