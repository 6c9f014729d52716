from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.utils import timezone

from inventory.models import Unit
from shop.models import Drop, Product
from tests.factories import make_buyer

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def log_in(page: Page, base: str, username: str) -> None:
    page.goto(f"{base}/admin/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", "pw-pw-pw-pw-pw")
    page.click("input[type=submit]")
    page.wait_for_url(re.compile(r"/admin/$"))


def staff(username: str, group: str) -> None:
    user = get_user_model().objects.create_user(username=username, password="pw-pw-pw-pw-pw", is_staff=True)
    user.groups.add(Group.objects.get(name=group))


def test_merchant_creates_a_seated_drop_and_on_call_pauses_it(
    live_daphne: str, browser: Browser, roles: None
) -> None:
    Product.objects.create(sku="SEAT", name="Concert seat", price_minor=9900)
    staff("merchant", "Merchants")
    staff("oncall", "On-call")
    make_buyer("fan")
    now = timezone.now() - timedelta(minutes=1)

    # a merchant creates a drop of seats A1-A5, B1-B5 in the admin
    merchant = browser.new_context().new_page()
    log_in(merchant, live_daphne, "merchant")
    merchant.goto(f"{live_daphne}/admin/shop/drop/add/")
    merchant.select_option("#id_product", label="Concert seat (SEAT)")
    merchant.fill("#id_slug", "concert")
    merchant.fill("#id_starts_at_0", now.strftime("%Y-%m-%d"))
    merchant.fill("#id_starts_at_1", now.strftime("%H:%M:%S"))
    merchant.fill("#id_ends_at_0", (now + timedelta(hours=2)).strftime("%Y-%m-%d"))
    merchant.fill("#id_ends_at_1", (now + timedelta(hours=2)).strftime("%H:%M:%S"))
    merchant.fill("#id_quantity", "10")
    merchant.select_option("#id_inventory_mode", "units")
    merchant.fill("#id_unit_labels", "A1-A5, B1-B5")
    merchant.click("input[name=_save]")
    merchant.wait_for_url(re.compile(r"/admin/shop/drop/$"))
    drop = Drop.objects.get(slug="concert")
    assert sorted(Unit.objects.filter(drop=drop).values_list("label", flat=True)) == sorted(
        [f"A{n}" for n in range(1, 6)] + [f"B{n}" for n in range(1, 6)]
    )

    # a buyer has the drop page open with the buy button
    buyer = browser.new_context().new_page()
    buyer.goto(f"{live_daphne}/accounts/login/?next=/drops/concert/")
    buyer.fill("input[name=username]", "fan")
    buyer.fill("input[name=password]", "correct horse battery")
    buyer.get_by_role("button", name="Log in").click()
    buyer.wait_for_url(re.compile(r"/drops/concert/$"))
    assert buyer.locator("#buy").count() == 1

    # on-call pauses it from the dashboard, with a reason
    on_call = browser.new_context().new_page()
    log_in(on_call, live_daphne, "oncall")
    on_call.get_by_role("link", name="Invariant dashboard").click()
    card = on_call.locator("section[data-drop=concert]")
    card.locator("input[name=reason]").fill("seat map wrong")
    card.get_by_role("button", name="Pause sale now").click()
    on_call.wait_for_selector("section[data-drop=concert] [data-role=state]:text('paused')")

    # the buyer's open page turns to "paused" by itself and the buy button is gone
    buyer.wait_for_selector("#drop-state:text('paused')", timeout=15_000)
    assert buyer.locator("#buy").count() == 0
    assert "paused" in buyer.locator(".notice").inner_text()
    assert Drop.objects.get(slug="concert").pause_reason == "seat map wrong"
    for page in (merchant, buyer, on_call):
        page.context.close()
