"""Another size for a hold: an offered returned unit, a raffle's win or any held hold whose payment
has not started changes variant in one transaction (its units given back, as many of the new size
taken), or is refused and stays as it was. Real PostgreSQL, threads on their own connections."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test import Client

from catalogue.services import NewVariant
from core.errors import Busy, HoldNotActive, InvalidVariant, Paused, SoldOut, VariantSoldOut
from holds import services as holds
from holds.counts import invariant, invariant_by_variant
from holds.models import Hold
from inventory.models import Unit
from sale import offers
from tests.concurrency import run_concurrently
from tests.factories import make_drop, size_of
from tests.sale.helpers import in_line, offered_hold

pytestmark = pytest.mark.django_db(transaction=True)


def per_size(drop_id: int) -> list[tuple[str, int, int]]:
    """(size, available, held) for each size; every size's invariant is checked on the way."""
    sizes = invariant_by_variant(drop_id=drop_id)
    assert all(v.drift == 0 for v in sizes), sizes
    return [(v.name, v.available, v.held) for v in sizes]


@pytest.mark.parametrize("mode", ["buckets", "units"])
def test_a_hold_changes_size_and_each_size_s_count_moves_with_it(make_buyers, mode: str) -> None:
    sizes = [NewVariant("S", 3), NewVariant("M", 3, 5900)]
    drop = make_drop(slug=f"swap-{mode}", quantity=6, mode=mode, variants=sizes, per_buyer_limit=2)
    small = drop.variants.get(name="S")
    buyer = make_buyers(1, prefix=f"swap-{mode}")[0]
    hold = holds.reserve(drop=drop, variant=small, buyer_id=buyer, quantity=2, idempotency_key="k").hold
    expires = hold.expires_at

    changed = holds.change_variant(hold=hold, buyer_id=buyer, name="M")

    assert size_of(changed) == "M" and changed.quantity == 2 and changed.expires_at == expires
    assert per_size(drop.pk) == [("S", 3, 0), ("M", 1, 2)]
    if mode == "units":
        assert sorted(Unit.objects.filter(hold=hold).values_list("label", flat=True)) == ["M-1", "M-2"]
    # the same size again changes nothing; back to S gives M's units back
    assert size_of(holds.change_variant(hold=changed, buyer_id=buyer, name="M")) == "M"
    holds.change_variant(hold=changed, buyer_id=buyer, name="S")
    assert per_size(drop.pk) == [("S", 1, 2), ("M", 3, 0)]
    assert invariant(drop_id=drop.pk).drift == 0


def test_a_size_with_too_few_units_is_refused_and_the_hold_is_as_it_was(make_buyers) -> None:
    drop = make_drop(slug="swap-short", quantity=3, variants=[NewVariant("S", 2), NewVariant("M", 1)])
    small, medium = drop.variants.all()
    one, two = make_buyers(2, prefix="short")
    hold = holds.reserve(drop=drop, variant=small, buyer_id=one, quantity=2, idempotency_key="k").hold
    with pytest.raises(SoldOut, match="Only 1 left"):  # two of M, where one is left
        holds.change_variant(hold=hold, buyer_id=one, name="M")
    holds.reserve(drop=drop, variant=medium, buyer_id=two, quantity=1, idempotency_key="k")
    with pytest.raises(VariantSoldOut):  # and none
        holds.change_variant(hold=hold, buyer_id=one, name="M")

    assert Hold.objects.get(pk=hold.pk).variant == small
    assert per_size(drop.pk) == [("S", 0, 2), ("M", 0, 1)]


def test_a_hold_whose_payment_started_or_that_ended_or_is_paused_or_not_yours_keeps_its_size(
    make_buyers,
) -> None:
    drop = make_drop(slug="swap-no", quantity=6, variants=[NewVariant("S", 3), NewVariant("M", 3)])
    small = drop.variants.get(name="S")
    one, two, three = make_buyers(3, prefix="swap-no")
    paying = holds.reserve(drop=drop, variant=small, buyer_id=one, quantity=1, idempotency_key="k").hold
    with connection.cursor() as cursor, transaction.atomic():
        holds.hold_for_payment(cursor, hold_id=paying.pk, buyer_id=one)  # the price is fixed from here
    with pytest.raises(HoldNotActive):
        holds.change_variant(hold=paying, buyer_id=one, name="M")
    released = holds.reserve(drop=drop, variant=small, buyer_id=two, quantity=1, idempotency_key="k").hold
    with pytest.raises(HoldNotActive):  # someone else's
        holds.change_variant(hold=released, buyer_id=one, name="M")
    holds.release(hold_id=released.pk, buyer_id=two)
    with pytest.raises(HoldNotActive):
        holds.change_variant(hold=released, buyer_id=two, name="M")
    held = holds.reserve(drop=drop, variant=small, buyer_id=three, quantity=1, idempotency_key="k").hold
    for garbage in (None, "", "XL", 7, ["M"], "M\x00"):
        with pytest.raises(InvalidVariant):
            holds.change_variant(hold=held, buyer_id=three, name=garbage)
    drop.paused = True
    drop.save(update_fields=["paused"])
    with pytest.raises(Paused):
        holds.change_variant(hold=held, buyer_id=three, name="M")

    assert set(Hold.objects.values_list("variant__name", flat=True)) == {"S"}
    assert per_size(drop.pk) == [("S", 1, 2), ("M", 3, 0)]


@pytest.mark.parametrize("mode", ["buckets", "units"])
def test_an_offered_returned_unit_changes_size_and_its_own_goes_to_the_next_ticket(
    make_buyers, mode: str
) -> None:
    # given a waiting room where S is sold out, M has one open unit, and an S comes back to ticket 3
    sizes = [NewVariant("S", 2), NewVariant("M", 2)]
    drop = make_drop(slug=f"offer-swap-{mode}", quantity=4, mode=mode, waiting_room=True, variants=sizes)
    small, medium = drop.variants.all()
    by_number = in_line(drop.pk, make_buyers(5, prefix=f"offer-swap-{mode}"))
    first = holds.reserve(drop=drop, variant=small, buyer_id=by_number[1], quantity=1, idempotency_key="k")
    holds.reserve(drop=drop, variant=small, buyer_id=by_number[2], quantity=1, idempotency_key="k")
    holds.reserve(drop=drop, variant=medium, buyer_id=by_number[5], quantity=1, idempotency_key="k")
    holds.release(hold_id=first.hold.pk, buyer_id=by_number[1])
    assert offers.offer_returns(drop) == 1
    offered = Hold.objects.get(pk=offered_hold(drop.pk, 3))
    assert offered.variant == small

    # when ticket 3 takes M instead
    holds.change_variant(hold=offered, buyer_id=by_number[3], name="M")

    # then the S is the line's again, offered to ticket 4, and ticket 3's offer is an M
    assert per_size(drop.pk) == [("S", 1, 1), ("M", 0, 2)]
    assert offers.offer_returns(drop) == 1
    assert Hold.objects.get(pk=offered_hold(drop.pk, 4)).variant == small
    assert Hold.objects.get(pk=offered_hold(drop.pk, 3)).variant == medium
    assert per_size(drop.pk) == [("S", 0, 2), ("M", 0, 2)]


def test_a_returned_size_not_yet_offered_goes_to_an_offered_buyer_ahead_of_the_next_tickets(
    make_buyers,
) -> None:
    sizes = [NewVariant("S", 1), NewVariant("M", 1)]
    drop = make_drop(slug="offer-returned", quantity=2, waiting_room=True, variants=sizes)
    small, medium = drop.variants.all()
    by_number = in_line(drop.pk, make_buyers(4, prefix="returned"))
    first = holds.reserve(drop=drop, variant=small, buyer_id=by_number[1], quantity=1, idempotency_key="k")
    second = holds.reserve(drop=drop, variant=medium, buyer_id=by_number[2], quantity=1, idempotency_key="k")
    holds.release(hold_id=first.hold.pk, buyer_id=by_number[1])
    assert offers.offer_returns(drop) == 1
    offered = Hold.objects.get(pk=offered_hold(drop.pk, 3))
    holds.release(hold_id=second.hold.pk, buyer_id=by_number[2])  # an M comes back, not offered yet

    holds.change_variant(hold=offered, buyer_id=by_number[3], name="M")

    assert Hold.objects.get(pk=offered.pk).variant == medium
    assert per_size(drop.pk) == [("S", 1, 0), ("M", 0, 1)]  # the S is returned, for ticket 4
    assert offers.offer_returns(drop) == 1 and Hold.objects.get(pk=offered_hold(drop.pk, 4)).variant == small


def test_buyers_racing_for_the_last_units_of_a_size_get_exactly_those(make_buyers) -> None:
    # 30 buyers hold S; 12 units of M are left; all 30 ask for M at once (each on its own connection)
    drop = make_drop(
        slug="swap-race", quantity=42, variants=[NewVariant("S", 30), NewVariant("M", 12)], buckets=4
    )
    small = drop.variants.get(name="S")
    buyers = make_buyers(30, prefix="swap-race")
    held = [
        holds.reserve(drop=drop, variant=small, buyer_id=b, quantity=1, idempotency_key="k").hold
        for b in buyers
    ]

    def change(hold: Hold, buyer: int):
        def job() -> str:
            for _ in range(20):  # a busy answer is retried, as the page's buyer would
                try:
                    return size_of(holds.change_variant(hold=hold, buyer_id=buyer, name="M"))
                except Busy:
                    continue
            return "busy"

        return job

    results = run_concurrently([change(h, b) for h, b in zip(held, buyers, strict=True)], threads=10)

    got = [r for r in results if r == "M"]
    assert len(got) == 12 and all(isinstance(r, VariantSoldOut) for r in results if r != "M"), results
    assert per_size(drop.pk) == [("S", 12, 18), ("M", 0, 12)]


def test_the_api_and_the_hold_page_change_the_size_and_refuse_garbage(make_buyers) -> None:
    from django.contrib.auth import get_user_model

    drop = make_drop(slug="swap-api", quantity=4, variants=[NewVariant("S", 2), NewVariant("M", 2, 5900)])
    small = drop.variants.get(name="S")
    ann = get_user_model().objects.create_user("swap-ann", password="x")
    client = Client()
    client.force_login(ann)
    hold = holds.reserve(drop=drop, variant=small, buyer_id=ann.pk, quantity=1, idempotency_key="k").hold

    page = client.get(f"/holds/{hold.pk}/").content.decode()
    assert 'id="size-form"' in page and "€59.00" in page and "yours now" in page
    for body in ({}, {"variant": 5}, {"variant": "XL"}, {"variant": "x" * 10_000}):
        answer = client.put(f"/api/holds/{hold.pk}/variant", body, content_type="application/json")
        assert answer.status_code == 422 and answer.json()["error"] == "invalid_variant", body
    answer = client.put(f"/api/holds/{hold.pk}/variant", "{not json", content_type="application/json")
    assert answer.status_code == 422 and answer.json()["detail"] == "The body is not valid JSON."
    assert (
        client.put("/api/holds/999999/variant", {"variant": "M"}, content_type="application/json").status_code
        == 404
    )
    assert per_size(drop.pk) == [("S", 1, 1), ("M", 2, 0)]  # nothing changed

    answer = client.put(f"/api/holds/{hold.pk}/variant", {"variant": "M"}, content_type="application/json")
    assert answer.status_code == 200 and answer.json()["variant"] == "M"
    answer = client.post(f"/holds/{hold.pk}/size", {"variant": "S"})
    assert answer.status_code == 302 and Hold.objects.get(pk=hold.pk).variant == small
    assert "Changed to S." in client.get(f"/holds/{hold.pk}/").content.decode()
    assert per_size(drop.pk) == [("S", 1, 1), ("M", 2, 0)]
