"""The presale in Chromium: a wrong code is said in place, the right one reserves (buy.js sends it)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest
from django.utils import timezone

from holds import presale
from holds.models import Hold
from tests.factories import make_buyer, make_drop

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_buyer_types_a_presale_code_on_the_drop_page_and_holds_a_unit(live_daphne: str, page: Page) -> None:
    now = timezone.now()
    drop = make_drop(
        slug="presale-page",
        product_name="Early Boot",
        quantity=3,
        starts_at=now + timedelta(hours=1),
        presale_starts_at=now - timedelta(minutes=1),
    )
    (code,) = presale.generate_codes(drop=drop, count=1)
    make_buyer("early")
    page.goto(f"{live_daphne}/accounts/login/?next=/drops/presale-page/")
    page.fill("input[name=username]", "early")
    page.fill("input[name=password]", "correct horse battery")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(r"/drops/presale-page/$"))

    page.fill("#presale-code", "NOTACODE")
    with page.expect_response(re.compile(r"/api/drops/presale-page/holds$")) as refused:
        page.click("#buy")
    page.wait_for_function("() => !document.querySelector('.buy-status').textContent.startsWith('Reserving')")
    said = page.inner_text(".buy-status")
    page.fill("#presale-code", code.code.lower())
    page.click("#buy")
    page.wait_for_url(re.compile(r"/holds/\d+/$"))

    assert refused.value.status == 403 and "not valid for this drop" in said
    assert Hold.objects.get(drop=drop).presale_code_id == code.pk
