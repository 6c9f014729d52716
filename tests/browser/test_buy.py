from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from holds import services
from holds.counts import invariant
from holds.models import Hold
from tests.factories import make_buyer, make_drop

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_buyer_reserves_from_the_drop_page_and_watches_the_hold_count_down(
    live_daphne: str, page: Page
) -> None:
    drop = make_drop(slug="browser-buy", product_name="Browser Boot", quantity=3, per_buyer_limit=2)
    make_buyer("walker")

    # log in from the drop page
    page.goto(f"{live_daphne}/drops/browser-buy/")
    page.get_by_role("link", name="Log in to buy").click()
    page.fill("input[name=username]", "walker")
    page.fill("input[name=password]", "correct horse battery")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(r"/drops/browser-buy/$"))

    # reserve two
    page.select_option("select[name=quantity]", "2")
    page.click("#buy")
    page.wait_for_url(re.compile(r"/holds/\d+/$"))
    clock = page.locator("#hold-countdown")
    first = clock.inner_text()
    page.wait_for_function(
        "before => document.querySelector('#hold-countdown').textContent !== before", arg=first
    )
    assert clock.inner_text() < first
    assert Hold.objects.get(drop=drop).quantity == 2
    assert invariant(drop_id=drop.pk).available == 1

    # release gives them back
    page.click("#release")
    page.wait_for_url(re.compile(r"/drops/browser-buy/$"))
    assert "back on sale" in page.content()
    assert invariant(drop_id=drop.pk).available == 3


def test_the_reserve_button_claims_through_the_lane_and_says_no_in_place(
    live_daphne: str, page: Page
) -> None:
    drop = make_drop(slug="lane-page", product_name="Lane Boot", quantity=1, per_buyer_limit=1)
    make_buyer("lena")
    page.goto(f"{live_daphne}/accounts/login/?next=/drops/lane-page/")
    page.fill("input[name=username]", "lena")
    page.fill("input[name=password]", "correct horse battery")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(r"/drops/lane-page/$"))

    # A second tab reserves first...
    other = page.context.new_page()
    other.goto(f"{live_daphne}/drops/lane-page/")
    with other.expect_response(re.compile(r"/api/drops/lane-page/holds$")) as claimed:
        other.click("#buy")
    other.wait_for_url(re.compile(r"/holds/\d+/$"))
    other.click("#release")
    other.wait_for_url(re.compile(r"/drops/lane-page/$"))

    # ...someone else takes the only unit; this tab's Reserve hears "sold out" without leaving.
    services.reserve(drop=drop, buyer_id=make_buyer("quick").pk, quantity=1, idempotency_key="q")
    with page.expect_response(re.compile(r"/api/drops/lane-page/holds$")) as refused:
        page.click("#buy")
    status = page.locator(".buy-status")
    status.wait_for(state="visible")

    assert claimed.value.status == 201 and claimed.value.headers.get("x-floodgate-lane") == "hit"
    assert refused.value.status == 409
    assert page.url.endswith("/drops/lane-page/")
    assert "Sold out" in status.inner_text() and status.get_attribute("aria-live") == "polite"
    assert page.locator("#buy").is_enabled()
