"""The waiting-room page tells a buyer the truth as the socket brings it: "unlikely" once as many
wait ahead as units could reach them, and "sold out, the line is closed" once none is left or held."""

from __future__ import annotations

import itertools
import time
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING

import pytest
from django.utils import timezone

from admission import draw, services, state
from admission.models import Queue, Ticket
from holds import services as holds
from sale import offers
from shop.models import Drop
from tests.browser.helpers import join_from_the_link, off_the_loop
from tests.factories import make_buyer, make_drop, start_now

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Request

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def sell_one(drop: Drop, name: str) -> None:
    hold = holds.reserve(drop=drop, buyer_id=make_buyer(name).pk, quantity=1, idempotency_key=name).hold
    assert holds.confirm(hold_id=hold.pk)
    off_the_loop(lambda: state.refresh([drop.pk]))  # what the tick publishes: the socket pushes it


def test_the_page_says_unlikely_then_closes_the_line_when_sold_out(live_daphne: str, page: Page) -> None:
    drop = make_drop(slug="truth", quantity=3, per_buyer_limit=1, waiting_room=True, admission_percent=100)
    off_the_loop(lambda: services.run_wave(Drop.objects.get(pk=drop.pk)))  # the start: an empty draw
    services.join(drop=drop, buyer_id=make_buyer("first-in-line").pk)
    make_buyer("cara")
    page.set_default_timeout(15_000)
    join_from_the_link(page, live_daphne, "cara", slug="truth")
    page.wait_for_selector("#connection:text('Updating live')")

    # 1 ahead, 3 units: likely enough, nothing said
    assert page.locator("#ticket").inner_text() == "#2"
    assert page.locator("#unlikely").is_hidden()
    assert page.locator("#queue-state [data-when=admitting]").is_visible()

    # two units sold elsewhere: 1 ahead, 1 unit left
    sell_one(drop, "x1")
    sell_one(drop, "x2")
    page.wait_for_selector("#unlikely:not([hidden])")
    assert "1 ahead of you, 1 unit left: you are unlikely to get one" in page.inner_text("#unlikely")
    assert page.locator("#waiting").is_visible()
    assert page.locator("#queue-state [data-when=sold_out]").is_hidden()

    # the last unit sold, none held: the line is closed, no more "wait"
    sell_one(drop, "x3")
    page.wait_for_selector("#queue-state [data-when=sold_out]:not([hidden])")
    assert "Sold out: the line is closed." in page.inner_text("#queue-state")
    assert page.locator("#waiting").is_hidden()
    assert page.evaluate("window.stayedOnThePage")


def test_a_returned_unit_is_offered_on_the_next_buyers_page_and_paid_from_there(
    live_daphne: str, page: Page
) -> None:
    drop = make_drop(slug="comes-back", quantity=1, per_buyer_limit=1, waiting_room=True)
    off_the_loop(lambda: services.run_wave(Drop.objects.get(pk=drop.pk)))  # the start: an empty draw
    first = make_buyer("first-holder").pk
    services.join(drop=drop, buyer_id=first)
    hold = holds.reserve(drop=drop, buyer_id=first, quantity=1, idempotency_key="k").hold
    make_buyer("dana")
    page.set_default_timeout(15_000)
    join_from_the_link(page, live_daphne, "dana", slug="comes-back")
    page.wait_for_selector("#connection:text('Updating live')")
    assert page.locator("#ticket").inner_text() == "#2"
    assert page.locator("#offer").is_hidden()

    # The holder lets it go; beat's offer step gives it to ticket 2, and the socket brings the news.
    holds.release(hold_id=hold.pk, buyer_id=first)
    assert off_the_loop(lambda: offers.offer_returns(Drop.objects.get(pk=drop.pk))) == 1
    page.wait_for_selector("#offer:not([hidden])")
    assert page.get_by_role("heading", name="A unit came back: it is yours").is_visible()
    assert "Start paying before then and it stays yours for 8 minutes" in page.inner_text("#offer")
    assert page.locator("#queue-state").is_hidden()  # not "all held, stay in line" beside it
    assert page.locator("#buy-step").is_hidden()
    assert page.evaluate("window.stayedOnThePage")

    page.get_by_role("link", name="Pay now").click()
    page.wait_for_url(f"**/holds/{offered_hold(drop)}/")
    assert "It's yours for" in page.inner_text("h1")
    assert page.locator("#pay").is_visible()
    assert "it goes to the next buyer in line" in page.inner_text("article.hold")


def offered_hold(drop: Drop) -> int:
    ticket = services.own_ticket(drop=drop, buyer_id=make_buyer_id("dana"))
    assert ticket is not None
    offer = services.offer_of(ticket)
    assert offer is not None
    return offer.hold


def make_buyer_id(username: str) -> int:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username=username).pk


def test_an_admitted_buyer_holding_a_token_hears_of_an_offer_within_a_second_or_two(
    live_daphne: str, page: Page
) -> None:
    # given ticket 2, admitted with a token, while ticket 1 holds every unit
    drop = make_drop(
        slug="offer-heard", quantity=2, per_buyer_limit=2, waiting_room=True, admission_percent=100
    )
    off_the_loop(lambda: services.run_wave(Drop.objects.get(pk=drop.pk)))  # the start: an empty draw
    first = make_buyer("holds-both").pk
    services.join(drop=drop, buyer_id=first)
    make_buyer("erin")
    page.set_default_timeout(15_000)
    join_from_the_link(page, live_daphne, "erin", slug="offer-heard")
    page.wait_for_selector("#connection:text('Updating live')")
    off_the_loop(lambda: services.run_wave(Drop.objects.get(pk=drop.pk), force=True))
    page.wait_for_selector("#buy-step:not([hidden])")  # admitted: the token is on the page
    hold = holds.reserve(drop=drop, buyer_id=first, quantity=2, idempotency_key="both").hold

    # when ticket 1 lets them go and the offer step gives one to ticket 2
    holds.release(hold_id=hold.pk, buyer_id=first)
    assert off_the_loop(lambda: offers.offer_returns(Drop.objects.get(pk=drop.pk))) >= 1

    # then the page shows the offer from the socket's news, not at the token's next refresh (60 s)
    page.wait_for_selector("#offer:not([hidden])", timeout=5_000)
    assert page.get_by_role("heading", name="A unit came back: it is yours").is_visible()


def test_a_page_learns_from_the_draws_push_alone_whether_it_is_in_or_unlikely(
    live_daphne: str, browser: Browser
) -> None:
    # given a 5-unit drop whose line 20 buyers joined before the start, and two more joining by the page
    drop = make_drop(
        slug="by-key",
        quantity=5,
        per_buyer_limit=1,
        waiting_room=True,
        admission_percent=100,
        starts_at=timezone.now() + timedelta(minutes=5),
    )
    for i in range(20):
        services.join(drop=drop, buyer_id=make_buyer(f"early-{i}").pk)
    pages = {name: browser.new_context().new_page() for name in ("ann", "bob")}
    asked: dict[str, list[float]] = {name: [] for name in pages}

    def note(name: str, request: Request) -> None:  # when each page asked for its place
        if request.method == "GET" and request.url.endswith("/api/drops/by-key/queue"):
            asked[name].append(time.monotonic())

    for name, page in pages.items():
        make_buyer(name)
        page.set_default_timeout(15_000)
        page.on("request", partial(note, name))
        join_from_the_link(page, live_daphne, name, slug="by-key")
        page.wait_for_selector("#connection:text('Updating live')")
    # a seed that draws ann into the first wave and bob behind it (a real one is random, committed
    # before the first join; the test picks one so that both sides are shown)
    entry = {t.buyer.username: t.pk for t in Ticket.objects.filter(drop=drop).select_related("buyer")}
    entries = sorted(entry.values())
    seed = next(
        s
        for s in (f"seed-{i}" for i in itertools.count())
        if (order := draw.draw_order(s, entries)).index(entry["ann"]) < 5 and order.index(entry["bob"]) >= 5
    )
    Queue.objects.filter(pk=drop.pk).update(seed=seed, seed_sha256=draw.seed_digest(seed))
    for times in asked.values():
        times.clear()

    # when the drop starts: the draw and a first wave of 5, one broadcast to every page
    start_now(drop.pk)
    drawn = time.monotonic()
    off_the_loop(lambda: services.run_wave(Drop.objects.get(pk=drop.pk)))

    # then bob's page says "unlikely" from the push, before asking anything
    bob = pages["bob"]
    bob.wait_for_selector("#unlikely:not([hidden])")
    assert asked["bob"] == []
    assert "At least 5 ahead of you, 5 units left: you are unlikely to get one" in bob.inner_text("#unlikely")
    assert "#6 or later" in bob.inner_text("#ticket-line")
    # ann's page asks at once: it is in, and the buy step opens
    pages["ann"].wait_for_selector("#buy-step:not([hidden])")
    assert asked["ann"] and asked["ann"][0] - drawn < 2
    # bob's page asks for its exact number only after the first wave has had its moment
    number = Ticket.objects.get(pk=entry["bob"]).number
    bob.wait_for_selector(f"#ticket:text('#{number}')")
    assert asked["bob"] and asked["bob"][0] - drawn >= 4.5
    assert "ahead of you" in bob.inner_text("#unlikely")
    for page in pages.values():
        page.context.close()
