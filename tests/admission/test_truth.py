"""Losers told the truth early: "unlikely" once a ticket waits behind as many buyers as units that
could reach it (the same at the edge and in Django), the line closed once all is sold and none held,
and a place kept by a buyer who leaves and comes back."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from admission import state
from admission.models import Ticket
from holds.services import confirm, reserve
from shop.models import Drop
from tests import harness
from tests.factories import make_buyer
from tests.harness import VOLATILE, admit, django_poll, join, poll, room, without

pytestmark = pytest.mark.django_db(transaction=True)

bearer, EDGE = harness.bearer, harness.EDGE


def unlikely_at_edge_and_in_django(auths: list[dict[str, str]], joined: list[dict[str, Any]]) -> list[bool]:
    at_edge = [poll("room", auth, j["queue_ticket"]) for auth, j in zip(auths, joined, strict=True)]
    from_django = [django_poll("room", auth) for auth in auths]
    assert all(r.edge for r in at_edge) and not any(r.edge for r in from_django)
    for edge, django in zip(at_edge, from_django, strict=True):
        assert without(edge.json(), *VOLATILE) == without(django.json(), *VOLATILE)
    return [r.json()["unlikely"] for r in at_edge]


def sell(drop: Drop, buyer_id: int) -> int:
    hold = reserve(drop=drop, buyer_id=buyer_id, quantity=1, idempotency_key=f"k{buyer_id}").hold
    return hold.pk


def buyer(username: str) -> int:
    return get_user_model().objects.get(username=username).pk


def page_of(username: str, path: str = "/drops/room/queue/") -> str:
    client = Client()
    client.force_login(get_user_model().objects.get(username=username))
    return client.get(path).content.decode()


def test_unlikely_once_as_many_wait_ahead_as_units_could_come_back(work: harness.DjangoWork) -> None:
    drop = room(quantity=2)
    auths = [bearer(f"u{i}") for i in range(6)]
    joined = [join("room", auth) for auth in auths]
    # tickets 1, 2 in; 3..6 wait with 0..3 ahead, 2 units left, and the two let in have not bought
    # yet: they come first, so even the next in line waits behind as many buyers as units
    assert admit(drop) == 2
    assert unlikely_at_edge_and_in_django(auths, joined) == [False, False, True, True, True, True]

    # one admitted buyer holds a unit: it may come back, so it still counts, and they are no
    # longer ahead of anyone: the next in line waits behind one buyer for two units
    hold = sell(drop, buyer("u0"))
    state.refresh([drop.pk])
    EDGE.forget()
    assert unlikely_at_edge_and_in_django(auths, joined) == [False, False, False, True, True, True]
    # once sold it cannot: the next in line is now behind as many as there are units
    assert confirm(hold_id=hold)
    state.refresh([drop.pk])
    EDGE.forget()
    assert unlikely_at_edge_and_in_django(auths, joined) == [False, False, True, True, True, True]


CLOSED = "Sold out: the line is closed."


def test_the_line_closes_once_everything_is_sold_and_none_is_held(work: harness.DjangoWork) -> None:
    drop = room(quantity=2)
    auths = [bearer(f"s{i}") for i in range(4)]
    joined = [join("room", auth) for auth in auths]
    admit(drop)
    make_buyer("newcomer")
    first, second = sell(drop, buyer("s0")), sell(drop, buyer("s1"))
    assert confirm(hold_id=first)
    state.refresh([drop.pk])
    EDGE.forget()
    # control: one unit still held may come back, so the line stays open, also to a newcomer
    assert join("room", bearer("early-newcomer"))["ticket"] == 5
    waiting = poll("room", auths[2], joined[2]["queue_ticket"]).json()
    assert waiting["state"] == "all_held"
    assert 'data-when="sold_out" hidden>' in page_of("s2") and CLOSED not in page_of("newcomer")
    assert 'id="waiting" aria-labelledby="ticket-line">' in page_of("s2")

    # when the last unit is sold (none held)
    assert confirm(hold_id=second)
    state.refresh([drop.pk])
    EDGE.forget()

    # then the API says sold_out and unlikely to everyone waiting, at the edge as in Django
    assert unlikely_at_edge_and_in_django(auths[2:], joined[2:]) == [True, True]
    assert poll("room", auths[2], joined[2]["queue_ticket"]).json()["state"] == "sold_out"
    # the page says the line is closed and no longer shows a place to wait in
    html = page_of("s2")
    assert CLOSED in html and 'data-when="sold_out">' in html
    assert 'id="waiting" aria-labelledby="ticket-line" hidden>' in html
    # and a newcomer is not offered a place in a closed line
    joining = page_of("newcomer")
    assert CLOSED in joining and "Join the waiting room" not in joining
    late = bearer("late")
    refused = harness.run(lambda: harness.call("POST", "/api/drops/room/queue", headers=late))
    assert (refused.status, refused.json()["error"]) == (409, "sold_out")
    assert "the line is closed" in refused.json()["detail"]
    assert not Ticket.objects.filter(drop=drop, buyer__username="late").exists()
    # while one already in line keeps their ticket
    assert join("room", auths[3])["ticket"] == joined[3]["ticket"]


def test_a_buyer_who_leaves_and_comes_back_keeps_their_place(work: harness.DjangoWork) -> None:
    drop = room(quantity=1)
    auths = [bearer(f"r{i}") for i in range(5)]
    joined = [join("room", auth) for auth in auths]
    admit(drop)
    before = joined[3]
    # the buyer closes the page; others join behind them; a wave passes
    for auth in [bearer(f"r{i}") for i in range(5, 8)]:
        join("room", auth)
    # they come back from another device: a new session, no queue ticket
    again = Client()
    again.force_login(get_user_model().objects.get(username="r3"))
    looked = again.get("/api/drops/room/queue").json()
    rejoined = again.post("/api/drops/room/queue").json()
    assert looked["ticket"] == rejoined["ticket"] == before["ticket"] == 4
    assert looked["entry"] == before["entry"]
    assert looked["position"] == rejoined["position"] == 3
    assert "#4" in page_of("r3")
