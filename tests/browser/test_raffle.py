"""A raffle's entrant learns their result on the page, live from the socket, and by e-mail."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import pytest
from django.core import mail
from django.utils import timezone

from admission import services, state
from checkout import outbox, raffles
from holds import services as holds
from sale import offers
from shop.models import Drop
from tests.browser.helpers import join_from_the_link, off_the_loop
from tests.factories import make_buyer, make_drop, start_now

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def draw(drop: Drop) -> None:
    """The entries' close (the start, moved to now) and the draw, then the offers it sends."""
    start_now(drop.pk)
    off_the_loop(lambda: services.run_wave(Drop.objects.get(pk=drop.pk)))
    off_the_loop(lambda: offers.offer_returns(Drop.objects.get(pk=drop.pk), wait=True))


def test_the_winner_sees_won_and_pays_from_the_page_the_reserve_sees_its_rank_then_lost(
    live_daphne: str, page: Page, browser: Browser
) -> None:
    drop = make_drop(
        slug="raffle-page",
        quantity=1,
        waiting_room=True,
        raffle=True,
        starts_at=timezone.now() + timedelta(minutes=10),
    )
    make_buyer("winnie")
    make_buyer("ross")
    page.set_default_timeout(15_000)
    join_from_the_link(page, live_daphne, "winnie", slug="raffle-page")
    context = browser.new_context()  # the other entrant's own cookies
    other = context.new_page()
    other.set_default_timeout(15_000)
    join_from_the_link(other, live_daphne, "ross", slug="raffle-page")
    for each in (page, other):
        each.wait_for_selector("#connection:text('Updating live')")
        assert "A raffle: entries close at" in each.inner_text("#raffle-result")

    # when: the entries close and the draw ranks the two
    draw(drop)
    ranks = {
        name: services.place(drop=drop, buyer_id=make_buyer_id(name)).number for name in ("winnie", "ross")
    }
    won, reserve = (page, other) if ranks["winnie"] == 1 else (other, page)

    # then: the winner's page says so with the hold to pay, the other's its rank on the reserve list
    won.wait_for_selector("#raffle-result [data-result-is=won]:not([hidden])")
    assert "You won." in won.inner_text("#raffle-result")
    assert won.locator("#offer").is_visible() and won.locator("#buy-step").is_hidden()
    reserve.wait_for_selector("#raffle-result [data-result-is=reserve]:not([hidden])")
    assert "On the reserve list, #2 in the draw" in reserve.inner_text("#raffle-result")
    for each in (won, reserve):
        assert each.evaluate("window.stayedOnThePage")

    # and the winner's e-mail has the hold's page to pay on
    mail.outbox.clear()
    assert off_the_loop(raffles.announce_raffle_results) == 1
    off_the_loop(outbox.relay_outbox)
    (message,) = mail.outbox
    ticket = services.own_ticket(drop=drop, buyer_id=make_buyer_id(winner(ranks)))
    assert ticket is not None
    hold = services.offer_of(ticket)
    assert hold is not None and f"/holds/{hold.hold}/" in message.body
    won.goto(f"{live_daphne}/holds/{hold.hold}/")  # the link the e-mail gives
    assert won.locator("#pay").is_visible()

    # when: the winner pays, nothing can reach the reserve: its page says lost, from the socket
    assert holds.confirm(hold_id=hold.hold)
    off_the_loop(lambda: state.refresh([drop.pk]))
    reserve.wait_for_selector("#raffle-result [data-result-is=lost]:not([hidden])")
    assert "Not won this time." in reserve.inner_text("#raffle-result")
    assert reserve.evaluate("window.stayedOnThePage")
    assert off_the_loop(raffles.announce_raffle_results) == 1
    off_the_loop(outbox.relay_outbox)
    decided = f"[Floodgate] The raffle of {drop.display_title} is decided"
    assert [m.subject for m in mail.outbox][1:] == [decided]
    context.close()


def winner(ranks: dict[str, int | None]) -> str:
    return next(name for name, rank in ranks.items() if rank == 1)


def make_buyer_id(username: str) -> int:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username=username).pk
