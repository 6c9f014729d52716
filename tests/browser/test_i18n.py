"""A German browser in Chromium: the drop page speaks German, and the footer's switcher turns it
English (and back) with a plain form, under the site's strict Content-Security-Policy."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from holds import services
from tests.factories import make_buyer, make_drop

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def german_page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(locale="de-DE")
    context.set_default_timeout(15_000)
    refused: list[str] = []
    context.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
    yield context.new_page()
    context.close()
    assert not refused, refused


def test_a_german_browser_reads_german_and_switches_to_english(live_daphne: str, german_page: Page) -> None:
    make_drop(slug="sprache", product_name="Sprachschuh", quantity=7, price_minor=4900, hold_seconds=600)
    page = german_page

    page.goto(f"{live_daphne}/drops/sprache/")
    assert page.evaluate("document.documentElement.lang") == "de"
    assert page.locator("#price").inner_text() == "49,00\xa0€"
    assert page.locator("#remaining").inner_text() == "7 von 7 Stück"
    assert "Zum Kaufen anmelden" in page.locator(".buy-box").inner_text()
    assert "Zeiten werden in UTC" in page.locator("#footer-note").inner_text()

    page.locator("#language-switcher button[value=en]").click()
    page.wait_for_url(f"{live_daphne}/drops/sprache/")
    assert page.evaluate("document.documentElement.lang") == "en"
    assert "Log in to buy" in page.locator(".buy-box").inner_text()
    assert page.locator("#remaining").inner_text() == "7 of 7 units"
    page.goto(f"{live_daphne}/")  # the choice is kept, on every page
    assert page.get_by_role("heading", level=1).inner_text() == "Limited drops, sold fairly"

    page.locator("#language-switcher button[value=de]").click()
    page.wait_for_url(f"{live_daphne}/")
    assert page.get_by_role("heading", level=1).inner_text() == "Limitierte Drops, fair verkauft"


def test_a_german_buyer_reads_the_apis_refusal_in_german(live_daphne: str, german_page: Page) -> None:
    # buy.js shows the API's detail: the lane writes it in the browser's language
    drop = make_drop(slug="weg", product_name="Wegschuh", quantity=1, per_buyer_limit=1)
    make_buyer("greta")
    page = german_page
    page.goto(f"{live_daphne}/accounts/login/?next=/drops/weg/")
    page.fill("input[name=username]", "greta")
    page.fill("input[name=password]", "correct horse battery")
    page.press("input[name=password]", "Enter")
    page.wait_for_url(re.compile(r"/drops/weg/$"))

    services.reserve(drop=drop, buyer_id=make_buyer("schnell").pk, quantity=1, idempotency_key="s")
    with page.expect_response(re.compile(r"/api/drops/weg/holds$")) as refused:
        page.click("#buy")
    status = page.locator(".buy-status")
    status.wait_for(state="visible")

    assert refused.value.status == 409 and refused.value.json()["error"] == "sold_out"
    assert refused.value.headers.get("content-language") == "de"
    assert "Ausverkauft" in status.inner_text() and "Sold out" not in status.inner_text()
