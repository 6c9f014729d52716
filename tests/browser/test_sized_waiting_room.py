"""A drop sold in sizes behind a waiting room, in Chromium: the turn offers the sizes left with their
own prices, a size taken while the buyer chooses is said in place and disabled, and the page
offers only what the server would do in each state, through a pause and its resume."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import httpx
import pytest

from admission import services
from catalogue.services import NewVariant
from checkout.models import Order
from holds import services as holds
from holds.models import Hold
from ops import switch
from sale import offers
from shop.models import Drop
from tests.browser.helpers import join_from_the_link, off_the_loop
from tests.conftest import PROVIDER_SECRET, Worker
from tests.factories import make_buyer, make_drop, size_of

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def reliable_provider(payment_provider: str) -> None:
    httpx.post(
        f"{payment_provider}/api/config",
        json={"latency_ms": 100, "failure_rate": 0, "duplicates": 1, "late_seconds": 0},
        headers={"Authorization": f"Bearer {PROVIDER_SECRET}"},
    ).raise_for_status()


def sized_room(slug: str, sizes: list[NewVariant]) -> Drop:
    """A live waiting room of these sizes (S at the product's €129.00), drawn empty: joiners line up."""
    drop = make_drop(
        slug=slug,
        product_name="Runner",
        price_minor=12900,
        quantity=sum(v.quantity for v in sizes),
        variants=sizes,
        per_buyer_limit=1,
        waiting_room=True,
        admission_percent=100,
    )
    off_the_loop(lambda: services.run_wave(Drop.objects.get(pk=drop.pk)))  # the start: an empty draw
    return drop


def admit(drop: Drop) -> None:
    off_the_loop(lambda: services.run_wave(Drop.objects.get(pk=drop.pk), force=True))


def someone_takes(drop: Drop, size: str, name: str) -> Hold:
    variant = drop.variants.get(name=size)
    return holds.reserve(
        drop=drop, buyer_id=make_buyer(name).pk, quantity=1, idempotency_key=name, variant=variant
    ).hold


def set_paused(drop: Drop, paused: bool) -> None:
    fresh = Drop.objects.get(pk=drop.pk)
    if paused:
        off_the_loop(lambda: switch.pause_drop(drop=fresh, actor_id=None, reason="checking the stock"))
    else:
        off_the_loop(lambda: switch.resume_drop(drop=fresh, actor_id=None))


def test_size_m_through_the_waiting_room_from_join_to_order(
    live_daphne: str, payment_provider: str, celery_worker: Worker, page: Page
) -> None:
    drop = sized_room("wr-sized", [NewVariant("S", 2), NewVariant("M", 2, 13900)])
    make_buyer("mia")

    # before the turn, the page already says what each size costs
    join_from_the_link(page, live_daphne, "mia", slug="wr-sized")
    assert "€129.00 \N{EN DASH} €139.00, by size" in page.inner_text(".summary")
    admit(drop)
    page.wait_for_selector("#buy-step:not([hidden])")

    # the turn offers every size with its own price and what is left of it
    picker = page.locator("#buy-step #variant-picker")
    assert picker.locator("label[data-variant=S]").inner_text().split() == ["S", "€129.00", "2", "left"]
    assert picker.locator("label[data-variant=M]").inner_text().split() == ["M", "€139.00", "2", "left"]
    page.click("#buy-step label[data-variant=M]")
    page.click("#buy")
    page.wait_for_url(re.compile(r"/holds/\d+/$"))
    assert page.locator("#hold-variant").inner_text() == "M"
    assert page.locator("#pay").inner_text() == "Order with obligation to pay · €139.00"

    page.click("#pay")
    page.wait_for_url(re.compile(re.escape(payment_provider) + r"/pay/"))
    page.click("#pay")
    page.wait_for_url(re.compile(r"/orders/\d+/$"))
    page.wait_for_selector("#order-state[data-state=confirmed]", timeout=30_000)
    order = Order.objects.get(hold__buyer__username="mia")
    assert (size_of(order.hold), order.amount_minor) == ("M", 13900)


def test_an_offered_unit_of_the_wrong_size_is_changed_to_the_buyers_and_paid_for(
    live_daphne: str, payment_provider: str, celery_worker: Worker, page: Page
) -> None:
    # given the S that came back is offered to noa, while an M is still on sale
    drop = sized_room("wr-swap", [NewVariant("S", 1), NewVariant("M", 2, 13900)])
    first = make_buyer("swap-first").pk
    services.join(drop=drop, buyer_id=first)
    make_buyer("noa")
    join_from_the_link(page, live_daphne, "noa", slug="wr-swap")
    admit(drop)  # ticket 1 only: noa is ticket 2 and waits (one unit per wave's worth: S and M left)
    held = holds.reserve(
        drop=drop, buyer_id=first, quantity=1, idempotency_key="first", variant=drop.variants.get(name="S")
    ).hold
    holds.release(hold_id=held.pk, buyer_id=first)
    assert off_the_loop(lambda: offers.offer_returns(Drop.objects.get(pk=drop.pk))) == 1
    page.wait_for_selector("#offer:not([hidden])")
    assert page.inner_text("#offer-variant") == "S"

    # when noa opens it and chooses M, at M's own price
    page.click("#offer-pay")
    page.wait_for_url(re.compile(r"/holds/\d+/$"))
    sizes = page.locator("#size-form")
    assert sizes.locator("label[data-variant=S]").inner_text().split() == ["S", "€129.00", "yours", "now"]
    assert sizes.locator("label[data-variant=M]").inner_text().split() == ["M", "€139.00", "2", "left"]
    sizes.locator("label[data-variant=M]").click()
    page.click("#change-size")

    # then the hold is an M, and the order is
    page.wait_for_selector("#hold-variant:text('M')")
    assert page.locator("#pay").inner_text() == "Order with obligation to pay · €139.00"
    page.click("#pay")
    page.wait_for_url(re.compile(re.escape(payment_provider) + r"/pay/"))
    page.click("#pay")
    page.wait_for_url(re.compile(r"/orders/\d+/$"))
    page.wait_for_selector("#order-state[data-state=confirmed]", timeout=30_000)
    order = Order.objects.get(hold__buyer__username="noa")
    assert (size_of(order.hold), order.amount_minor) == ("M", 13900)


def test_m_sells_out_while_the_buyer_is_choosing(live_daphne: str, page: Page) -> None:
    drop = sized_room("wr-gone", [NewVariant("S", 1), NewVariant("M", 1), NewVariant("L", 1)])
    make_buyer("noor")
    join_from_the_link(page, live_daphne, "noor", slug="wr-gone")
    admit(drop)
    page.wait_for_selector("#buy-step:not([hidden])")
    assert not page.locator("#buy-step #variant-picker input[value=M]").is_disabled()

    # M goes to someone else while noor looks; noor picks it and is told in place
    someone_takes(drop, "M", "quick")
    page.click("#buy-step label[data-variant=M]")
    page.click("#buy")
    page.wait_for_selector(".buy-status:text('M is sold out')")
    assert "still on sale: S, L" in page.inner_text("#buy-step .buy-status")
    assert page.locator("#buy-step #variant-picker input[value=M]").is_disabled()
    assert page.evaluate("window.stayedOnThePage")  # still on the waiting page, still their turn

    # L goes too without noor pressing anything: the page's watch disables it
    someone_takes(drop, "L", "quicker")
    page.wait_for_selector("#buy-step #variant-picker input[value=L]:disabled", timeout=15_000)
    assert "sold out" in page.inner_text("#buy-step label[data-variant=L]")

    page.click("#buy-step label[data-variant=S]")
    page.click("#buy")
    page.wait_for_url(re.compile(r"/holds/\d+/$"))
    assert size_of(Hold.objects.get(buyer__username="noor")) == "S"
    assert not Hold.objects.filter(buyer__username="noor", variant__name__in=["M", "L"]).exists()


def test_a_pause_in_each_state_offers_nothing_the_server_refuses(live_daphne: str, browser: Browser) -> None:
    drop = sized_room("wr-pause", [NewVariant("S", 1), NewVariant("M", 1)])
    first = make_buyer("first-in-line").pk
    services.join(drop=drop, buyer_id=first)
    pages = {}
    for name in ("ola", "pia"):
        make_buyer(name)
        pages[name] = browser.new_context().new_page()
        pages[name].set_default_timeout(15_000)
        join_from_the_link(pages[name], live_daphne, name, slug="wr-pause")
    ola, pia = pages["ola"], pages["pia"]  # tickets 2 and 3 behind ticket 1

    # waiting: the pause is said, nothing to press; the resume takes it back
    set_paused(drop, True)
    for page in (ola, pia):
        page.wait_for_selector("#queue-state [data-when=paused]:not([hidden])")
        assert page.locator("#buy-step").is_hidden()
    set_paused(drop, False)
    ola.wait_for_selector("#queue-state [data-when=paused]", state="hidden")

    # your turn (ticket 1 and ola let in), then paused: the turn is kept, Reserve is not offered
    admit(drop)
    ola.wait_for_selector("#buy-step:not([hidden])")
    set_paused(drop, True)
    ola.wait_for_selector("#turn-paused:not([hidden])")
    assert ola.locator("#buy").is_hidden()
    assert ola.locator("#queue-state [data-when=paused]").is_visible()
    assert ola.locator("#buy-step #variant-picker").is_visible()  # the choice is kept while paused
    set_paused(drop, False)
    ola.wait_for_selector("#buy:not([hidden])")
    assert ola.locator("#turn-paused").is_hidden()

    # offered: ticket 1 takes S, ola takes M and lets it go; the unit is offered to pia (ticket 3)
    someone_takes_as(drop, "S", first)
    ola.click("#buy-step label[data-variant=M]")
    ola.click("#buy")
    ola.wait_for_url(re.compile(r"/holds/\d+/$"))
    held = Hold.objects.get(buyer__username="ola")
    holds.release(hold_id=held.pk, buyer_id=held.buyer_id)
    assert off_the_loop(lambda: offers.offer_returns(Drop.objects.get(pk=drop.pk))) == 1
    pia.wait_for_selector("#offer:not([hidden])")
    assert pia.inner_text("#offer-variant") == "M"
    set_paused(drop, True)
    pia.wait_for_timeout(1500)  # the pause's broadcast has come (the banner test above waits on it)
    # paying an offer goes on through a pause (only new claims stop): the offer stays, no Reserve
    assert pia.locator("#offer-pay").is_visible()
    assert pia.locator("#buy-step").is_hidden()
    pia.click("#offer-pay")
    pia.wait_for_url(re.compile(r"/holds/\d+/$"))
    assert pia.locator("#pay").is_enabled()
    set_paused(drop, False)

    # sold out: nothing is left or held, the turn is gone from every page
    ola.goto(f"{live_daphne}/drops/wr-pause/queue/")
    pia_hold = Hold.objects.get(buyer__username="pia")
    assert holds.confirm(hold_id=pia_hold.pk)
    assert holds.confirm(hold_id=Hold.objects.get(buyer_id=first).pk)
    off_the_loop(lambda: services.run_wave(Drop.objects.get(pk=drop.pk), force=True))
    ola.wait_for_selector("#queue-state [data-when=sold_out]:not([hidden])")
    assert ola.locator("#buy-step").is_hidden()
    for page in pages.values():
        page.context.close()


def someone_takes_as(drop: Drop, size: str, buyer_id: int) -> None:
    variant = drop.variants.get(name=size)
    holds.reserve(drop=drop, buyer_id=buyer_id, quantity=1, idempotency_key=f"as-{buyer_id}", variant=variant)
