"""The verify page redoes the draw in Chromium (WebCrypto SHA-256) and says whether a place holds."""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING

import pytest
from django.db.models import F
from django.utils import timezone

from admission import beacon, drawing, services
from admission.models import Queue, Ticket
from shop.models import DEFAULT_LINE_CLOSE_SECONDS, Drop
from tests import beacons
from tests.browser.helpers import off_the_loop
from tests.factories import make_buyer, make_drop

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


# A sale whose line closes (10 s before its start, the default) just before a real recorded
# quicknet round was due (tests/beacons.py), so the round its queue names is the one the relay serves.
DUE = beacon.QUICKNET.time_of(beacons.QUICKNET_ROUND)
CLOSES = DUE - timedelta(seconds=2)
STARTS = CLOSES + timedelta(seconds=DEFAULT_LINE_CLOSE_SECONDS)


def drawn(slug: str) -> tuple[Drop, Ticket]:
    drop = make_drop(
        slug=slug,
        quantity=3,
        waiting_room=True,
        starts_at=STARTS,
        ends_at=timezone.now() + timedelta(hours=1),
    )
    drawing.open_queues([drop], now=STARTS - timedelta(minutes=10))
    for i in range(25):
        services.join(drop=drop, buyer_id=make_buyer(f"{slug}-{i}").pk)
    vera = make_buyer(f"{slug}-vera")
    services.join(drop=drop, buyer_id=vera.pk)

    def wave(at: datetime) -> None:
        services.run_wave(Drop.objects.get(pk=drop.pk), now=at)

    # the list closes; the round is read (or asked for again, then given up on); the start
    for at in (CLOSES, DUE + timedelta(seconds=1), STARTS):
        off_the_loop(partial(wave, at))
    return drop, Ticket.objects.get(drop=drop, buyer=vera)


def log_in_to_verify(page: Page, base: str, username: str, slug: str) -> None:
    page.goto(f"{base}/accounts/login/?next=/drops/{slug}/queue/verify")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", "correct horse battery")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"**/drops/{slug}/queue/verify")


def result(page: Page) -> str:
    page.wait_for_function("() => document.querySelector('#verify-result').dataset.verified !== undefined")
    return page.inner_text("#verify-result")


@pytest.fixture(autouse=True)
def recorded_round(drand_relay: beacons.Relay) -> beacons.Relay:
    drand_relay.serve(beacon.QUICKNET, beacons.QUICKNET_ROUND, beacons.QUICKNET_SIGNATURE)
    return drand_relay


def test_a_buyer_sees_their_place_verified_in_the_browser(live_daphne: str, page: Page) -> None:
    drop, ticket = drawn("verify-ok")
    assert Queue.objects.get(pk=drop.pk).beacon == beacons.QUICKNET_RANDOMNESS
    log_in_to_verify(page, live_daphne, "verify-ok-vera", "verify-ok")
    text = result(page)
    assert f"Your place {ticket.number} is verified" in text and "nobody, the shop included" in text
    assert page.get_attribute("#verify-result", "data-unsteerable") == "true"
    steps = page.inner_text("#verify-steps")
    assert "matches the hash published before the first join" in steps
    assert f"is the SHA-256 of drand quicknet round {beacons.QUICKNET_ROUND}'s signature" in steps
    assert "before drand quicknet round" in steps
    # anyone can check any entry, signed in or not
    other = Ticket.objects.filter(drop=drop).exclude(pk=ticket.pk).first()
    assert other is not None
    page.fill("#verify-entry", str(other.pk))
    page.evaluate("document.querySelector('#verify-result').removeAttribute('data-verified')")
    page.get_by_role("button", name="Check").click()
    assert f"Your place {other.number} is verified" in result(page)


def test_the_page_says_mismatch_for_a_swapped_round_value(live_daphne: str, page: Page) -> None:
    drop, _ = drawn("verify-round")
    # the shop publishes another "randomness" (and the order it gives) than the round's signature hashes to
    Queue.objects.filter(pk=drop.pk).update(beacon="0" * 64)
    log_in_to_verify(page, live_daphne, "verify-round-vera", "verify-round")
    text = result(page)
    assert text.startswith("Mismatch") and "is not the SHA-256 of drand quicknet round" in text


def test_the_page_says_when_the_round_could_not_be_read(
    live_daphne: str, page: Page, recorded_round: beacons.Relay
) -> None:
    # the relay answers with a forged signature: the draw takes nothing it cannot verify
    recorded_round.rounds.clear()
    recorded_round.serve(beacon.QUICKNET, beacons.QUICKNET_ROUND, beacons.forged(beacons.QUICKNET_SIGNATURE))
    _, ticket = drawn("verify-offline")
    log_in_to_verify(page, live_daphne, "verify-offline-vera", "verify-offline")
    said = result(page)
    # it adds up, and says in words that it cannot show the shop did not steer it
    assert f"Your place {ticket.number} is verified" in said and "Here you have to trust the shop" in said
    assert page.get_attribute("#verify-result", "data-unsteerable") == "false"
    beacon_text = page.inner_text("#draw-beacon")
    assert "could not be read (no relay gave it with a valid signature in time)" in beacon_text
    note = Queue.objects.get(drop__slug="verify-offline").beacon_note
    assert note and note not in beacon_text  # the relay's own words are for the log and the JSON
    assert "the order rests on the committed seed" in page.inner_text("#verify-steps")


def test_the_page_says_mismatch_for_a_swapped_seed(live_daphne: str, page: Page) -> None:
    drop, _ = drawn("verify-seed")
    Queue.objects.filter(pk=drop.pk).update(seed="0" * 64)
    log_in_to_verify(page, live_daphne, "verify-seed-vera", "verify-seed")
    text = result(page)
    assert text.startswith("Mismatch") and "seed does not match" in text


def test_the_page_says_mismatch_when_places_were_moved(live_daphne: str, page: Page) -> None:
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
