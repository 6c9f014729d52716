from __future__ import annotations

import re

import pytest

from holds.models import Hold
from inventory.selectors import invariant
from tests.factories import make_buyer, make_drop

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_buyer_reserves_from_the_drop_page_and_watches_the_hold_count_down(
    live_daphne: str, page: object
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
