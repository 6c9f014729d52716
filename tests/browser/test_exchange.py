"""The face-value exchange in Chromium: a buyer waiting in line for a sold-out drop sees the unit a
seller put back appear on the waiting page, pays for it at the seller's price through the provider's
page, and the seller is refunded (the worker applies the webhooks and takes the money)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest
from django.utils import timezone

from admission import services
from checkout import exchange
from checkout.models import Order, Refund
from holds import services as holds
from holds.counts import invariant
from tests.browser.helpers import join_from_the_link, off_the_loop
from tests.checkout.helpers import provider_config, wait_until
from tests.conftest import Worker
from tests.factories import make_buyer, make_drop
from tests.sale.helpers import pay

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_waiting_buyer_is_offered_a_unit_put_back_and_buys_it_at_the_sellers_price(
    live_daphne: str, payment_provider: str, celery_worker: Worker, page: Page, settings
) -> None:
    provider_config(payment_provider, latency_ms=50, failure_rate=0, duplicates=1, late_seconds=0)
    settings.PAYMENT_PROVIDER_URL = payment_provider  # the seller's purchase runs in this process
    ends = timezone.now() + timedelta(hours=1)
    drop = make_drop(
        slug="ex-live",
        quantity=1,
        per_buyer_limit=1,
        price_minor=4900,
        waiting_room=True,
        admission_percent=100,
        ends_at=ends,
        exchange_closes_at=ends + timedelta(days=1),
        exchange_fee_minor=250,
    )
    off_the_loop(lambda: services.run_wave(drop))  # the start: an empty draw, joiners line up
    seller = make_buyer("ex-seller").pk
    services.join(drop=drop, buyer_id=seller)
    off_the_loop(lambda: services.run_wave(drop, force=True))
    hold = holds.reserve(drop=drop, buyer_id=seller, quantity=1, idempotency_key="mine").hold
    sold = off_the_loop(lambda: pay(hold.pk, seller))  # sold out: the line waits

    make_buyer("ex-noa")
    join_from_the_link(page, live_daphne, "ex-noa", slug="ex-live")
    page.wait_for_selector("#offer", state="hidden")

    off_the_loop(lambda: exchange.list_units(order_id=sold.pk, buyer_id=seller))  # the worker offers it
    page.wait_for_selector("#offer:not([hidden])", timeout=20_000)
    assert page.evaluate("window.stayedOnThePage")  # told in place, no reload
    page.click("#offer-pay")
    page.wait_for_url(re.compile(r"/holds/\d+/$"))
    assert page.locator("#pay").inner_text() == "Order with obligation to pay · €49.00"
    page.click("#pay")
    page.wait_for_url(re.compile(re.escape(payment_provider) + r"/pay/"))
    page.click("#pay")
    page.wait_for_url(re.compile(r"/orders/\d+/$"))
    page.wait_for_selector("#order-state[data-state=confirmed]", timeout=30_000)

    bought = Order.objects.get(hold__buyer__username="ex-noa")
    assert (bought.amount_minor, bought.hold.exchange) == (4900, True)
    wait_until(lambda: Refund.objects.filter(order=sold, state="succeeded").exists(), seconds=60)
    refund = Refund.objects.get(order=sold)
    assert refund.amount_minor == 4900 - 250
    numbers = invariant(drop_id=drop.pk)
    assert (numbers.sold, numbers.exchange, numbers.drift) == (1, 0, 0)
