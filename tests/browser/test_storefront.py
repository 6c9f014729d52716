"""The shop as a buyer sees it: on a phone, choosing a seat, the shop's own 404."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING

import httpx
import pytest
from django.utils import timezone

from catalogue.services import NewVariant
from checkout.models import Order
from holds.models import Hold
from tests.conftest import PROVIDER_SECRET, Worker
from tests.factories import make_buyer, make_drop, size_of

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FITS = "document.documentElement.scrollWidth <= window.innerWidth"


@pytest.fixture(autouse=True)
def reliable_provider(payment_provider: str) -> None:
    httpx.post(
        f"{payment_provider}/api/config",
        json={"latency_ms": 100, "failure_rate": 0, "duplicates": 1, "late_seconds": 0},
        headers={"Authorization": f"Bearer {PROVIDER_SECRET}"},
    ).raise_for_status()


def log_in(page: Page, base: str, username: str, then: str) -> None:
    page.goto(f"{base}/accounts/login/?next={then}")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", "correct horse battery")
    page.locator("main form button[type=submit]").click()  # "Log in", or "Anmelden" for a German browser
    page.wait_for_url(re.compile(re.escape(then) + "$"))


def fits_the_phone(page: Page) -> None:
    assert page.evaluate(FITS), f"{page.url} scrolls sideways on a 390 px phone"


def test_on_a_phone_drop_waiting_room_hold_and_order_fit_and_speak_the_buyers_format(
    live_daphne: str, payment_provider: str, celery_worker: Worker, phone: Page
) -> None:
    make_drop(
        slug="phone-soon",
        product_name="Queue Cap",
        quantity=50,
        waiting_room=True,
        starts_at=timezone.now() + timedelta(minutes=5),
    )
    drop = make_drop(slug="phone-now", product_name="Pocket Runner", quantity=5, price_minor=12900)
    make_buyer("pia")
    log_in(phone, live_daphne, "pia", "/drops/phone-now/")

    # the drop: a picture, the price as a German browser writes it, minutes in its words
    fits_the_phone(phone)
    assert phone.locator("#price").inner_text() == "129,00\xa0€"
    assert phone.evaluate("document.querySelector('img.hero').naturalWidth") > 0
    facts = phone.locator(".facts").inner_text()
    assert "8 Minuten" in facts and " s " not in facts and "5 Stück" in facts
    assert phone.locator("time[data-local] + .local-time").count() >= 1  # Berlin time beside UTC
    phone.select_option("select[name=quantity]", "2")
    phone.click("#buy")

    # the hold: the total, not the unit price times two
    phone.wait_for_url(re.compile(r"/holds/\d+/$"))
    fits_the_phone(phone)
    assert phone.locator("#pay").inner_text() == "Zahlungspflichtig bestellen · 258,00\xa0€"
    assert phone.locator("#hold-items").inner_text().startswith("2 Stück")

    # back on the drop page the running hold is shown instead of Reserve
    phone.goto(f"{live_daphne}/drops/phone-now/")
    assert phone.locator("#buy").count() == 0
    assert "Sie haben 2 Stück reserviert" in phone.locator("#your-hold").inner_text()
    phone.click("#to-hold")
    phone.click("#pay")
    phone.wait_for_url(re.compile(re.escape(payment_provider) + r"/pay/"))
    phone.click("#pay")

    # the order
    phone.wait_for_url(re.compile(r"/orders/\d+/$"))
    phone.wait_for_selector("#order-state[data-state=confirmed]", timeout=30_000)
    fits_the_phone(phone)
    assert phone.locator("#order-total").inner_text() == "258,00\xa0€"
    phone.goto(f"{live_daphne}/orders/")
    fits_the_phone(phone)
    assert "258,00\xa0€" in phone.locator("article").first.inner_text()
    assert Order.objects.get(drop=drop).amount_minor == 25800

    # the waiting room of a drop that opens later
    phone.goto(f"{live_daphne}/drops/phone-soon/")
    fits_the_phone(phone)
    phone.click("#join-queue")
    phone.wait_for_url(re.compile(r"/drops/phone-soon/queue/$"))
    fits_the_phone(phone)
    assert phone.locator("#queue-state [data-when='scheduled']").is_visible()
    assert "noch 50 Stück" in phone.locator("#remaining").inner_text()


def test_a_buyer_chooses_a_seat_and_the_order_names_it(
    live_daphne: str, payment_provider: str, celery_worker: Worker, page: Page
) -> None:
    drop = make_drop(
        slug="seats",
        product_name="Front Row",
        quantity=6,
        mode="units",
        unit_labels=["A1", "A2", "A3", "B1", "B2", "B3"],
        price_minor=5000,
    )
    make_buyer("sam")
    log_in(page, live_daphne, "sam", "/drops/seats/")

    # when the buyer picks B2 from the seat picker
    page.locator("#seat-picker label:has-text('B2')").click()
    page.click("#buy")

    # then the hold, the order and the order list say B2
    page.wait_for_url(re.compile(r"/holds/\d+/$"))
    assert page.locator("#hold-seats").inner_text() == "seat B2"
    assert list(Hold.objects.get(drop=drop).units.values_list("label", flat=True)) == ["B2"]
    page.click("#pay")
    page.wait_for_url(re.compile(re.escape(payment_provider) + r"/pay/"))
    page.click("#pay")
    page.wait_for_url(re.compile(r"/orders/\d+/$"))
    page.wait_for_selector("#order-state[data-state=confirmed]", timeout=30_000)
    assert page.locator("#order-seats").inner_text() == "seat B2"
    assert page.locator("#order-total").inner_text() == "€50.00"
    page.goto(f"{live_daphne}/orders/")
    assert "Seat B2" in page.locator("article").first.inner_text()

    # and the picker shows B2 taken from now on
    page.goto(f"{live_daphne}/drops/seats/")
    assert page.locator("#seat-picker input[value=B2]").is_disabled()
    assert page.locator("#seat-picker input[value=B3]").is_enabled()


def test_a_seat_in_a_drop_in_sizes_picks_its_size_and_a_size_shows_its_own_seats(
    live_daphne: str, page: Page
) -> None:
    sizes = [NewVariant("S", 2, 4000), NewVariant("M", 2, 5500)]
    make_drop(slug="sized-seats", product_name="Stalls", quantity=4, mode="units", variants=sizes)
    make_buyer("sia")
    log_in(page, live_daphne, "sia", "/drops/sized-seats/")

    # a seat chosen before any size picks its size
    page.locator("#seat-picker label:has-text('M-2')").click()
    assert page.locator("#variant-picker input[value=M]").is_checked()

    # choosing size S then shows S's seats only, with S's price, and lets go of the seat in M
    page.locator("#variant-picker label[data-variant=S]").click()
    assert page.locator(".seat-group[data-variant=M]").is_hidden()
    assert page.locator(".seat-group[data-variant=S] .seat-size").inner_text() == "S · €40.00 · 2 left"
    assert page.locator("#seat-picker input[name=unit][value='']").is_checked()

    # back to M and its seat M-2: that is what is held
    page.locator("#variant-picker label[data-variant=M]").click()
    page.locator("#seat-picker label:has-text('M-2')").click()
    page.click("#buy")
    page.wait_for_url(re.compile(r"/holds/\d+/$"))
    hold = Hold.objects.get(buyer__username="sia")
    assert size_of(hold) == "M" and list(hold.units.values_list("label", flat=True)) == ["M-2"]
    assert page.locator("#hold-variant").inner_text() == "M"


def test_the_shops_own_404_and_an_icon(live_store: str, page: Page) -> None:
    answer = page.goto(f"{live_store}/no/such/page/")
    assert answer is not None and answer.status == 404
    assert page.locator("h1").inner_text() == "Not here"
    assert page.locator("a.brand").count() == 1 and page.locator("footer").count() == 1
    assert "Traceback" not in page.content() and "URLconf" not in page.content()

    answer = page.goto(f"{live_store}/drops/nothing-here/")
    assert answer is not None and answer.status == 404
    assert "There is no drop called 'nothing-here'." in page.locator("main").inner_text()

    icon = page.goto(f"{live_store}/favicon.ico")
    assert icon is not None and icon.status == 200 and "svg" in icon.headers["content-type"]


def test_at_the_start_the_waiting_room_says_the_draw_is_under_way(live_daphne: str, page: Page) -> None:
    # given a waiting room whose sale opens in a few seconds, and no tick yet to publish the draw
    make_drop(slug="opens", quantity=10, waiting_room=True, starts_at=timezone.now() + timedelta(seconds=4))
    make_buyer("olly")
    log_in(page, live_daphne, "olly", "/drops/opens/")
    page.click("#join-queue")
    page.wait_for_url(re.compile(r"/drops/opens/queue/$"))
    assert "The sale starts in" in page.locator("#queue-state").inner_text()

    # when the countdown reaches the start, the page no longer says the draw is coming
    page.wait_for_selector("[data-after-start]:visible", timeout=10_000)
    said = page.locator("#queue-state").inner_text()
    assert "places are being drawn now" in said and "The sale starts in" not in said
