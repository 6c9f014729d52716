"""Each hold transition is one conditional write: racing ones end a hold exactly once."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from core.errors import Ended, HoldNotActive, NotStarted, Paused, SoldOut, UnitTaken
from holds import services
from holds.counts import invariant
from holds.models import Hold
from inventory.models import Unit
from shop.models import Drop
from tests.concurrency import run_concurrently, run_spread
from tests.factories import expire_in, make_drop

pytestmark = pytest.mark.django_db(transaction=True)


def reserve(drop: Drop, buyer: int, quantity: int = 1, **kw: Any) -> Hold:
    return services.reserve(
        drop=drop, buyer_id=buyer, quantity=quantity, idempotency_key=uuid.uuid4().hex, **kw
    ).hold


def test_control_confirm_without_the_state_guard_double_counts(make_buyers) -> None:
    # given an expired hold that the reclaimer gives back
    drop = make_drop(quantity=5, buckets=1)
    hold = reserve(drop, make_buyers(1)[0])
    expire_in([hold.pk], -1)
    services.reclaim_expired(drop_id=drop.pk)

    # when a confirm that does not check the current state marks it sold anyway
    with connection.cursor() as cursor:
        cursor.execute("UPDATE holds_hold SET state = 'sold' WHERE id = %s", [hold.pk])

    # then the unit is both back on sale and sold: the invariant test sees it
    assert invariant(drop_id=drop.pk).drift == -1


@pytest.mark.parametrize("mode", ["buckets", "units"])
def test_reclaimer_racing_late_confirms_ends_each_hold_once(make_buyers, mode: str) -> None:
    seen: Counter[str] = Counter()
    for round_number in range(5):
        drop = make_drop(quantity=60, mode=mode, buckets=8 if mode == "buckets" else 1, per_buyer_limit=1)
        buyers = make_buyers(60, prefix=f"r{round_number}{mode}")
        holds = [reserve(drop, b) for b in buyers]
        # every hold runs out 0.3 s from now, while confirms and sweeps land over the next 0.6 s
        expire_in([h.pk for h in holds], 0.3)
        jobs: list[Callable[..., tuple[str, object]]]
        jobs = [lambda h=h: ("confirm", services.confirm(hold_id=h.pk)) for h in holds]
        jobs += [lambda d=drop.pk: ("sweep", services.reclaim_expired(drop_id=d)) for _ in range(30)]

        results = run_spread(jobs, over=0.6, threads=16, seed=round_number)

        assert not [r for r in results if isinstance(r, BaseException)]
        services.reclaim_expired(drop_id=drop.pk)
        states = Counter(Hold.objects.filter(drop=drop).values_list("state", flat=True))
        confirmed = len([r for r in results if r == ("confirm", True)])
        assert states["sold"] == confirmed
        assert states["sold"] + states["expired"] == 60
        seen.update(states)
        numbers = invariant(drop_id=drop.pk)
        assert (numbers.sold, numbers.held, numbers.available, numbers.drift) == (
            confirmed,
            0,
            60 - confirmed,
            0,
        )
    # both sides won some of the races, so the race really ran
    assert seen["sold"] > 0 and seen["expired"] > 0, seen


def test_release_twice_at_once_credits_once(make_buyers) -> None:
    drop = make_drop(quantity=10, buckets=2, per_buyer_limit=3)
    buyer = make_buyers(1)[0]
    hold = reserve(drop, buyer, quantity=3)

    results = run_concurrently(
        [lambda: services.release(hold_id=hold.pk, buyer_id=buyer) for _ in range(20)], threads=20
    )

    assert results.count(True) == 1 and results.count(False) == 19
    numbers = invariant(drop_id=drop.pk)
    assert (numbers.available, numbers.held, numbers.drift) == (10, 0, 0)


def test_someone_else_cannot_release_my_hold(make_buyers) -> None:
    drop = make_drop(quantity=4)
    mine, theirs = make_buyers(2)
    hold = reserve(drop, mine)

    assert services.release(hold_id=hold.pk, buyer_id=theirs) is False
    assert Hold.objects.get(pk=hold.pk).state == "held"


def test_sold_out_reserve_reclaims_expired_holds_and_tries_again(make_buyers) -> None:
    drop = make_drop(quantity=2, buckets=2, per_buyer_limit=2)
    first, second = make_buyers(2)
    old = reserve(drop, first, quantity=2)
    with pytest.raises(SoldOut):
        reserve(drop, second)
    expire_in([old.pk], -1)

    fresh = reserve(drop, second, quantity=2)

    assert Hold.objects.get(pk=old.pk).state == "expired"
    assert fresh.state == "held"
    assert invariant(drop_id=drop.pk).drift == 0


def test_paying_extends_a_live_hold_once_and_never_an_ended_one(make_buyers) -> None:
    from django.db import transaction

    drop = make_drop(quantity=4, hold_seconds=60, per_buyer_limit=1)
    buyer, other = make_buyers(2)
    hold = reserve(drop, buyer)

    def prepare(hold_id: int, buyer_id: int) -> Hold:
        with transaction.atomic(), connection.cursor() as cursor:
            services.hold_for_payment(cursor, hold_id=hold_id, buyer_id=buyer_id)
        return Hold.objects.get(pk=hold_id)

    first = prepare(hold.pk, buyer)
    second = prepare(hold.pk, buyer)

    assert first.extended and first.expires_at > hold.expires_at
    assert second.expires_at == first.expires_at  # once only
    with pytest.raises(HoldNotActive):
        prepare(hold.pk, other)  # not theirs
    services.release(hold_id=hold.pk, buyer_id=buyer)
    with pytest.raises(HoldNotActive):
        prepare(hold.pk, buyer)  # ended


def test_confirm_after_expiry_loses_even_before_the_sweeper_runs(make_buyers) -> None:
    drop = make_drop(quantity=4)
    hold = reserve(drop, make_buyers(1)[0])
    expire_in([hold.pk], -1)

    assert services.confirm(hold_id=hold.pk) is False
    assert services.effective_state(Hold.objects.get(pk=hold.pk)) == "expired"


def test_the_claim_statement_itself_refuses_a_paused_drop(make_buyers) -> None:
    # given a drop object loaded while live, then paused behind its back
    drop = make_drop(quantity=10, buckets=4)
    Drop.objects.filter(pk=drop.pk).update(paused=True)

    # the early check sees a live drop; the SQL sees the pause
    with pytest.raises(Paused):
        reserve(drop, make_buyers(1)[0])
    assert invariant(drop_id=drop.pk).available == 10
    assert not Hold.objects.filter(drop=drop).exists()


@pytest.mark.parametrize(("column", "error"), [("starts_at", NotStarted), ("ends_at", Ended)])
def test_the_claim_statement_itself_refuses_outside_the_window(make_buyers, column: str, error: type) -> None:
    drop = make_drop(quantity=10, mode="units")
    window = ("1 hour", "2 hour") if column == "starts_at" else ("-2 hour", "-1 hour")
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE shop_drop SET starts_at = now() + %s::interval, ends_at = now() + %s::interval"
            " WHERE id = %s",
            [*window, drop.pk],
        )

    with pytest.raises(error):
        reserve(drop, make_buyers(1)[0])
    assert not Hold.objects.filter(drop=drop).exists()


def test_a_chosen_seat_that_is_taken_is_a_clear_taken(make_buyers) -> None:
    drop = make_drop(quantity=3, mode="units", unit_labels=["A1", "A2", "A3"], per_buyer_limit=1)
    first, second = make_buyers(2)
    reserve(drop, first, unit="A2")

    with pytest.raises(UnitTaken):
        reserve(drop, second, unit="A2")
    taken = reserve(drop, second, unit="A3")

    assert list(taken.units.values_list("label", flat=True)) == ["A3"]
    seat = Unit.objects.get(drop=drop, label="A2").hold
    assert seat is not None and seat.buyer_id == first


def test_a_seat_locked_by_another_claimer_is_taken_without_waiting(make_buyers) -> None:
    drop = make_drop(quantity=2, mode="units", unit_labels=["B1", "B2"], per_buyer_limit=1)
    buyer = make_buyers(1)[0]
    started = time.monotonic()

    from django.db import connections, transaction

    with transaction.atomic(using="default"), connection.cursor() as cursor:
        cursor.execute("SELECT id FROM inventory_unit WHERE label = 'B1' FOR UPDATE")

        def other_buyer() -> object:
            try:
                return reserve(drop, buyer, unit="B1")
            finally:
                connections.close_all()

        (result,) = run_concurrently([other_buyer], threads=1)

    assert isinstance(result, UnitTaken)
    assert time.monotonic() - started < 5  # it did not queue behind the lock for the lock timeout


def test_units_mode_gives_the_best_available_in_rank_order(make_buyers) -> None:
    drop = make_drop(
        quantity=4, mode="units", unit_labels=["front", "middle", "back", "rear"], per_buyer_limit=2
    )

    hold = reserve(drop, make_buyers(1)[0], quantity=2)

    assert sorted(hold.units.values_list("label", flat=True)) == ["front", "middle"]


def test_sweep_expires_overdue_holds_in_batches(make_buyers) -> None:
    drop = make_drop(quantity=30, buckets=4, per_buyer_limit=1)
    holds = [reserve(drop, b) for b in make_buyers(30)]
    expire_in([h.pk for h in holds[:20]], -1)

    assert services.sweep_expired() == 20
    assert services.sweep_expired() == 0
    numbers = invariant(drop_id=drop.pk)
    assert (numbers.available, numbers.held, numbers.drift) == (20, 10, 0)


def test_an_expired_unreclaimed_hold_does_not_block_its_buyer(make_buyers) -> None:
    drop = make_drop(quantity=5, per_buyer_limit=1)
    buyer = make_buyers(1)[0]
    old = reserve(drop, buyer)
    expire_in([old.pk], -1)

    fresh = reserve(drop, buyer)

    assert fresh.pk != old.pk and fresh.state == "held"
    assert Hold.objects.get(pk=old.pk).state == "expired"
    assert invariant(drop_id=drop.pk).drift == 0
