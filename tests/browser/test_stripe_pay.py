"""Paying with Stripe in Chromium: our page, localstripe's Stripe.js stand-in, a daphne on localstripe.

A declined card's payment_intent.payment_failed comes from localstripe itself. localstripe sends no
event when a manual-capture intent is authorised, so that one is Stripe's documented
payment_intent.amount_capturable_updated around the intent localstripe holds, signed as Stripe signs.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import TYPE_CHECKING

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from catalogue.services import NewVariant
from checkout.models import Order, Payment
from holds.counts import invariant, invariant_by_variant
from holds.models import Hold
from shop.models import Drop
from tests.browser.helpers import reserve_from_the_drop_page
from tests.checkout.helpers import stripe_event, stripe_signature
from tests.conftest import ROOT, STRIPE_SECRET_KEY, Worker
from tests.factories import make_buyer, make_drop

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

PASSWORD = "pw-pw-pw-pw-pw"

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def size_m(drop: Drop) -> tuple[int, ...]:
    m = next(v for v in invariant_by_variant(drop_id=drop.pk) if v.name == "M")
    return (m.available, m.held, m.sold, m.refunded, m.drift)


def enter_card(page: Page, number: str) -> None:
    """The stand-in's card element: plain inputs in our page, read by Stripe.js and sent to Stripe."""
    page.fill("#payment-element input[placeholder=number]", number)
    page.fill("#payment-element input[placeholder=exp_month]", "12")
    page.fill("#payment-element input[placeholder=exp_year]", "34")
    page.fill("#payment-element input[placeholder=cvc]", "123")
    page.fill("#payment-element input[placeholder=postal_code]", "10115")
    page.click("#submit")


def test_a_declined_card_then_another_card_pays_on_our_page_and_the_merchant_refunds_it(
    stripe_daphne: str, localstripe: str, stripe_worker: Worker, page: Page, browser: Browser, roles: None
) -> None:
    sizes = [NewVariant("S", 1), NewVariant("M", 1), NewVariant("L", 1)]
    drop = make_drop(
        slug="stripe-boot",
        product_name="Stripe Boot",
        quantity=3,
        variants=sizes,
        price_minor=12900,
        tax_rate=Decimal("19.00"),
        ships=True,
    )
    make_buyer("sofia")
    posted: list[str] = []  # what left the browser for our own server
    page.on(
        "request", lambda r: posted.append(r.post_data or "") if r.url.startswith(stripe_daphne) else None
    )

    reserve_from_the_drop_page(page, stripe_daphne, "stripe-boot", "sofia", variant="M")  # picks size M
    assert page.locator("#hold-variant").inner_text() == "M"
    # a boot ships: the hold page asks where to, before paying
    page.wait_for_selector("#address-needed")
    page.fill("#id_name", "Sofia Weber")
    page.fill("#id_line1", "Torstraße 1")
    page.fill("#id_postal_code", "10119")
    page.fill("#id_city", "Berlin")
    page.select_option("#id_country", "DE")
    page.click("#save-address")
    page.wait_for_selector("#address-given")
    page.click("#pay")
    page.wait_for_url(re.compile(re.escape(stripe_daphne) + r"/checkout/stripe/pi_\w+$"))
    first = Payment.objects.get()
    enter_card(page, "4000000000000341")  # declined when charged

    page.wait_for_selector("#payment-error:not([hidden])")
    assert "declined" in page.locator("#payment-error").inner_text().lower()
    # this intent is done with: reloaded, the page offers no form for it, only the way back
    page.reload()
    page.wait_for_selector("#payment-declined")
    assert page.locator("#payment-form").count() == 0
    # localstripe's payment_intent.payment_failed reaches the shop: the attempt fails, the hold runs on
    page.click("#payment-declined a")
    page.wait_for_url(re.compile(r"/orders/\d+/$"))
    # the order page reloads itself when the attempt fails: then it offers another card
    page.wait_for_selector("#try-again", timeout=30_000)
    assert Payment.objects.get(pk=first.pk).state == "failed"
    assert Hold.objects.get(drop=drop).state == "held"

    page.click("#try-again")
    page.wait_for_url(re.compile(r"/checkout/stripe/pi_\w+$"))
    second = Payment.objects.exclude(pk=first.pk).get()
    assert (
        second.session_id and second.session_id != first.session_id and page.url.endswith(second.session_id)
    )
    page.screenshot(path=str(ROOT / ".data" / "test" / "stripe-pay.png"))  # for a person to look at
    enter_card(page, "4242424242424242")
    page.wait_for_url(re.compile(r"/orders/\d+/$"))

    intent = httpx.get(
        f"{localstripe}/v1/payment_intents/{second.session_id}",
        headers={"Authorization": f"Bearer {STRIPE_SECRET_KEY}"},
    ).json()
    assert intent["status"] == "requires_capture"
    body = stripe_event("payment_intent.amount_capturable_updated", intent)
    answer = httpx.post(
        f"{stripe_daphne}/checkout/webhooks/stripe",
        content=body,
        headers={"Stripe-Signature": stripe_signature(body), "content-type": "application/json"},
    )
    assert answer.status_code == 200, answer.text

    page.wait_for_selector("#order-state[data-state=confirmed]", timeout=30_000)
    assert "Confirmed" in page.locator("#order-title").inner_text()
    page.reload()  # the order page shows what was bought (the size), its tax and where it goes
    assert page.locator("#order-variant").inner_text() == "M"
    assert "Torstraße 1" in page.locator("#order-address").inner_text()
    assert "19%" in page.locator("#price-breakdown").inner_text()
    assert page.locator("#price-tax").inner_text() == "€20.60"  # 129.00 includes 19%: 20.60
    assert Order.objects.get().state == "confirmed" and Hold.objects.get(drop=drop).state == "sold"
    numbers = invariant(drop_id=drop.pk)
    assert (numbers.available, numbers.held, numbers.sold, numbers.drift) == (2, 0, 1, 0)
    assert size_m(drop) == (0, 0, 1, 0, 0)  # available, held, sold, refunded, drift
    # no card number ever reached our server: only token ids did
    assert posted and not any("4242424242424242" in p or "4000000000000341" in p for p in posted)
    for _ in range(30):  # the worker captures at Stripe
        if Payment.objects.get(pk=second.pk).state == "captured":
            break
        page.wait_for_timeout(500)
    assert Payment.objects.get(pk=second.pk).state == "captured"

    # the merchant refunds it in the admin, the unit back on sale; localstripe shows the refund
    staff_user = get_user_model().objects.create_user(username="mona", password=PASSWORD, is_staff=True)
    staff_user.groups.add(Group.objects.get(name="Merchants"))
    merchant = browser.new_context().new_page()
    merchant.goto(f"{stripe_daphne}/admin/login/?next=/admin/checkout/order/")
    merchant.fill("#id_username", "mona")
    merchant.fill("#id_password", PASSWORD)
    merchant.click("input[type=submit]")
    order = Order.objects.get()
    merchant.goto(f"{stripe_daphne}/admin/checkout/order/{order.pk}/change/")
    merchant.click("#refund-order")
    merchant.check("#id_restock")
    merchant.fill("#id_reason", "the sole came loose")
    merchant.click("#refund-form input[type=submit]")
    merchant.wait_for_url(re.compile(rf"/admin/checkout/order/{order.pk}/change/$"))
    assert "refunded" in merchant.locator(".messagelist").inner_text()
    refunds = httpx.get(
        f"{localstripe}/v1/refunds?payment_intent={second.session_id}",
        headers={"Authorization": f"Bearer {STRIPE_SECRET_KEY}"},
    ).json()["data"]
    assert [r["amount"] for r in refunds] == [12900]
    assert Order.objects.get().state == "refunded"
    numbers = invariant(drop_id=drop.pk)
    assert (numbers.available, numbers.sold, numbers.refunded, numbers.drift) == (3, 0, 0, 0)
    assert size_m(drop) == (1, 0, 0, 0, 0)  # back on sale in size M


def watch_for_csp_violations(page: Page) -> list[str]:
    """Every securitypolicyviolation event of the page's documents, whatever page is shown (the
    page fixture also fails on Chromium's console reports of them)."""
    violations: list[str] = []
    page.expose_function("floodgateViolation", lambda said: violations.append(said))
    page.add_init_script(
        "document.addEventListener('securitypolicyviolation', function (e) {"
        " window.floodgateViolation(e.violatedDirective + ' ' + e.blockedURI); });"
    )
    return violations


@pytest.mark.parametrize("passes", [True, False], ids=["passed", "failed"])
def test_a_3d_secure_challenge_on_our_page_with_the_csp_enforced(
    stripe_daphne: str, localstripe: str, stripe_worker: Worker, page: Page, passes: bool
) -> None:
    slug = "tds-pass" if passes else "tds-fail"
    make_drop(slug=slug, product_name="Challenge Cap", quantity=1, price_minor=3900)
    make_buyer("tomas")
    violations = watch_for_csp_violations(page)
    reserve_from_the_drop_page(page, stripe_daphne, slug, "tomas")
    with page.expect_response(re.compile(r"/checkout/stripe/pi_\w+$")) as shown:
        page.click("#pay")
    page.wait_for_url(re.compile(re.escape(stripe_daphne) + r"/checkout/stripe/pi_\w+$"))
    payment = Payment.objects.get()
    # the page's policy is enforced (not report-only) and allows Stripe.js's stand-in by its origin
    headers = shown.value.headers
    assert "content-security-policy-report-only" not in headers
    policy = [d.split() for d in headers["content-security-policy"].split(";") if d.strip()]
    directives = {words[0]: words[1:] for words in policy}
    assert localstripe in directives["script-src"] and "'unsafe-inline'" not in directives["script-src"]
    assert localstripe in directives["frame-src"] and localstripe in directives["connect-src"]
    enter_card(page, "4000002760003184")  # its bank always asks for 3-D Secure

    # localstripe's stand-in for the bank's challenge
    page.get_by_role("button", name="Complete authentication" if passes else "Fail authentication").click()
    intent = httpx.get(
        f"{localstripe}/v1/payment_intents/{payment.session_id}",
        headers={"Authorization": f"Bearer {STRIPE_SECRET_KEY}"},
    ).json()
    if passes:
        page.wait_for_url(re.compile(r"/orders/\d+/$"))
        assert intent["status"] == "requires_capture"
        body = stripe_event("payment_intent.amount_capturable_updated", intent)
    else:
        page.wait_for_selector("#payment-error:not([hidden])")
        assert "did not confirm" in page.locator("#payment-error").inner_text()
        assert intent["status"] == "requires_payment_method" and intent["latest_charge"] is None
        body = stripe_event("payment_intent.payment_failed", intent)  # localstripe sends none
    answer = httpx.post(
        f"{stripe_daphne}/checkout/webhooks/stripe",
        content=body,
        headers={"Stripe-Signature": stripe_signature(body), "content-type": "application/json"},
    )
    assert answer.status_code == 200, answer.text
    if passes:
        page.wait_for_selector("#order-state[data-state=confirmed]", timeout=30_000)
        assert Hold.objects.get().state == "sold"
    else:
        page.click("#another-card a")
        page.wait_for_selector("#order-state[data-state=failed]", timeout=30_000)
        assert "did not confirm" in page.locator("#order-detail").inner_text()
        assert Hold.objects.get().state == "held"  # the hold runs on: another card may still pay
    assert violations == []
