from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest
from django.utils import timezone

from tests.factories import make_drop

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_home_and_drop_page_show_a_ticking_countdown(live_daphne: str, page: Page) -> None:
    # given a drop that opens in three minutes, served by a real daphne
    make_drop(
        slug="tick-tock", product_name="Ticking Sneaker", starts_at=timezone.now() + timedelta(minutes=3)
    )

    # when a buyer opens the home page and then the drop page
    page.goto(live_daphne + "/")
    card_clock = page.locator("article:has-text('Ticking Sneaker') [data-countdown]")
    first_home = card_clock.inner_text()
    page.wait_for_function(
        "([el, before]) => el.textContent !== before", arg=[card_clock.element_handle(), first_home]
    )
    page.get_by_role("link", name="Ticking Sneaker").click()
    page.wait_for_url(re.compile(r"/drops/tick-tock/$"))

    # then the countdown ticks down, second by second
    clock = page.locator("#countdown")
    first = clock.inner_text()
    assert re.fullmatch(r"0[23]:\d\d", first), first
    page.wait_for_function("before => document.querySelector('#countdown').textContent !== before", arg=first)
    second = clock.inner_text()
    assert second < first, (first, second)
    assert page.locator("#drop-state").inner_text().lower() == "scheduled"
