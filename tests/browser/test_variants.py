"""Sizes in Chromium: the drop page's picker (a size gone is disabled, and a size taken while the
buyer looked is said in place, naming those left), and the dashboard's row per size."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection

from catalogue.services import NewVariant
from holds import services as holds
from holds.models import Hold
from tests.factories import make_buyer, make_drop, size_of

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_picker_disables_a_size_gone_and_says_which_are_left(live_daphne: str, page: Page) -> None:
    sizes = [NewVariant("S", 1), NewVariant("M", 1), NewVariant("L", 2)]
    drop = make_drop(slug="sized-boot", quantity=4, variants=sizes, per_buyer_limit=1)
    s, m = drop.variants.get(name="S"), drop.variants.get(name="M")
    holds.reserve(drop=drop, buyer_id=make_buyer().pk, quantity=1, idempotency_key="k", variant=s)
    make_buyer("wren")

    page.goto(f"{live_daphne}/accounts/login/?next=/drops/sized-boot/")
    page.fill("input[name=username]", "wren")
    page.fill("input[name=password]", "correct horse battery")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(r"/drops/sized-boot/$"))

    # S is sold out before the page opened: shown, disabled
    assert page.locator("#variant-picker input[value=S]").is_disabled()
    assert "sold out" in page.locator("label[data-variant=S]").inner_text()
    # Reserve without a size: the browser asks for one, nothing is sent
    page.click("#buy")
    assert page.evaluate("document.querySelector('#variant-picker input[value=M]').validity.valid") is False
    assert not Hold.objects.filter(buyer__username="wren").exists()
    # M goes to someone else while wren looks; wren picks it and is told in place
    holds.reserve(drop=drop, buyer_id=make_buyer().pk, quantity=1, idempotency_key="k", variant=m)
    page.click("label[data-variant=M]")
    page.click("#buy")
    page.wait_for_selector(".buy-status:text('M is sold out')")
    assert "still on sale: L" in page.locator(".buy-status").inner_text()
    assert page.locator("#variant-picker input[value=M]").is_disabled()
    assert page.url.endswith("/drops/sized-boot/")  # still on the page, to pick another
    page.click("label[data-variant=L]")
    page.click("#buy")
    page.wait_for_url(re.compile(r"/holds/\d+/$"))
    assert page.locator("#hold-variant").inner_text() == "L"
    assert size_of(Hold.objects.get(buyer__username="wren")) == "L"


def test_the_dashboard_has_a_row_per_size_with_its_drift_in_red(
    live_daphne: str, page: Page, roles: None
) -> None:
    sizes = [NewVariant("S", 3), NewVariant("M", 5)]
    drop = make_drop(slug="sized-watch", quantity=8, variants=sizes)
    with connection.cursor() as cursor:  # one unit of M lost from its stock row: drift in M only
        cursor.execute(
            "UPDATE inventory_stockbucket SET available = available - 1 WHERE variant_id = %s",
            [drop.variants.get(name="M").pk],
        )
    user = get_user_model().objects.create_user(username="vera", password="pw-pw-pw-pw-pw", is_staff=True)
    user.groups.add(Group.objects.get(name="On-call"))
    page.goto(f"{live_daphne}/admin/login/?next=/admin/shop/drop/dashboard/")
    page.fill("#id_username", "vera")
    page.fill("#id_password", "pw-pw-pw-pw-pw")
    page.click("input[type=submit]")

    card = page.locator("section[data-drop=sized-watch]")
    card.locator("table.fg-variants").wait_for()
    rows = card.locator("table.fg-variants tbody tr")
    assert rows.count() == 2
    # quantity, available, held, sold, refunded, on the exchange, drift
    assert rows.nth(0).inner_text().split() == ["S", "3", "3", "0", "0", "0", "0", "0"]
    assert rows.nth(1).inner_text().split() == ["M", "5", "4", "0", "0", "0", "0", "1"]
    assert card.locator("tr[data-variant=M] td.bad").inner_text() == "1"
    assert card.locator("tr[data-variant=S] td.bad").count() == 0
    assert "Drift of 1 units in M of sized-watch" in card.inner_text()
    assert "drift" in (card.get_attribute("class") or "")
