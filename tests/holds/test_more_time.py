""" "I need more time" (WCAG 2.2.1) with a cap that keeps the line fair: each press adds half the hold's
first window, at most twice, only before payment starts; a crowd of presses gets exactly two."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.db import connection, transaction
from django.test import Client

from core.errors import HoldNotActive, MoreTimeUsed
from holds import services as holds
from holds.counts import invariant
from holds.models import MORE_TIME_MAX, Hold
from tests.concurrency import run_concurrently
from tests.factories import expire_in, make_buyer, make_drop

pytestmark = pytest.mark.django_db(transaction=True)


def test_each_press_adds_half_the_first_window_twice_and_no_more() -> None:
    drop = make_drop(slug="more", quantity=3, hold_seconds=480)
    buyer = make_buyer("more-ann")
    hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=1, idempotency_key="k").hold
    first = hold.expires_at

    after = [holds.more_time(hold=hold, buyer_id=buyer.pk).expires_at for _ in range(MORE_TIME_MAX)]

    assert [later - first for later in after] == [timedelta(seconds=240), timedelta(seconds=480)]
    with pytest.raises(MoreTimeUsed):
        holds.more_time(hold=hold, buyer_id=buyer.pk)
    assert Hold.objects.get(pk=hold.pk).expires_at == after[-1]  # twice the merchant's time, at most
    assert invariant(drop_id=drop.pk).drift == 0


def test_no_more_time_once_paying_ended_or_for_another_buyer() -> None:
    drop = make_drop(slug="more-no", quantity=3)
    ann, bob = make_buyer("more-a"), make_buyer("more-b")
    paying = holds.reserve(drop=drop, buyer_id=ann.pk, quantity=1, idempotency_key="k").hold
    with connection.cursor() as cursor, transaction.atomic():
        holds.hold_for_payment(cursor, hold_id=paying.pk, buyer_id=ann.pk)
    with pytest.raises(HoldNotActive):
        holds.more_time(hold=paying, buyer_id=ann.pk)
    lapsed = holds.reserve(drop=drop, buyer_id=bob.pk, quantity=1, idempotency_key="k").hold
    with pytest.raises(HoldNotActive):  # not Ann's
        holds.more_time(hold=lapsed, buyer_id=ann.pk)
    expire_in([lapsed.pk], -1)
    with pytest.raises(HoldNotActive):  # its time is up: too late to ask
        holds.more_time(hold=lapsed, buyer_id=bob.pk)
    assert list(Hold.objects.order_by("pk").values_list("more_time", flat=True)) == [0, 0]


def test_a_crowd_of_presses_gets_exactly_the_cap() -> None:
    drop = make_drop(slug="more-race", quantity=1, hold_seconds=300)
    buyer = make_buyer("more-race")
    hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=1, idempotency_key="k").hold

    def press() -> str:
        try:
            holds.more_time(hold=hold, buyer_id=buyer.pk)
        except MoreTimeUsed:
            return "used"
        return "more"

    results = run_concurrently([press] * 12, threads=12)

    answered = sorted(r for r in results if isinstance(r, str))  # an exception would be missing
    assert answered == ["more"] * MORE_TIME_MAX + ["used"] * (12 - MORE_TIME_MAX), results
    held = Hold.objects.get(pk=hold.pk)
    assert held.more_time == MORE_TIME_MAX and held.expires_at - hold.expires_at == timedelta(seconds=300)


def test_the_api_gives_more_time_and_refuses_garbage() -> None:
    drop = make_drop(slug="more-api", quantity=2, hold_seconds=120)
    ann = make_buyer("more-api")
    client = Client()
    client.force_login(ann)
    hold = holds.reserve(drop=drop, buyer_id=ann.pk, quantity=1, idempotency_key="k").hold

    assert client.get(f"/api/holds/{hold.pk}/more-time").status_code == 405
    assert client.post("/api/holds/999999/more-time").status_code == 404
    assert client.post("/api/holds/x%00/more-time").status_code == 404
    other = Client()
    other.force_login(make_buyer("more-other"))
    assert other.post(f"/api/holds/{hold.pk}/more-time").status_code == 404
    assert Hold.objects.get(pk=hold.pk).more_time == 0

    answers = [client.post(f"/api/holds/{hold.pk}/more-time") for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 409]
    assert answers[2].json()["error"] == "more_time_used"
    given = datetime.fromisoformat(answers[1].json()["expires_at"])
    assert given == Hold.objects.get(pk=hold.pk).expires_at == hold.expires_at + timedelta(seconds=120)
