from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING, TypeVar

import pytest
from django.utils import timezone

from admission import services, state
from admission.models import Ticket, Wave
from core import formatting
from holds.models import Hold
from shop.models import Drop
from tests.browser.helpers import join_from_the_link, off_the_loop
from tests.factories import make_buyer, make_drop

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

T = TypeVar("T")


def wave(drop_id: int, later_s: int) -> int:
    """A wave as if `later_s` seconds had passed (so the admitted who did not come count no more)."""
    done = off_the_loop(
        lambda: services.run_wave(
            Drop.objects.get(pk=drop_id), now=timezone.now() + timedelta(seconds=later_s), force=True
        )
    )
    assert done is not None
    return done.admitted_through


def position_is(page: Page, n: int) -> None:
    page.wait_for_function("n => document.querySelector('#position').textContent === String(n)", arg=n)


def test_two_buyers_watch_their_place_fall_live_and_the_first_reserves(
    live_daphne: str, browser: Browser
) -> None:
    # given a live drop of 2 units behind a waiting room, three buyers already in line
    drop = make_drop(
        slug="wr-live",
        product_name="Queue Shoe",
        quantity=2,
        per_buyer_limit=1,
        waiting_room=True,
        admission_percent=100,
    )
    off_the_loop(lambda: services.run_wave(Drop.objects.get(pk=drop.pk)))  # the start: an empty draw
    for name in ("early1", "early2", "early3"):
        services.join(drop=drop, buyer_id=make_buyer(name).pk)
    make_buyer("ann")
    make_buyer("bob")
    ann = browser.new_context().new_page()
    bob = browser.new_context().new_page()
    for page in (ann, bob):
        page.set_default_timeout(15_000)

    # when both join from the drop page's link
    join_from_the_link(ann, live_daphne, "ann")
    join_from_the_link(bob, live_daphne, "bob")
    for page in (ann, bob):
        page.wait_for_selector("#connection:text('Updating live')")
    assert ann.locator("#ticket").inner_text() == "#4" and bob.locator("#ticket").inner_text() == "#5"
    position_is(ann, 4)
    position_is(bob, 5)

    # then each wave moves them, without a reload
    assert wave(drop.pk, 200) == 2
    position_is(ann, 2)
    position_is(bob, 3)
    assert "1 person ahead of you" in ann.locator("#summary").inner_text()
    assert bob.locator("#progress").evaluate("el => [el.value, el.max]") == [2, 5]

    assert wave(drop.pk, 400) == 4
    ann.wait_for_selector("#buy-step:not([hidden])")
    position_is(bob, 1)
    assert ann.locator("#waiting").is_hidden() and "you are next" in bob.locator("#summary").inner_text()
    assert ann.locator("#admission-token").input_value()
    assert ann.evaluate("window.stayedOnThePage") and bob.evaluate("window.stayedOnThePage")

    # the first buyer reserves through the page
    ann.click("#buy")
    ann.wait_for_url(re.compile(r"/holds/\d+/$"))
    hold = Hold.objects.get(drop=drop)
    assert hold.buyer.username == "ann" and hold.state == "held"
    assert "It's yours for" in ann.content()

    # one unit is left and the early three did not come: the next wave lets the second in
    assert wave(drop.pk, 600) == 5
    bob.wait_for_selector("#buy-step:not([hidden])")
    assert bob.evaluate("window.stayedOnThePage")
    assert Ticket.objects.filter(drop=drop).count() == 5
    ann.context.close()
    bob.context.close()


# A socket that never opens, as behind a proxy that drops WebSockets.
BROKEN_SOCKETS = """
window.WebSocket = class {
  constructor() { setTimeout(() => this.onclose && this.onclose({code: 1006}), 20); }
  close() {}
};
"""


def test_without_a_socket_the_page_polls_and_still_reaches_the_buy_step(live_daphne: str, page: Page) -> None:
    drop = make_drop(slug="wr-poll", quantity=1, waiting_room=True, admission_percent=100)
    off_the_loop(lambda: services.run_wave(Drop.objects.get(pk=drop.pk)))
    services.join(drop=drop, buyer_id=make_buyer("first").pk)
    make_buyer("cara")
    page.add_init_script(BROKEN_SOCKETS)
    polls: list[str | None] = []  # who answered each poll: the edge ("hit") or Django (None)
    page.on(
        "response",
        lambda r: polls.append(r.headers.get("x-floodgate-edge")) if r.url.endswith("/queue") else None,
    )

    join_from_the_link(page, live_daphne, "cara", slug="wr-poll")
    page.wait_for_selector("#connection:text('Reconnecting')")
    position_is(page, 2)

    assert wave(drop.pk, 200) == 1
    position_is(page, 1)  # from the queue API, polled every few seconds
    assert wave(drop.pk, 400) == 2
    page.wait_for_selector("#buy-step:not([hidden])")
    assert page.evaluate("window.stayedOnThePage")
    # The page's polls carry the ticket cookie the page set: answered before Django.
    assert polls and polls[-1] == "hit", polls


def test_the_page_says_the_apis_range_and_moves_it_live(live_daphne: str, page: Page) -> None:
    # given a line that let in 20 tickets over the last two minutes (10 a minute), 30 ahead of cleo
    drop = make_drop(slug="wr-eta", quantity=30, waiting_room=True, admission_percent=100)
    off_the_loop(lambda: services.run_wave(Drop.objects.get(pk=drop.pk)))
    for n in range(30):
        services.join(drop=drop, buyer_id=make_buyer(f"eta{n}").pk)
    now = timezone.now()
    moments = [now - timedelta(seconds=5 * i) for i in range(20)]
    Wave.objects.bulk_create(
        Wave(drop=drop, at=at, admitted_through=0, admitted=1, available=1, held=0) for at in moments
    )
    off_the_loop(lambda: state.refresh([drop.pk], force=True))  # what the tick publishes
    make_buyer("cleo")
    join_from_the_link(page, live_daphne, "cleo", slug="wr-eta")

    # then the page's own estimate is the API's range in words (never a point, never "0")
    told = state.wait_range(31, 10.0)
    assert told is not None
    expected = formatting.wait(*told)
    assert expected == "between 2 and 4 minutes"
    page.wait_for_function("t => document.querySelector('#eta').textContent === t", arg=expected)

    # and as the line moves (30 let in: 25 a minute now, cleo next) the range moves with it, live
    assert wave(drop.pk, 0) == 30
    told = state.wait_range(1, 25.0)
    assert told is not None
    expected = formatting.wait(*told)
    assert expected == "under a minute"
    page.wait_for_function("t => document.querySelector('#eta').textContent === t", arg=expected)
    assert page.evaluate("window.stayedOnThePage")
