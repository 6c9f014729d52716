"""The verify page redoes the draw in Chromium (WebCrypto SHA-256) and says whether a place holds."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models import F
from django.utils import timezone

from admission import services
from admission.models import Queue, Ticket
from shop.models import Drop
from tests.browser.helpers import off_the_loop
from tests.factories import make_buyer, make_drop

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def drawn(slug: str) -> tuple[Drop, Ticket]:
    drop = make_drop(
        slug=slug, quantity=3, waiting_room=True, starts_at=timezone.now() + timedelta(minutes=5)
    )
    Drop.objects.filter(pk=drop.pk).update(draw_beacon="round-4242:9f8e7d")
    for i in range(25):
        services.join(drop=drop, buyer_id=make_buyer(f"{slug}-{i}").pk)
    vera = make_buyer(f"{slug}-vera")
    services.join(drop=drop, buyer_id=vera.pk)
    off_the_loop(
        lambda: services.run_wave(Drop.objects.get(pk=drop.pk), now=drop.starts_at + timedelta(seconds=1))
    )
    return drop, Ticket.objects.get(drop=drop, buyer=vera)


def log_in_to_verify(page: object, base: str, username: str, slug: str) -> None:
    page.goto(f"{base}/accounts/login/?next=/drops/{slug}/queue/verify")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", "correct horse battery")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"**/drops/{slug}/queue/verify")


def result(page: object) -> str:
    page.wait_for_function("() => document.querySelector('#verify-result').dataset.verified !== undefined")
    return page.inner_text("#verify-result")


def test_a_buyer_sees_their_place_verified_in_the_browser(live_daphne: str, page: object) -> None:
    drop, ticket = drawn("verify-ok")
    log_in_to_verify(page, live_daphne, "verify-ok-vera", "verify-ok")
    text = result(page)
    assert f"Your place {ticket.number} is verified" in text
    assert "matches the hash published before the first join" in page.inner_text("#verify-steps")
    # anyone can check any entry, signed in or not
    other = Ticket.objects.filter(drop=drop).exclude(pk=ticket.pk).first()
    page.fill("#verify-entry", str(other.pk))
    page.evaluate("document.querySelector('#verify-result').removeAttribute('data-verified')")
    page.get_by_role("button", name="Check").click()
    assert f"Your place {other.number} is verified" in result(page)


def test_the_page_says_mismatch_for_a_swapped_seed(live_daphne: str, page: object) -> None:
    drop, _ = drawn("verify-seed")
    Queue.objects.filter(pk=drop.pk).update(seed="0" * 64)
    log_in_to_verify(page, live_daphne, "verify-seed-vera", "verify-seed")
    text = result(page)
    assert text.startswith("Mismatch") and "seed does not match" in text


def test_the_page_says_mismatch_when_places_were_moved(live_daphne: str, page: object) -> None:
    drop, _ = drawn("verify-moved")
    # an insider moves everyone down one and takes place 1
    Ticket.objects.filter(drop=drop).update(number=F("number") + 1000)
    Ticket.objects.filter(drop=drop).update(number=F("number") - 999)
    Ticket.objects.create(drop=drop, buyer=make_buyer("insider"), number=1)
    Queue.objects.filter(pk=drop.pk).update(drawn_entries=27)
    log_in_to_verify(page, live_daphne, "verify-moved-vera", "verify-moved")
    text = result(page)
    assert text.startswith("Mismatch") and "list of entries does not match" in text
    assert "is verified" not in text
