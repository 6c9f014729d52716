"""Presale codes and lists on the reserve service: who a presale admits, what a refusal changes
(nothing), and that only the claim that succeeds keeps its code's use."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from core.errors import FloodgateError, InvalidInput, NotStarted, Paused, SoldOut
from holds import presale, services
from holds.counts import invariant
from holds.models import Hold, PresaleCode, PresaleListEntry
from shop.models import Drop
from tests.factories import expire_in, make_buyer, make_drop

pytestmark = pytest.mark.django_db


def presale_drop(*, quantity: int = 10, opens_in: timedelta = -timedelta(minutes=1), **options: Any) -> Drop:
    now = timezone.now()
    return make_drop(
        quantity=quantity, starts_at=now + timedelta(hours=1), presale_starts_at=now + opens_in, **options
    )


def reserve(drop: Drop, buyer: User, code: object = None, *, key: str | None = None) -> Hold:
    return services.reserve(
        drop=drop,
        buyer_id=buyer.pk,
        quantity=1,
        idempotency_key=key or uuid.uuid4().hex,
        presale_code=code,  # type: ignore[arg-type]
    ).hold


def refusal(drop: Drop, buyer: User, code: object = None) -> FloodgateError:
    with pytest.raises(FloodgateError) as caught:
        reserve(drop, buyer, code)
    return caught.value


def untouched(drop: Drop, quantity: int = 10) -> bool:
    return not Hold.objects.filter(drop=drop).exists() and invariant(drop_id=drop.pk).available == quantity


def test_a_code_admits_one_claim_in_the_presale_and_the_hold_carries_it() -> None:
    drop = presale_drop()
    (code,) = presale.generate_codes(drop=drop, count=1)

    hold = reserve(drop, make_buyer(), code.code.lower())  # typed in lower case: the same code

    code.refresh_from_db()
    assert (hold.state, Hold.objects.get(pk=hold.pk).presale_code_id, code.uses) == ("held", code.pk, 1)


def test_a_used_code_is_409_an_unknown_one_403_and_neither_changes_anything() -> None:
    drop = presale_drop()
    other = presale_drop()
    (code,) = presale.generate_codes(drop=drop, count=1)
    (elsewhere,) = presale.generate_codes(drop=other, count=1)
    reserve(drop, make_buyer(), code.code)
    before = invariant(drop_id=drop.pk).available

    used = refusal(drop, make_buyer(), code.code)
    unknown = refusal(drop, make_buyer(), "NOSUCHCODE")
    another_drops = refusal(drop, make_buyer(), elsewhere.code)

    assert (used.status, used.code) == (409, "code_used")
    assert (unknown.status, unknown.code) == (403, "invalid_code")
    assert (another_drops.status, another_drops.code) == (403, "invalid_code")
    assert "not valid for this drop" in unknown.detail
    assert Hold.objects.filter(drop=drop).count() == 1 and invariant(drop_id=drop.pk).available == before
    assert (
        PresaleCode.objects.get(pk=code.pk).uses == 1 and PresaleCode.objects.get(pk=elsewhere.pk).uses == 0
    )


@pytest.mark.parametrize(
    "garbage",
    [
        5,
        True,
        ["AAAA"],
        {"code": "AAAA"},
        "A" * 33,
        "ÄBCD",
        "AB CD",
        "AB\x00CD",
        "AB\ud800",
        "\uff11\uff12\uff13\uff14",
        "   ",
    ],
    ids=[
        "int",
        "bool",
        "list",
        "object",
        "too long",
        "umlaut",
        "space",
        "NUL",
        "surrogate",
        "wide digits",
        "blank",
    ],
)
def test_a_code_that_cannot_be_one_is_refused_before_anything_is_written(garbage: object) -> None:
    drop = presale_drop()
    presale.generate_codes(drop=drop, count=3)

    error = refusal(drop, make_buyer(), garbage)

    assert (error.status, error.code) == (403, "invalid_code")
    assert "letters and digits" in error.detail
    assert untouched(drop)
    assert set(PresaleCode.objects.filter(drop=drop).values_list("uses", flat=True)) == {0}


def test_a_claim_that_finds_it_sold_out_keeps_no_use_of_its_code() -> None:
    drop = presale_drop(quantity=1)
    first, second = presale.generate_codes(drop=drop, count=2)
    taken = reserve(drop, make_buyer(), first.code)
    late = make_buyer()

    error = refusal(drop, late, second.code)

    assert isinstance(error, SoldOut)
    assert PresaleCode.objects.get(pk=second.pk).uses == 0  # rolled back with the claim
    # the unit comes back: the same code still admits its buyer
    services.release(hold_id=taken.pk, buyer_id=None)
    assert reserve(drop, late, second.code).state == "held"
    assert PresaleCode.objects.get(pk=second.pk).uses == 1


def test_an_n_use_code_admits_n_claims_then_says_used() -> None:
    drop = presale_drop()
    (code,) = presale.generate_codes(drop=drop, count=1, max_uses=3)

    held = [reserve(drop, make_buyer(), code.code) for _ in range(3)]
    fourth = refusal(drop, make_buyer(), code.code)

    assert len({h.pk for h in held}) == 3 and fourth.code == "code_used"
    assert PresaleCode.objects.get(pk=code.pk).uses == 3


def test_the_same_key_again_returns_the_hold_and_spends_nothing_more() -> None:
    drop = presale_drop()
    (code,) = presale.generate_codes(drop=drop, count=1, max_uses=5)
    buyer = make_buyer()

    first = reserve(drop, buyer, code.code, key="again")
    second = reserve(drop, buyer, code.code, key="again")

    assert first.pk == second.pk and PresaleCode.objects.get(pk=code.pk).uses == 1


def test_a_buyer_whose_verified_address_is_on_the_list_is_admitted_without_a_code() -> None:
    drop = presale_drop()
    member = make_buyer("member", email="Member@Example.com")
    unverified = make_buyer("unverified", verified=False)
    presale.add_to_list(drop=drop, emails=presale.addresses_in("member@example.com, unverified@example.com"))

    hold = reserve(drop, member)
    outsider = refusal(drop, make_buyer("outsider"))
    not_verified = refusal(drop, unverified)

    assert hold.state == "held" and Hold.objects.get(pk=hold.pk).presale_code_id is None
    for error in (outsider, not_verified):
        assert isinstance(error, NotStarted) and "presale" in error.detail
        assert error.extra["starts_at"] == drop.starts_at.isoformat()


def test_before_the_presale_opens_a_code_admits_nobody_and_is_not_spent() -> None:
    drop = presale_drop(opens_in=timedelta(minutes=5))
    (code,) = presale.generate_codes(drop=drop, count=1)

    error = refusal(drop, make_buyer(), code.code)

    assert isinstance(error, NotStarted) and untouched(drop)
    assert PresaleCode.objects.get(pk=code.pk).uses == 0


def test_a_paused_presale_admits_nobody() -> None:
    drop = presale_drop()
    (code,) = presale.generate_codes(drop=drop, count=1)
    Drop.objects.filter(pk=drop.pk).update(paused=True)
    drop.refresh_from_db()

    assert isinstance(refusal(drop, make_buyer(), code.code), Paused) and untouched(drop)


def test_the_claim_statement_itself_refuses_a_presale_claim_once_the_window_is_gone() -> None:
    # given a drop row read while its presale was on, then the presale moved to the future
    drop = presale_drop()
    (code,) = presale.generate_codes(drop=drop, count=1)
    Drop.objects.filter(pk=drop.pk).update(presale_starts_at=timezone.now() + timedelta(minutes=30))

    # then the database's check of the window refuses it, and the code's use is rolled back
    assert isinstance(refusal(drop, make_buyer(), code.code), NotStarted)
    assert untouched(drop) and PresaleCode.objects.get(pk=code.pk).uses == 0


def test_after_the_start_anyone_buys_without_a_code_and_a_code_sent_is_not_spent() -> None:
    now = timezone.now()
    drop = make_drop(starts_at=now - timedelta(minutes=1), presale_starts_at=now - timedelta(hours=1))
    (code,) = presale.generate_codes(drop=drop, count=1)

    anyone = reserve(drop, make_buyer())
    with_code = reserve(drop, make_buyer(), code.code)

    assert anyone.state == with_code.state == "held"
    assert PresaleCode.objects.get(pk=code.pk).uses == 0


def test_a_drop_without_a_presale_still_opens_at_its_start() -> None:
    drop = make_drop(starts_at=timezone.now() + timedelta(hours=1))
    (code,) = presale.generate_codes(drop=drop, count=1)

    error = refusal(drop, make_buyer(), code.code)

    assert isinstance(error, NotStarted) and "presale" not in error.detail


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"presale_starts_at": timezone.now() + timedelta(hours=2)}, "before the drop's public start"),
        ({"presale_starts_at": timezone.now(), "waiting_room": True}, "first-come drops"),
    ],
    ids=["after the start", "with a waiting room"],
)
def test_a_presale_that_cannot_work_is_refused_when_the_drop_is_made(options: dict, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        make_drop(starts_at=timezone.now() + timedelta(hours=1), **options)
    assert not Drop.objects.exists()


def test_generated_codes_are_unique_unambiguous_and_export_as_csv() -> None:
    drop = presale_drop()

    made = presale.generate_codes(drop=drop, count=200, max_uses=2)
    more = presale.generate_codes(drop=drop, count=50)
    text = presale.codes_csv(drop=drop)

    codes = [c.code for c in made + more]
    assert len(set(codes)) == 250 and all(set(c) <= set(presale.ALPHABET) for c in codes)
    assert not set("".join(codes)) & set("01OIL")
    lines = text.splitlines()
    assert lines[0] == "code,max_uses,uses" and len(lines) == 251
    assert f"{made[0].code},2,0" in lines and f"{more[0].code},1,0" in lines


@pytest.mark.parametrize(("count", "uses"), [(0, 1), (10_001, 1), (5, 0), (5, -1), (True, 1)])
def test_generating_a_silly_number_of_codes_is_refused(count: int, uses: int) -> None:
    drop = presale_drop()
    with pytest.raises(InvalidInput):
        presale.generate_codes(drop=drop, count=count, max_uses=uses)
    assert not PresaleCode.objects.exists()


def test_a_list_is_read_from_pasted_text_or_csv_and_a_bad_address_adds_nothing() -> None:
    drop = presale_drop()

    assert presale.addresses_in('email\n"A@x.org"\nb@x.org; c@x.org, a@x.org') == [
        "a@x.org",
        "b@x.org",
        "c@x.org",
    ]
    assert presale.add_to_list(drop=drop, emails=["a@x.org", "b@x.org"]) == 2
    assert presale.add_to_list(drop=drop, emails=["b@x.org", "c@x.org"]) == 1
    with pytest.raises(InvalidInput, match="not-an-address"):
        presale.addresses_in("d@x.org\nnot-an-address")
    assert sorted(PresaleListEntry.objects.filter(drop=drop).values_list("email", flat=True)) == [
        "a@x.org",
        "b@x.org",
        "c@x.org",
    ]


def test_the_next_sale_keeps_the_presale_window_but_not_its_codes_and_a_rehearsal_has_none() -> None:
    from catalogue.services import duplicate_drop

    drop = presale_drop()  # a presale of an hour and a minute
    presale.generate_codes(drop=drop, count=2)

    copy = duplicate_drop(drop=drop)
    rehearsal = duplicate_drop(drop=drop, rehearsal=True, slug_word="rehearsal")

    assert copy.presale_starts_at is not None and drop.presale_starts_at is not None
    assert copy.starts_at - copy.presale_starts_at == drop.starts_at - drop.presale_starts_at
    assert not PresaleCode.objects.filter(drop=copy).exists()
    assert rehearsal.presale_starts_at is None


def test_a_presale_code_comes_back_when_its_hold_ends_unpaid_and_stays_spent_when_sold() -> None:
    drop = presale_drop()
    (code,) = presale.generate_codes(drop=drop, count=1)
    first, second, third = make_buyer(), make_buyer(), make_buyer()

    lapsed = reserve(drop, first, code.code)
    assert refusal(drop, second, code.code).code == "code_used"
    expire_in([lapsed.pk], -5)
    assert services.reclaim_expired(drop_id=drop.pk) == 1
    assert PresaleCode.objects.get(pk=code.pk).uses == 0  # expired unpaid: the use is back

    released = reserve(drop, second, code.code)
    assert services.release(hold_id=released.pk, buyer_id=None)
    assert PresaleCode.objects.get(pk=code.pk).uses == 0  # released unpaid: back too

    sold = reserve(drop, third, code.code)
    assert services.confirm(hold_id=sold.pk)
    assert PresaleCode.objects.get(pk=code.pk).uses == 1
    assert refusal(drop, first, code.code).code == "code_used"
