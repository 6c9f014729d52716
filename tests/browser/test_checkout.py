from __future__ import annotations

import re
from typing import TYPE_CHECKING

import httpx
import pytest

from checkout.models import Payment
from holds.counts import invariant
from holds.models import Hold
from tests.browser.helpers import reserve_from_the_drop_page
from tests.conftest import PROVIDER_SECRET, Worker
from tests.factories import expire_in, make_buyer, make_drop

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def reliable_provider(payment_provider: str) -> None:
    httpx.post(
        f"{payment_provider}/api/config",
        json={"latency_ms": 200, "failure_rate": 0, "duplicates": 1, "late_seconds": 0},
        headers={"Authorization": f"Bearer {PROVIDER_SECRET}"},
    ).raise_for_status()


def test_buy_a_unit_from_the_drop_page_to_the_confirmation(
    live_daphne: str, payment_provider: str, celery_worker: Worker, page: Page
) -> None:
    drop = make_drop(slug="shoe", product_name="Court Shoe", quantity=2)
    make_buyer("paula")

    reserve_from_the_drop_page(page, live_daphne, "shoe", "paula")
    page.click("#pay")
    page.wait_for_url(re.compile(re.escape(payment_provider) + r"/pay/"))
    page.click("#pay")  # on the provider's hosted page

    page.wait_for_url(re.compile(r"/orders/\d+/$"))
    page.wait_for_selector("#order-state[data-state=confirmed]", timeout=30_000)
    assert "Confirmed" in page.locator("#order-title").inner_text()
    assert Hold.objects.get(drop=drop).state == "sold"
    numbers = invariant(drop_id=drop.pk)
    assert (numbers.available, numbers.sold, numbers.drift) == (1, 1, 0)
    page.goto(f"{live_daphne}/orders/")
    assert "confirmed" in page.locator("article").first.inner_text().lower()


def test_a_declined_card_then_a_second_card_within_the_hold(
    live_daphne: str, payment_provider: str, celery_worker: Worker, page: Page
) -> None:
    drop = make_drop(slug="boot", product_name="Rain Boot", quantity=1, price_minor=12900)
    make_buyer("fred")

    reserve_from_the_drop_page(page, live_daphne, "boot", "fred")
    assert page.locator("#pay").inner_text() == "Order with obligation to pay · €129.00"
    page.click("#pay")
    page.wait_for_url(re.compile(re.escape(payment_provider) + r"/pay/"))
    page.click("#decline")

    # the order page says the card was declined and that the unit is still held: another card
    page.wait_for_url(re.compile(r"/orders/\d+/$"))
    page.wait_for_selector("#try-again", timeout=30_000)
    assert "declined" in page.locator("#order-detail").inner_text()
    assert "still held" in page.locator("#next-step").inner_text()
    assert Payment.objects.get().state == "failed"
    assert Hold.objects.get(drop=drop).state == "held"
    assert invariant(drop_id=drop.pk).available == 0

    page.click("#try-again")
    page.wait_for_url(re.compile(re.escape(payment_provider) + r"/pay/"))
    page.click("#pay")  # the second card goes through

    page.wait_for_url(re.compile(r"/orders/\d+/$"))
    page.wait_for_selector("#order-state[data-state=confirmed]", timeout=30_000)
    assert page.locator("#order-total").inner_text() == "€129.00"
    assert Hold.objects.get(drop=drop).state == "sold"
    assert sorted(Payment.objects.values_list("state", flat=True))[-1] == "failed"
    numbers = invariant(drop_id=drop.pk)
    assert (numbers.available, numbers.held, numbers.sold, numbers.drift) == (0, 0, 1, 0)


def test_an_expired_hold_offers_to_reserve_again_while_units_are_left(live_daphne: str, page: Page) -> None:
    drop = make_drop(slug="late", product_name="Late Loafer", quantity=3)
    make_buyer("lou")

    reserve_from_the_drop_page(page, live_daphne, "late", "lou")
    expire_in([Hold.objects.get(drop=drop).pk], -1)
    page.reload()

    assert page.locator("h1").inner_text() == "Expired"
    page.click("#reserve-again")
    page.wait_for_url(re.compile(r"/drops/late/$"))
    page.click("#buy")
    page.wait_for_url(re.compile(r"/holds/\d+/$"))
    assert Hold.objects.filter(drop=drop, state="held").count() == 1
