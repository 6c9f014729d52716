"""500 buyers, 100 single-use discount codes, all at once: each code discounts exactly one hold.

Five buyers share each code and run side by side, each on its own connection, through the real
reserve service on a live drop whose stock is never what stops a claim. The control swaps the
conditional spend for a read-then-write one and shows the harness catches the double spend it
allows. A use given back when its hold expires or is released unpaid can be spent again.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections import Counter

import pytest
from django.db.models import Count

from core.errors import DiscountCodeUsed, FloodgateError
from holds import discounts, services
from holds.counts import invariant
from holds.models import DiscountCode, Hold
from shop.models import Drop
from tests.concurrency import run_concurrently
from tests.factories import expire_in, make_drop

pytestmark = pytest.mark.django_db(transaction=True)

BUYERS = 500
CODES = 100
SHARING = BUYERS // CODES  # buyers holding the same code
THREADS = 32


def live_drop() -> Drop:
    return make_drop(quantity=BUYERS + 100, buckets=8, per_buyer_limit=1)


def single_use_codes(drop: Drop, count: int = CODES) -> list[DiscountCode]:
    return discounts.generate_codes(drop=drop, count=count, terms=discounts.Terms(percent=10))


def rush(drop: Drop, buyers: list[int], codes: list[str]) -> Counter[str]:
    """Every buyer claims one unit with their code (the same code's buyers side by side in the
    job order, so they run at once); the answers counted by outcome."""

    def attempt(buyer: int, code: str) -> str:
        try:
            services.reserve(
                drop=drop, buyer_id=buyer, quantity=1, idempotency_key=uuid.uuid4().hex, discount_code=code
            )
        except FloodgateError as error:
            return error.code
        return "held"

    jobs = [lambda b=b, c=codes[i // SHARING]: attempt(b, c) for i, b in enumerate(buyers)]
    results = run_concurrently(jobs, threads=THREADS)
    return Counter(r if isinstance(r, str) else repr(r) for r in results)


def naive_spend(gathering: dict[int, threading.Barrier]):
    """The read-then-write spend, kept here only as the control: read the uses, decide in Python,
    write the number read plus one. Each code's buyers meet at a barrier between the read and the
    write, so they all read the same count."""

    def spend(cursor, *, drop: Drop, hold_id: int, code: str) -> DiscountCode:
        cursor.execute("SELECT id, uses, max_uses FROM holds_discountcode WHERE code = %s", [code])
        code_id, uses, max_uses = cursor.fetchone()
        if uses >= max_uses:
            raise DiscountCodeUsed("used")
        with contextlib.suppress(threading.BrokenBarrierError):  # a straggler: write anyway
            gathering[code_id].wait(timeout=5)
        cursor.execute("UPDATE holds_discountcode SET uses = %s WHERE id = %s", [uses + 1, code_id])
        cursor.execute("UPDATE holds_hold SET discount_code_id = %s WHERE id = %s", [code_id, hold_id])
        return DiscountCode.objects.get(pk=code_id)

    return spend


def discounted_twice(drop: Drop) -> list[int]:
    """Codes that more than one hold carries."""
    per_code = Hold.objects.filter(drop=drop, discount_code__isnull=False).values("discount_code")
    return [row["discount_code"] for row in per_code.annotate(n=Count("id")).filter(n__gt=1)]


def test_control_a_read_then_write_spend_discounts_one_code_twice(make_buyers, monkeypatch) -> None:
    # given the race below, with the conditional spend swapped for a read-then-write one
    drop = live_drop()
    made = single_use_codes(drop)
    buyers = make_buyers(BUYERS)
    monkeypatch.setattr(discounts, "spend", naive_spend({c.pk: threading.Barrier(SHARING) for c in made}))

    # when the crowd runs it
    outcomes = rush(drop, buyers, [c.code for c in made])

    # then some code discounted more holds than it may: the harness sees the over-spend
    assert outcomes["held"] > CODES, outcomes
    assert discounted_twice(drop)
    assert DiscountCode.objects.filter(drop=drop, uses=1).count() == CODES  # and the counter hid it


def test_five_hundred_buyers_with_a_hundred_single_use_codes_get_exactly_a_hundred_discounts(
    make_buyers,
) -> None:
    # given a live drop, 100 single-use codes, five buyers per code
    drop = live_drop()
    made = single_use_codes(drop)
    buyers = make_buyers(BUYERS)

    # when all of them claim at once
    outcomes = rush(drop, buyers, [c.code for c in made])

    # then each code discounted one hold, and the other four heard it was used (nothing held)
    assert outcomes == {"held": CODES, "discount_code_used": BUYERS - CODES}, outcomes
    holds = Hold.objects.filter(drop=drop)
    assert holds.count() == CODES
    assert holds.filter(discount_code__isnull=False).values("discount_code").distinct().count() == CODES
    assert discounted_twice(drop) == []
    assert set(DiscountCode.objects.filter(drop=drop).values_list("uses", flat=True)) == {1}
    numbers = invariant(drop_id=drop.pk)
    assert (numbers.held, numbers.drift) == (CODES, 0)


def reserve(drop: Drop, buyer: int, code: str) -> Hold:
    return services.reserve(
        drop=drop, buyer_id=buyer, quantity=1, idempotency_key=uuid.uuid4().hex, discount_code=code
    ).hold


def test_a_use_given_back_at_expiry_can_be_used_again(make_buyers) -> None:
    # given a single-use code spent by a hold that then runs out unpaid
    drop = live_drop()
    (code,) = single_use_codes(drop, 1)
    first, second = make_buyers(2, prefix="expiry")
    lapsed = reserve(drop, first, code.code)
    with pytest.raises(DiscountCodeUsed):
        reserve(drop, second, code.code)
    expire_in([lapsed.pk], -5)

    # when the sweeper expires it
    assert services.reclaim_expired(drop_id=drop.pk) == 1

    # then the use is back, and the next buyer spends it
    assert DiscountCode.objects.get(pk=code.pk).uses == 0
    again = reserve(drop, second, code.code)
    assert again.discount_code_id == code.pk
    assert DiscountCode.objects.get(pk=code.pk).uses == 1
    assert invariant(drop_id=drop.pk).drift == 0


def test_a_use_given_back_at_release_and_kept_by_a_sold_hold(make_buyers) -> None:
    drop = live_drop()
    (code,) = single_use_codes(drop, 1)
    first, second = make_buyers(2, prefix="release")

    released = reserve(drop, first, code.code)
    assert services.release(hold_id=released.pk, buyer_id=first)
    assert not services.release(hold_id=released.pk, buyer_id=first)  # twice gives back once
    assert DiscountCode.objects.get(pk=code.pk).uses == 0

    sold = reserve(drop, second, code.code)
    assert services.confirm(hold_id=sold.pk)
    assert DiscountCode.objects.get(pk=code.pk).uses == 1


def test_many_expiring_holds_of_shared_codes_give_every_use_back_once(make_buyers) -> None:
    # a shop-wide code of 30 uses and a drop's code of 30, spent by 60 holds, all lapsed at once
    drop = live_drop()
    (shop_wide,) = discounts.generate_codes(drop=None, count=1, terms=discounts.Terms(percent=5, max_uses=30))
    (own,) = discounts.generate_codes(
        drop=drop, count=1, terms=discounts.Terms(amount_minor=100, max_uses=30)
    )
    buyers = make_buyers(60, prefix="many")
    holds = [reserve(drop, b, (shop_wide if i % 2 else own).code) for i, b in enumerate(buyers)]
    assert {c.uses for c in DiscountCode.objects.all()} == {30}
    expire_in([h.pk for h in holds], -5)

    assert services.reclaim_expired(drop_id=drop.pk) == 60

    assert {c.uses for c in DiscountCode.objects.all()} == {0}
    assert invariant(drop_id=drop.pk).available == BUYERS + 100
