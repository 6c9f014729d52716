from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest
from django.utils import timezone

from admission import work
from admission.models import Ticket
from shop.models import DEFAULT_JOIN_WORK_BITS
from tests.factories import make_buyer, make_drop

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SAID = """
window.__said = [];
new MutationObserver(() => {
  const line = document.querySelector("form.join .work-progress");
  const text = line && line.textContent.trim();
  if (text && window.__said[window.__said.length - 1] !== text) window.__said.push(text);
}).observe(document, {subtree: true, childList: true, characterData: true});
"""


def test_the_page_solves_the_default_proof_of_work_in_the_background_then_joins(
    live_daphne: str, page: Page
) -> None:
    make_drop(
        slug="worked",
        quantity=5,
        waiting_room=True,
        join_work_bits=DEFAULT_JOIN_WORK_BITS,
        starts_at=timezone.now() + timedelta(minutes=30),
    )
    make_buyer("worker")
    # Every text the progress line speaks, as it speaks it: a lucky proof can be found before the
    # test would look, so what was said is recorded rather than caught in passing.
    page.add_init_script(SAID)
    page.goto(f"{live_daphne}/accounts/login/?next=/drops/worked/")
    page.fill("input[name=username]", "worker")
    page.fill("input[name=password]", "correct horse battery")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(r"/drops/worked/$"))

    button = page.locator("#join-queue")
    button.wait_for()
    # while it works: a button still in the tab order that says it is not ready, and spoken progress
    # (the page's script marks it when it starts, which on a loaded machine is after the button shows)
    page.wait_for_function(
        "() => document.querySelector('#join-queue').getAttribute('aria-disabled') === 'true'"
    )
    assert button.evaluate("el => !el.disabled")
    assert page.locator("form.join progress").get_attribute("aria-label") == "Preparing your place…"
    page.wait_for_function(
        "() => !document.querySelector('#join-queue').hasAttribute('aria-disabled')", timeout=60_000
    )
    assert page.get_by_role("status").filter(has_text="Ready: you can join now.").is_visible()
    said: list[str] = page.evaluate("window.__said")
    assert said[0].startswith("Preparing your place: about 0 percent done"), said
    assert said[-1] == "Ready: you can join now.", said
    assert page.locator("form.join progress").evaluate("el => el.value") == 100
    proof = page.locator("form.join input[name=proof]").input_value()
    challenge = page.locator("form.join input[name=challenge]").input_value()
    button.click()
    page.wait_for_url(re.compile(r"/drops/worked/queue/$"))

    assert re.fullmatch(r"[0-9a-f]+", proof) and work.solves(challenge, proof, DEFAULT_JOIN_WORK_BITS)
    assert Ticket.objects.filter(buyer__username="worker").count() == 1
    assert "Join the waiting room" not in page.content()
