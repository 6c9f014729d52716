"""Thousands of buyers, a hundred units, real concurrent connections: exactly a hundred held."""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter
from functools import partial

import pytest
from django.db import IntegrityError, connection, transaction

from core.errors import SoldOut
from holds import services, sql
from holds.counts import invariant
from holds.models import Hold
from tests.concurrency import run_concurrently
from tests.factories import make_drop

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 32
ATTEMPTS = 2000
UNITS = 100


def naive_reserve(drop_id: int, buyer_id: int) -> bool:
    """The read-then-write claim Floodgate must never contain (kept here only as the control)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT available FROM inventory_stockbucket WHERE drop_id = %s", [drop_id])
        (available,) = cursor.fetchone()
        if available < 1:
            return False
        time.sleep(0.001)  # the app work between the read and the write
        cursor.execute(
            "UPDATE inventory_stockbucket SET available = %s WHERE drop_id = %s", [available - 1, drop_id]
        )
        params = {
            "drop": drop_id,
            "variant": None,
            "buyer": buyer_id,
            "q": 1,
            "index": 0,
            "key": "naive",
            "digest": "",
        }
        cursor.execute(sql.INSERT_HOLD, params)
    return True


@pytest.mark.parametrize("database_path", ["direct", "pgbouncer"], indirect=True)
def test_control_read_then_write_oversells(make_buyers, database_path: str) -> None:
    # given the race harness below, with the conditional claim swapped for a read-then-write
    drop = make_drop(quantity=UNITS, buckets=1)
    buyers = make_buyers(ATTEMPTS // 4)

    # when the crowd runs it
    results = run_concurrently([partial(naive_reserve, drop.pk, b) for b in buyers], threads=THREADS)

    # then more holds exist than units: the harness can see a race
    assert not [r for r in results if isinstance(r, BaseException)]
    assert Hold.objects.filter(drop=drop).count() > UNITS
    assert invariant(drop_id=drop.pk).drift != 0


@pytest.mark.parametrize(
    ("mode", "buckets", "database_path"),
    [
        ("buckets", 1, "direct"),
        pytest.param("buckets", 16, "direct", marks=pytest.mark.slow),
        pytest.param("units", 1, "direct", marks=pytest.mark.slow),
        # production's shape beyond one box: every connection through PgBouncer's transaction pooling
        ("buckets", 1, "pgbouncer"),
        ("units", 1, "pgbouncer"),
    ],
    indirect=["database_path"],
)
def test_two_thousand_buyers_for_a_hundred_units(
    make_buyers, mode: str, buckets: int, database_path: str
) -> None:
    drop = make_drop(quantity=UNITS, mode=mode, buckets=buckets, per_buyer_limit=1)
    buyers = make_buyers(ATTEMPTS)

    def attempt(buyer_id: int) -> str:
        try:
            services.reserve(drop=drop, buyer_id=buyer_id, quantity=1, idempotency_key=uuid.uuid4().hex)
        except SoldOut:
            return "sold_out"
        return "held"

    results = run_concurrently([partial(attempt, b) for b in buyers], threads=THREADS)

    outcomes = Counter(r if isinstance(r, str) else repr(r) for r in results)
    assert outcomes == {"held": UNITS, "sold_out": ATTEMPTS - UNITS}
    numbers = invariant(drop_id=drop.pk)
    assert (numbers.available, numbers.held, numbers.sold, numbers.drift) == (0, UNITS, 0, 0)
    if mode == "units":
        assert Hold.objects.filter(drop=drop, units__isnull=False).distinct().count() == UNITS


@pytest.mark.slow
def test_tail_of_sixteen_buckets_strands_no_unit(make_buyers) -> None:
    # given 101 units over 16 buckets and buyers asking for 1 or 2 each
    drop = make_drop(quantity=101, buckets=16, per_buyer_limit=2)
    buyers = make_buyers(1500)
    rng = random.Random(7)
    wants = {b: rng.choice([1, 2]) for b in buyers}

    def attempt(buyer_id: int) -> str:
        try:
            services.reserve(
                drop=drop, buyer_id=buyer_id, quantity=wants[buyer_id], idempotency_key=uuid.uuid4().hex
            )
        except SoldOut:
            return "sold_out"
        return "held"

    # when demand is well above supply
    results = run_concurrently([partial(attempt, b) for b in buyers], threads=THREADS)

    # then every unit is held by someone and nothing was stranded in a small bucket
    assert not [r for r in results if isinstance(r, BaseException)]
    numbers = invariant(drop_id=drop.pk)
    assert (numbers.available, numbers.held, numbers.drift) == (0, 101, 0)


def test_the_same_key_fifty_times_at_once_gives_one_hold(make_buyers) -> None:
    drop = make_drop(quantity=10, buckets=4)
    (buyer,) = make_buyers(1)

    results = run_concurrently(
        [
            lambda: services.reserve(drop=drop, buyer_id=buyer, quantity=2, idempotency_key="double-click")
            for _ in range(50)
        ],
        threads=50,
    )

    reservations = [r for r in results if not isinstance(r, BaseException)]
    assert len(reservations) == len(results)
    assert len({r.hold.pk for r in reservations}) == 1
    assert sum(r.created for r in reservations) == 1
    numbers = invariant(drop_id=drop.pk)
    assert (numbers.available, numbers.held, numbers.drift) == (8, 2, 0)


def test_a_buyer_racing_themself_cannot_pass_the_limit(make_buyers) -> None:
    drop = make_drop(quantity=50, buckets=4, per_buyer_limit=2)
    (buyer,) = make_buyers(1)
    Hold.objects.filter(drop=drop).delete()

    results = run_concurrently(
        [
            partial(services.reserve, drop=drop, buyer_id=buyer, quantity=1, idempotency_key=f"tab-{k}")
            for k in range(20)
        ],
        threads=20,
    )

    # one active hold per buyer: the first wins, the rest are told they already hold units
    assert sum(1 for r in results if not isinstance(r, BaseException)) == 1
    assert {getattr(r, "code", None) for r in results if isinstance(r, BaseException)} == {"hold_exists"}
    assert invariant(drop_id=drop.pk).held == 1


def test_schema_refuses_a_negative_stock_level() -> None:
    drop = make_drop(quantity=3, buckets=1)

    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE inventory_stockbucket SET available = available - 4 WHERE drop_id = %s", [drop.pk]
        )
