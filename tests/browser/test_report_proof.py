"""A buyer's outcome is checked against the drop's published root in Chromium (WebCrypto SHA-256),
and a tampered outcome or proof says it does not verify."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from admission.models import Ticket
from tests.browser.helpers import off_the_loop
from tests.fairness.test_report import sale

if TYPE_CHECKING:
    from playwright.sync_api import Page, Route

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def open_report(page: Page, base: str, username: str, slug: str) -> str:
    page.goto(f"{base}/accounts/login/?next=/drops/{slug}/report/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", "correct horse battery")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"**/drops/{slug}/report/")
    page.goto(f"{base}/drops/{slug}/report/")  # a route sees a navigation's first request, not a redirect's
    page.wait_for_function("() => document.querySelector('#report-result').dataset.verified !== undefined")
    return page.inner_text("#report-result")


def test_a_buyer_sees_their_outcome_verified_in_the_browser(live_daphne: str, page: Page) -> None:
    drop, buyers = off_the_loop(lambda: sale("proof-ok"))
    said = open_report(page, live_daphne, "proof-ok-d", "proof-ok")
    assert page.get_attribute("#report-result", "data-verified") == "true"
    root = page.inner_text("#report-root")
    assert said.startswith("Verified") and root in said
    entry = off_the_loop(lambda: Ticket.objects.get(drop=drop, buyer=buyers["d"]).pk)
    assert page.inner_text("#report-leaf").startswith(f"entry={entry};place=4;admitted=1;offered=1;")


@pytest.mark.parametrize("tamper", ["outcome", "proof"])
def test_a_tampered_outcome_or_proof_does_not_verify(live_daphne: str, page: Page, tamper: str) -> None:
    off_the_loop(lambda: sale(f"proof-{tamper}"))

    def forged(route: Route) -> None:
        body = route.fetch().json()
        if tamper == "outcome":  # the shop claims this buyer bought two
            body["leaf"] = body["leaf"].replace("bought=1", "bought=2")
        else:
            first = body["proof"][0]
            body["proof"][0] = ("1" if first[0] == "0" else "0") + first[1:]
        route.fulfill(status=200, content_type="application/json", body=json.dumps(body))

    def shown(route: Route) -> None:  # the page shows the same forged outcome as its proof
        page_html = route.fetch().text()
        route.fulfill(
            status=200,
            content_type="text/html; charset=utf-8",
            body=page_html.replace("bought=1", "bought=2"),
        )

    page.route("**/report/entries/*", forged)
    if tamper == "outcome":
        page.route("**/drops/*/report/", shown)
    said = open_report(page, live_daphne, f"proof-{tamper}-d", f"proof-{tamper}")
    assert page.get_attribute("#report-result", "data-verified") == "false"
    assert said.startswith("Does not verify") and "not to the published root" in said
