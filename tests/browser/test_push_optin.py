"""The waiting room's push opt-in in Chromium: the button shows where the browser can push, the
shop's service worker registers from the root and then controls every page of the shop, and a
browser that cannot subscribe is told so in words (no push service is reachable here)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from admission import services
from shop.models import Drop
from tests.browser.helpers import join_from_the_link, off_the_loop
from tests.factories import make_buyer, make_drop

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_opt_in_shows_and_its_worker_covers_every_page(live_daphne: str, browser: Browser) -> None:
    # given a buyer in a waiting room
    drop = make_drop(slug="push-room", quantity=2, waiting_room=True, join_work_bits=0)
    off_the_loop(lambda: services.run_wave(Drop.objects.get(pk=drop.pk)))
    make_buyer("pia")
    page = browser.new_context().new_page()
    page.set_default_timeout(15_000)
    join_from_the_link(page, live_daphne, "pia", slug="push-room")

    # then the button shows (Chromium can push), and the worker's scope is the whole shop
    page.wait_for_selector("#push-optin:not([hidden])")
    assert page.get_by_role("button", name="Notify me on this device when it's my turn").is_visible()
    scope = page.evaluate(
        "navigator.serviceWorker.register('/push-worker.js', {scope: '/'}).then(r => r.scope)"
    )
    assert scope == f"{live_daphne}/"
    page.evaluate("navigator.serviceWorker.ready")
    page.goto(f"{live_daphne}/")  # another page of the shop: the worker controls it
    assert page.evaluate("navigator.serviceWorker.ready.then(() => !!navigator.serviceWorker.controller)")

    # when the buyer presses the button where no push service answers (or notifications are refused)
    page.goto(f"{live_daphne}/drops/push-room/queue/")
    page.get_by_role("button", name="Notify me on this device when it's my turn").click()

    # then the page says why in words, and stores nothing
    status = page.locator("#push-status")
    page.wait_for_function("() => document.querySelector('#push-status').textContent.length > 0")
    assert status.inner_text() in {
        "Notifications are blocked for this shop in your browser's settings.",
        "Notifications could not be turned on here. Keep this page open instead.",
    }
