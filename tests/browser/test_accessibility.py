"""axe-core over every buyer page and state, in English and German, in Chromium: no critical or
serious violation of WCAG 2.2 A/AA. axe's own script (from the axe-playwright-python wheel, which
pins an axe-core release) is evaluated through the DevTools protocol, so the pages' CSP stays on."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from functools import partial
from importlib import resources
from typing import TYPE_CHECKING

import pytest
from django.db import connection
from django.utils import timezone

from admission import services as line
from catalogue.services import NewVariant
from checkout import exchange
from checkout.models import Payment
from holds import services as holds
from holds.models import Hold
from ops import switch
from sale import offers
from shop.models import Drop
from tests.browser.helpers import join_from_the_link, off_the_loop
from tests.conftest import Worker
from tests.factories import confirmed_order, expire_in, make_buyer, make_drop

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AXE = (resources.files("axe_playwright_python") / "axe.min.js").read_text()
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]
SERIOUS = {"critical", "serious"}


def scan(page: Page) -> list[str]:
    """The page's critical and serious violations, one line each (rule, impact, where)."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(AXE)
    found = page.evaluate(
        "tags => axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']})"
        ".then(r => r.violations.map(v => ({id: v.id, impact: v.impact,"
        " nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 3)})))",
        TAGS,
    )
    return [f"{v['id']} ({v['impact']}): {json.dumps(v['nodes'])}" for v in found if v["impact"] in SERIOUS]


LIVE_REGION = "[aria-live]:not([aria-live=off]), [role=status], [role=alert], [role=log], [role=timer]"
COUNTDOWN_SPOKEN = (
    f"[...document.querySelectorAll('[data-countdown]')].some(el => el.closest('{LIVE_REGION}'))"
)


def log_in(page: Page, base: str, username: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", "correct horse battery")
    page.locator("main form button[type=submit]").click()
    page.wait_for_url(re.compile(r"/$"))


@pytest.fixture
def shop_in_every_state(transactional_db: None) -> dict[str, str]:
    """Drops, a line, holds and orders in each state a buyer meets; {name: path}."""
    return off_the_loop(every_state)  # a wave publishes through async_to_sync: not on Playwright's loop


def every_state() -> dict[str, str]:
    now = timezone.now()
    buyer = make_buyer("axel")
    soon = make_drop(slug="soon", product_name="Soon", starts_at=now + timedelta(hours=2))
    sizes = [NewVariant("S", 3), NewVariant("M", 3, 5900)]
    sized = make_drop(slug="sized", product_name="Runner", quantity=6, variants=sizes)
    seats = make_drop(slug="seats", quantity=4, mode="units", unit_labels=["A1", "A2", "B1", "B2"])
    gone = make_drop(slug="gone", quantity=1)
    confirmed_order(gone, make_buyer("first"), key="k", amount_minor=4900)
    paused = make_drop(slug="paused", quantity=5)
    ended = make_drop(slug="ended", starts_at=now - timedelta(hours=2), ends_at=now - timedelta(hours=1))
    ships = make_drop(slug="ships", quantity=5, ships=True)

    # a waiting room: axel waits behind two tickets before the start, ...
    room = make_drop(slug="room", quantity=2, waiting_room=True, starts_at=now + timedelta(hours=1))
    for name in ("r1", "r2"):
        line.join(drop=room, buyer_id=make_buyer(name).pk)
    line.join(drop=room, buyer_id=buyer.pk)
    # ... has their turn in another, and an offer in a third
    turn = make_drop(slug="turn", quantity=5, waiting_room=True, admission_percent=100)
    line.run_wave(Drop.objects.get(pk=turn.pk))
    line.join(drop=turn, buyer_id=buyer.pk)
    line.run_wave(Drop.objects.get(pk=turn.pk), force=True)
    offer = make_drop(slug="offer", quantity=1, waiting_room=True, admission_percent=100)
    line.run_wave(Drop.objects.get(pk=offer.pk))
    first = make_buyer("o1").pk
    line.join(drop=offer, buyer_id=first)
    line.join(drop=offer, buyer_id=buyer.pk)
    line.run_wave(Drop.objects.get(pk=offer.pk), force=True)
    taken = holds.reserve(drop=offer, buyer_id=first, quantity=1, idempotency_key="o1").hold
    holds.release(hold_id=taken.pk, buyer_id=first)
    assert offers.offer_returns(Drop.objects.get(pk=offer.pk)) == 1

    # a waiting room that is over: its public report, with axel's own outcome to check
    over = make_drop(slug="over", quantity=2, waiting_room=True, admission_percent=100)
    line.run_wave(Drop.objects.get(pk=over.pk))
    line.join(drop=over, buyer_id=buyer.pk)
    line.run_wave(Drop.objects.get(pk=over.pk), force=True)
    Drop.objects.filter(pk=over.pk).update(ends_at=now)

    # a sold-out drop with an exchange: one of axel's two units is on it, the other may follow
    traded = make_drop(
        slug="traded",
        quantity=2,
        per_buyer_limit=2,
        waiting_room=True,
        ends_at=now + timedelta(hours=1),
        exchange_closes_at=now + timedelta(days=1),
    )
    sold = confirmed_order(traded, buyer, key="x", amount_minor=9800, quantity=2)
    Payment.objects.create(
        order=sold,
        provider="simulated",
        session_id="ses_axe",
        state="captured",
        amount_minor=9800,
        currency="EUR",
    )
    exchange.list_units(order_id=sold.pk, buyer_id=buyer.pk)

    held = holds.reserve(
        drop=sized, variant=sized.variants.get(name="S"), buyer_id=buyer.pk, quantity=1, idempotency_key="h"
    ).hold
    address = holds.reserve(drop=ships, buyer_id=buyer.pk, quantity=1, idempotency_key="a").hold
    lapsed = holds.reserve(drop=seats, buyer_id=buyer.pk, quantity=1, idempotency_key="e", unit="B1").hold
    expire_in([lapsed.pk], -1)
    bought = confirmed_order(paused, buyer, key="b", amount_minor=4900)
    Drop.objects.filter(pk=paused.pk).update(paused=True)
    return {
        "home": "/",
        "drop, scheduled": f"/drops/{soon.slug}/",
        "drop, sizes": f"/drops/{sized.slug}/",
        "drop, seats": f"/drops/{seats.slug}/",
        "drop, sold out": f"/drops/{gone.slug}/",
        "drop, paused": f"/drops/{paused.slug}/",
        "drop, ended": f"/drops/{ended.slug}/",
        "line, waiting": f"/drops/{room.slug}/queue/",
        "line, your turn": f"/drops/{turn.slug}/queue/",
        "line, offered": f"/drops/{offer.slug}/queue/",
        "line, verify": f"/drops/{room.slug}/queue/verify",
        "report": f"/drops/{over.slug}/report/",
        "hold, sizes": f"/holds/{held.pk}/",
        "hold, address": f"/holds/{address.pk}/",
        "hold, expired": f"/holds/{lapsed.pk}/",
        "order": f"/orders/{bought.pk}/",
        "order, on the exchange": f"/orders/{sold.pk}/",
        "orders": "/orders/",
        "cards": "/cards/",
        "your data": "/accounts/data/",
        "api access": "/accounts/api/",
        "terms": "/legal/terms/",
        "privacy": "/legal/privacy/",
        "withdrawal": "/legal/withdrawal/",
        "legal notice": "/legal/notice/",
        "not found": "/no-such-page/",
    }


@pytest.mark.parametrize("locale", ["en-GB", "de-DE"])
def test_no_buyer_page_has_a_critical_or_serious_violation(
    live_store: str, browser: Browser, shop_in_every_state: dict[str, str], locale: str
) -> None:
    visitor = browser.new_context(locale=locale)
    found: dict[str, list[str]] = {}
    for name, path in {"log in": "/accounts/login/", "sign up": "/accounts/signup/", "home": "/"}.items():
        page = visitor.new_page()
        page.goto(live_store + path)
        found[f"visitor: {name}"] = scan(page)
        page.close()
    visitor.close()

    context = browser.new_context(locale=locale)
    page = context.new_page()
    log_in(page, live_store, "axel")
    for name, path in shop_in_every_state.items():
        answer = page.goto(live_store + path)
        assert answer is not None and answer.status == (404 if name == "not found" else 200), name
        found[name] = scan(page)
        if page.evaluate(COUNTDOWN_SPOKEN):  # a live region would read it out every second
            found[name].append("a countdown inside a live region")
    context.close()

    assert not {name: lines for name, lines in found.items() if lines}


def test_control_a_planted_violation_is_reported(live_store: str, page: Page) -> None:
    page.goto(live_store + "/legal/terms/")
    assert scan(page) == []
    page.evaluate(
        """() => {
        const faint = document.createElement('p');
        faint.textContent = 'Hard to read';
        faint.style.color = '#bbbbbb';
        document.querySelector('main').append(faint);
        document.querySelector('main').append(document.createElement('button'));
    }"""
    )
    found = scan(page)
    assert any(line.startswith("color-contrast (serious)") for line in found), found
    assert any(line.startswith("button-name (critical)") for line in found), found


def test_the_first_tab_reaches_a_skip_link_that_moves_focus_to_the_content(
    live_store: str, page: Page
) -> None:
    page.goto(live_store + "/legal/terms/")
    page.keyboard.press("Tab")
    link = page.locator(".skip-link")
    assert link.evaluate("el => el === document.activeElement") and link.is_visible()
    assert link.evaluate("el => getComputedStyle(el).outlineStyle") == "solid"  # the shop's focus ring
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"


# What sticks out past the window's right edge: the innermost elements, by tag, id and class.
WIDEST = """[...document.querySelectorAll('body *')]
  .filter(e => e.getBoundingClientRect().right > window.innerWidth + 0.5)
  .filter(e => ![...e.children].some(c => c.getBoundingClientRect().right > window.innerWidth + 0.5))
  .slice(0, 5).map(e => `${e.tagName.toLowerCase()}#${e.id}.${[...e.classList].join('.')}`
    + ` ${Math.round(e.getBoundingClientRect().right)}px`)"""


def test_pages_follow_the_readers_font_size_and_reflow_at_320_px(
    live_store: str, browser: Browser, shop_in_every_state: dict[str, str]
) -> None:
    context = browser.new_context(viewport={"width": 320, "height": 640})
    page = context.new_page()
    context.new_cdp_session(page).send("Page.setFontSizes", {"fontSizes": {"standard": 24, "fixed": 20}})
    log_in(page, live_store, "axel")
    wide = {}
    for name in (
        "drop, sizes",
        "drop, seats",
        "hold, sizes",
        "hold, address",
        "line, your turn",
        "order",
        "order, on the exchange",
    ):
        page.goto(live_store + shop_in_every_state[name])
        assert page.evaluate("getComputedStyle(document.documentElement).fontSize") == "24px", name
        if not page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"):
            wide[name] = page.evaluate(WIDEST)
    context.close()
    assert not wide, f"these scroll sideways at 320 px with a 24 px font: {wide}"


def runs_out_in(hold_id: int, seconds: float, *, window: float) -> None:
    """The hold's first window `window` seconds long, `seconds` of it left (the database's clock)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE holds_hold SET created_at = now() - make_interval(secs => %s),"
            " expires_at = now() + make_interval(secs => %s) WHERE id = %s",
            [window - seconds, seconds, hold_id],
        )


def test_a_hold_warns_gives_more_time_and_ends_in_place_keeping_what_was_typed(
    live_store: str, page: Page
) -> None:
    drop = make_drop(slug="timed", quantity=2, ships=True)
    buyer = make_buyer("tim")
    hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=1, idempotency_key="k").hold
    # warned 20 s before the end (a third of 20 s is under the 20 s floor): at once; 18 s leave a
    # loaded machine time to log in and press before the end (8 s did not, once, in CI)
    runs_out_in(hold.pk, 18, window=20)
    log_in(page, live_store, "tim")
    page.goto(f"{live_store}/holds/{hold.pk}/")
    page.evaluate("window.stayedOnThePage = true")  # gone if the page reloads
    page.fill("input[name=name]", "Tim Typed")

    # the warning is an alert in the accessibility tree, and the countdown is not in any live region
    alert = page.get_by_role("alert").filter(has_text="Less than a minute left to start paying.")
    alert.wait_for()
    assert (
        page.locator("#hold-countdown").evaluate(
            "el => el.closest('[aria-live], [role=alert], [role=status]')"
        )
        is None
    )

    # "I need more time": half the first window more, said in place
    before = Hold.objects.get(pk=hold.pk).expires_at
    page.click("#more-time")
    page.get_by_role("alert").filter(has_text="More time given").wait_for()
    assert Hold.objects.get(pk=hold.pk).expires_at - before == timedelta(seconds=10)

    # at zero: said in place, nothing to pay with, the typed name still there, no reload
    page.get_by_role("alert").filter(has_text="Time is up").wait_for(timeout=45_000)
    assert page.locator("#pay").is_disabled()
    assert page.input_value("input[name=name]") == "Tim Typed"
    assert page.evaluate("window.stayedOnThePage") is True


def test_the_waiting_room_speaks_calmly_says_the_turn_at_once_and_sells_by_keyboard_alone(
    live_daphne: str, payment_provider: str, celery_worker: Worker, page: Page
) -> None:
    # given a live room of 2 units with four tickets ahead of kim
    drop = make_drop(
        slug="wr-live", product_name="Calm", quantity=2, waiting_room=True, admission_percent=100
    )
    off_the_loop(lambda: line.run_wave(Drop.objects.get(pk=drop.pk)))  # the start: an empty draw

    def ahead(n: int) -> None:  # a buyer in line before kim, made off the loop too
        line.join(drop=drop, buyer_id=make_buyer(f"ahead{n}").pk)

    for n in range(4):
        off_the_loop(partial(ahead, n))
    make_buyer("kim")
    join_from_the_link(page, live_daphne, "kim")

    def wave(
        later_s: int,
    ) -> None:  # as if later_s had passed: who was let in and did not come counts no more
        when = timezone.now() + timedelta(seconds=later_s)
        off_the_loop(lambda: line.run_wave(Drop.objects.get(pk=drop.pk), now=when, force=True))

    # the place is said once in a polite status ...
    page.get_by_role("status").filter(has_text="Your place in line: 5.").wait_for()
    page.evaluate(
        """() => { const said = document.getElementById('queue-announce'); window.said = [];
        new MutationObserver(() => window.said.push(said.textContent)).observe(said, {childList: true}); }"""
    )
    # ... and not again within half a minute, though the line moves and the page shows it
    wave(0)
    page.wait_for_function("() => document.querySelector('#position').textContent === '3'")
    assert page.evaluate("window.said") == []

    # the turn: an alert, the title, the focus on the turn's heading
    wave(200)
    wave(400)
    page.get_by_role("alert").filter(has_text="It's your turn: reserve now.").wait_for()
    assert page.title().startswith("Your turn · ")
    assert page.evaluate("document.activeElement.id") == "buy-heading"

    # the keyboard alone from there to a paid order
    def tab_to(element_id: str) -> None:
        for _ in range(40):
            if page.evaluate("document.activeElement && document.activeElement.id") == element_id:
                return
            page.keyboard.press("Tab")
        raise AssertionError(f"Tab never reached #{element_id}")

    tab_to("buy")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/holds/\d+/$"))
    tab_to("pay")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(re.escape(payment_provider) + r"/pay/"))
    tab_to("pay")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/orders/\d+/$"))
    page.wait_for_selector("#order-state[data-state=confirmed]", timeout=30_000)


def test_the_drop_page_opens_and_pauses_in_place_with_the_focus_kept_and_the_change_said(
    live_daphne: str, page: Page
) -> None:
    drop = make_drop(
        slug="opens", product_name="Opens", quantity=3, starts_at=timezone.now() + timedelta(seconds=6)
    )
    make_buyer("oda")
    log_in(page, live_daphne, "oda")
    page.goto(f"{live_daphne}/drops/opens/")
    page.evaluate("window.stayedOnThePage = true")  # gone if the page reloads

    # at the start: the Reserve form appears where the countdown was, the focus in the buy box
    page.locator("#buy").wait_for(timeout=20_000)
    assert page.evaluate("window.stayedOnThePage") is True
    assert page.evaluate("document.activeElement.classList.contains('buy-box')")
    assert page.locator("#page-announce").inner_text().lower() == "live"

    # a pause: said, no Reserve, still the same page; Reserve works again after the resume
    off_the_loop(lambda: switch.pause_drop(drop=Drop.objects.get(pk=drop.pk), actor_id=None, reason="stock"))
    page.get_by_role("status").filter(has_text="This sale is paused.").wait_for(timeout=15_000)
    assert page.locator("#buy").count() == 0 and page.evaluate("window.stayedOnThePage") is True
    off_the_loop(lambda: switch.resume_drop(drop=Drop.objects.get(pk=drop.pk), actor_id=None))
    page.locator("#buy").wait_for(timeout=15_000)
    page.click("#buy")  # the form swapped in is the enhanced one: it reserves through the API
    page.wait_for_url(re.compile(r"/holds/\d+/$"))
    assert Hold.objects.filter(buyer__username="oda", drop=drop).count() == 1
