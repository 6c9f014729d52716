"""The drawn line's cut entries: an early joiner's page places itself by its draw key against the
broadcast's cut entries, and that place must be the one its number gives (admission/state.Cuts)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client, TestCase
from django.utils import timezone

from admission import draw, services, state
from admission.models import Ticket
from holds import services as holds
from shop.models import Drop
from tests.factories import make_drop, start_now

pytestmark = pytest.mark.django_db


def sides_by_key(message: dict) -> dict[int, str]:
    """Each early joiner's place as its page finds it from the message alone: in, unlikely, between."""

    def key(entry: int) -> bytes:
        return draw.entry_key(message["seed"], message["entries_sha256"], message["beacon"], entry)

    admitted = key(message["admitted_entry"]) if message["admitted_entry"] else None
    unlikely = key(message["unlikely_entry"]) if message["unlikely_entry"] else None
    sides = {}
    for entry in Ticket.objects.values_list("id", flat=True):  # every joiner here joined early
        own = key(entry)
        if admitted is not None and own <= admitted:
            sides[entry] = "in"
        elif unlikely is not None and own >= unlikely:
            sides[entry] = "unlikely"
        else:
            sides[entry] = "between"
    return sides


def drawn_now(drop: Drop) -> Drop:
    """The start, now (the claims go by the database's clock): the draw and its first wave."""
    start_now(drop.pk)
    drop = Drop.objects.select_related("product").get(pk=drop.pk)
    with TestCase.captureOnCommitCallbacks(execute=True):
        services.run_wave(drop)
    return drop


def sides_by_number(message: dict) -> dict[int, str]:
    """... and as the queue API's answer, which knows the number, says it."""
    sides = {}
    for entry, number in Ticket.objects.values_list("id", "number"):
        place = state.place_answer(
            message,
            entry=entry,
            number=number,
            admitted_through=message["admitted_through"],
            drawn=True,
            token=None,
        )
        sides[entry] = "in" if place.admitted else "unlikely" if place.unlikely else "between"
    return sides


def test_a_page_placed_by_its_key_is_where_its_number_puts_it(make_buyers) -> None:
    drop = make_drop(
        slug="cuts",
        quantity=20,
        per_buyer_limit=1,
        waiting_room=True,
        admission_percent=100,
        starts_at=timezone.now() + timedelta(minutes=5),
    )
    buyers = make_buyers(200, prefix="cut")
    for buyer in buyers:
        services.join(drop=drop, buyer_id=buyer)
    before = state.compute([drop])[0].queue_json()
    assert before["seed"] is None and before["admitted_entry"] is None and before["unlikely_entry"] is None

    drop = drawn_now(drop)  # the draw and a first wave of 20
    message = state.compute([drop])[0].queue_json()
    assert message["admitted_through"] == 20
    # 20 admitted who have not bought, 20 left: every ticket after the wave is unlikely
    assert message["unlikely_from"] == 21
    assert Ticket.objects.get(pk=message["unlikely_entry"]).number == 21
    assert Ticket.objects.get(pk=message["admitted_entry"]).number == 20
    by_key = sides_by_key(message)
    assert by_key == sides_by_number(message)
    assert list(by_key.values()).count("in") == 20 and "between" not in by_key.values()

    # seven of the admitted reserve: 13 unclaimed ahead of the line, 13 left and 7 held that may
    # come back: tickets 21-27 are no longer unlikely, the cut moves to 20 + (13 + 7 - 13 + 1)
    for ticket in Ticket.objects.filter(number__lte=7):
        holds.reserve(drop=drop, buyer_id=ticket.buyer_id, quantity=1, idempotency_key=f"k{ticket.pk}")
    moved = state.compute([drop])[0].queue_json()
    assert moved["unlikely_from"] == 28
    by_key = sides_by_key(moved)
    assert by_key == sides_by_number(moved)
    assert list(by_key.values()).count("between") == 7

    # The queue API's answer carries the cuts too, and its own "unlikely" agrees with them.
    waiting = Ticket.objects.select_related("buyer").get(number=30)
    client = Client()
    client.force_login(waiting.buyer)
    answer = client.get("/api/drops/cuts/queue").json()
    assert answer["ticket"] == 30 and answer["entries_sha256"] == moved["entries_sha256"]
    assert answer["unlikely"] is (answer["ticket"] >= answer["unlikely_from"]) is True


def test_no_cut_where_no_drawn_entry_is_unlikely(make_buyers) -> None:
    drop = make_drop(
        slug="cuts-few", quantity=50, waiting_room=True, starts_at=timezone.now() + timedelta(minutes=5)
    )
    for buyer in make_buyers(30, prefix="few"):
        services.join(drop=drop, buyer_id=buyer)
    drawn_now(drop)
    message = state.compute([drop])[0].queue_json()
    assert message["unlikely_entry"] is None and message["unlikely_from"] is None
    assert Ticket.objects.get(pk=message["admitted_entry"]).number == message["admitted_through"]
    assert set(sides_by_key(message).values()) <= {"in", "between"}
    assert sides_by_key(message) == sides_by_number(message)


@pytest.mark.parametrize(
    ("remaining", "held", "unclaimed"), [(0, 0, 0), (5, 0, 0), (5, 3, 2), (1, 0, 9), (0, 4, 4), (7, 7, 0)]
)
def test_first_unlikely_is_where_unlikely_turns(remaining: int, held: int, unclaimed: int) -> None:
    through = 40
    first = state.first_unlikely(
        admitted_through=through, remaining=remaining, held=held, admitted_unclaimed=unclaimed
    )
    said = [
        state.unlikely(number - through, remaining=remaining, held=held, admitted_unclaimed=unclaimed)
        for number in range(through + 1, through + 40)
    ]
    assert said == [number >= first for number in range(through + 1, through + 40)]
