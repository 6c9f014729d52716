"""Saved cards against localstripe: a buyer saves a card (a SetupIntent confirmed as Stripe.js
confirms it), pays a hold in one press, falls back to the normal form on a decline, and can never
charge another buyer's card.

What the buyer's browser does with Stripe is done here over HTTP, as localstripe's Stripe.js
stand-in does it (confirmCardSetup posts the card to localstripe's SetupIntent confirm, with the
publishable key and the client secret, never to us). localstripe sends no event when a
manual-capture intent is authorised: that one is Stripe's documented
`payment_intent.amount_capturable_updated`, signed as Stripe signs (as in test_three_d_secure).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC

import httpx
import pytest
from django.test import Client
from pytest_django import Settings

from checkout.models import Order, Payment, PaymentCustomer, SavedCard
from checkout.stripe_page import STRIPE_DOCUMENTED
from holds import services as holds
from holds.models import Hold
from tests.checkout.helpers import stripe_api_at
from tests.checkout.test_three_d_secure import at_stripe, deliver
from tests.conftest import STRIPE_PUBLISHABLE_KEY, STRIPE_SECRET_KEY, STRIPE_WEBHOOK_SECRET
from tests.factories import make_buyer, make_drop

pytestmark = pytest.mark.django_db(transaction=True)

VISA = "4242424242424242"
DECLINED_WHEN_CHARGED = "4000000000000341"  # saves fine, declined when charged (Stripe's test card)
CHALLENGED = "4000002760003184"  # asks for 3-D Secure, on saving and on paying


@pytest.fixture
def on_stripe(settings: Settings, localstripe: str) -> Iterator[str]:
    settings.PAYMENT_PROVIDER = "stripe"
    settings.STRIPE_SECRET_KEY = STRIPE_SECRET_KEY
    settings.STRIPE_PUBLISHABLE_KEY = STRIPE_PUBLISHABLE_KEY
    settings.STRIPE_WEBHOOK_SECRET = STRIPE_WEBHOOK_SECRET
    with stripe_api_at(settings, localstripe):
        yield localstripe


def signed_in(name: str) -> tuple[Client, int]:
    buyer = make_buyer(name)
    client = Client()
    client.force_login(buyer)
    return client, buyer.pk


def setup_secret(client: Client) -> str:
    page = client.get("/cards/")
    assert page.status_code == 200
    found = re.search(r'data-secret="(seti_\w+_secret_\w+)"', page.content.decode())
    assert found, "the cards page offers no setup form"
    return found.group(1)


def confirm_setup(base: str, secret: str, number: str, *, success: bool = True) -> dict:
    """What Stripe.js's confirmCardSetup does in the browser: the card straight to Stripe."""
    setup_id = secret.split("_secret_")[0]
    card = {"number": number, "exp_month": "12", "exp_year": "34", "cvc": "123"}
    body = {"key": STRIPE_PUBLISHABLE_KEY, "client_secret": secret, "use_stripe_sdk": True}
    answer = httpx.post(
        f"{base}/v1/setup_intents/{setup_id}/confirm",
        content=json.dumps(body | {"payment_method_data": {"type": "card", "card": card}}),
    )
    if answer.json().get("status") == "requires_action":  # the bank's challenge, passed or failed
        verb = "confirm" if success else "cancel"
        answer = httpx.post(f"{base}/v1/setup_intents/{setup_id}/{verb}", content=json.dumps(body))
    return answer.json()


def save(client: Client, base: str, number: str) -> SavedCard:
    setup = confirm_setup(base, setup_secret(client), number)
    assert setup["status"] == "succeeded", setup
    answer = client.post("/cards/save", {"setup_intent": setup["id"]})
    assert answer.status_code == 302 and answer["Location"] == "/cards/"
    return SavedCard.objects.get(payment_method_id=setup["payment_method"])


def holding(slug: str, buyer: int) -> Hold:
    drop = make_drop(slug=slug, quantity=2, hold_seconds=60)
    return holds.reserve(drop=drop, buyer_id=buyer, quantity=1, idempotency_key="k").hold


def test_a_saved_card_pays_a_hold_in_one_press_and_the_order_confirms(on_stripe: str) -> None:
    client, buyer = signed_in("ada")
    card = save(client, on_stripe, VISA)
    assert (card.buyer_id, card.brand, card.last4, card.exp_month, card.exp_year) == (
        buyer,
        "visa",
        "4242",
        12,
        2034,
    )
    customer = PaymentCustomer.objects.get(buyer_id=buyer)
    # attached to the buyer's customer at Stripe; we keep the last four and nothing else of the number
    assert (
        at_stripe(on_stripe, f"/v1/payment_methods/{card.payment_method_id}")["customer"]
        == customer.customer_id
    )
    listed = client.get("/cards/").content.decode()
    assert "•••• 4242" in listed and VISA not in listed
    # saving the same setup again (a reload) keeps one card
    client.post("/cards/save", {"setup_intent": at_stripe_setup_of(card, on_stripe)})
    assert SavedCard.objects.count() == 1

    hold = holding("one-press", buyer)
    page = client.get(f"/holds/{hold.pk}/").content.decode()
    assert 'id="pay-saved"' in page and "card •••• 4242" in page
    answer = client.post(f"/holds/{hold.pk}/pay-saved", {"card": card.pk})
    order = Order.objects.get()
    assert answer.status_code == 302 and answer["Location"] == order.get_absolute_url()
    payment = Payment.objects.get()
    intent = at_stripe(on_stripe, f"/v1/payment_intents/{payment.session_id}")
    assert intent["status"] == "requires_capture" and intent["payment_method"] == card.payment_method_id
    assert intent["customer"] == customer.customer_id

    assert deliver("payment_intent.amount_capturable_updated", intent) == "confirmed"
    order.refresh_from_db()
    assert order.state == "confirmed" and Hold.objects.get().state == "sold"


def at_stripe_setup_of(card: SavedCard, base: str) -> str:
    """The SetupIntent that saved the card (the one that names its payment method)."""
    setups = at_stripe(base, "/v1/setup_intents?limit=100")["data"]
    return next(s["id"] for s in setups if s["payment_method"] == card.payment_method_id)


def test_a_declined_saved_card_falls_back_to_the_normal_form(on_stripe: str) -> None:
    client, buyer = signed_in("bea")
    card = save(client, on_stripe, DECLINED_WHEN_CHARGED)
    hold = holding("one-press-declined", buyer)

    answer = client.post(f"/holds/{hold.pk}/pay-saved", {"card": card.pk}, follow=True)
    assert "Your saved card was declined" in answer.content.decode()
    first = Payment.objects.get()
    intent = at_stripe(on_stripe, f"/v1/payment_intents/{first.session_id}")
    assert intent["last_payment_error"]["code"] == "card_declined" and intent["status"] != "requires_capture"
    assert deliver("payment_intent.payment_failed", intent) == "declined"
    assert Order.objects.get().state == "failed" and Hold.objects.get().state == "held"

    # the hold page offers the normal form now (another card), not the saved card again
    page = client.get(f"/holds/{hold.pk}/").content.decode()
    assert 'id="pay-saved"' not in page and 'id="pay"' in page
    answer = client.post(f"/holds/{hold.pk}/pay")
    second = Payment.objects.exclude(pk=first.pk).get()
    assert answer["Location"].endswith(f"/checkout/stripe/{second.session_id}")
    form = client.get(f"/checkout/stripe/{second.session_id}").content.decode()
    assert 'id="payment-element"' in form
    # the payment step says its deadline: the hold's, which paying extended once
    until = Hold.objects.get().expires_at.astimezone(UTC)
    assert f'<time datetime="{until.isoformat()}" data-local="time">{until:%H:%M:%S} UTC</time>' in form
    assert f'data-countdown="{Hold.objects.get().expires_at.isoformat()}"' in form


def test_a_card_whose_bank_asks_for_3ds_goes_on_to_the_challenge_on_our_pay_page(on_stripe: str) -> None:
    client, buyer = signed_in("cleo")
    card = save(client, on_stripe, CHALLENGED)
    hold = holding("one-press-3ds", buyer)
    answer = client.post(f"/holds/{hold.pk}/pay-saved", {"card": card.pk})
    payment = Payment.objects.get()
    assert answer["Location"] == payment.redirect_url
    shown = client.get(f"/checkout/stripe/{payment.session_id}").content.decode()
    assert 'data-challenge="1"' in shown
    assert at_stripe(on_stripe, f"/v1/payment_intents/{payment.session_id}")["status"] == "requires_action"


def test_another_buyers_card_is_never_charged_nor_removed(on_stripe: str) -> None:
    owner, _ = signed_in("dora")
    card = save(owner, on_stripe, VISA)
    thief, thief_id = signed_in("eve")
    hold = holding("not-yours", thief_id)
    expires = hold.expires_at

    assert thief.post(f"/holds/{hold.pk}/pay-saved", {"card": card.pk}).status_code == 404
    # nothing moved: no order, no payment, no intent, the hold's one extension unspent
    assert not Order.objects.exists() and not Payment.objects.exists()
    assert Hold.objects.get().expires_at == expires and not Hold.objects.get().extended
    assert at_stripe(on_stripe, "/v1/payment_intents?limit=100")["data"] == [] or all(
        i["payment_method"] != card.payment_method_id
        for i in at_stripe(on_stripe, "/v1/payment_intents?limit=100")["data"]
    )
    # nor removed, nor saved as theirs from the owner's setup id
    assert thief.post(f"/cards/{card.pk}/remove").status_code == 404
    assert thief.post("/cards/save", {"setup_intent": at_stripe_setup_of(card, on_stripe)}).status_code == 404
    assert SavedCard.objects.get().buyer_id == card.buyer_id
    assert at_stripe(on_stripe, f"/v1/payment_methods/{card.payment_method_id}")["customer"] is not None
    # and the thief's hold page offers no card of anyone's
    assert 'id="pay-saved"' not in thief.get(f"/holds/{hold.pk}/").content.decode()


def test_removing_a_card_detaches_it_at_stripe(on_stripe: str) -> None:
    client, _ = signed_in("fay")
    card = save(client, on_stripe, VISA)
    answer = client.post(f"/cards/{card.pk}/remove")
    assert answer.status_code == 302 and not SavedCard.objects.exists()
    assert at_stripe(on_stripe, f"/v1/payment_methods/{card.payment_method_id}")["customer"] is None
    assert client.post(f"/cards/{card.pk}/remove").status_code == 404  # gone is gone


def test_garbage_is_refused_and_changes_nothing(on_stripe: str) -> None:
    client, buyer = signed_in("gus")
    hold = holding("garbage", buyer)
    for bad in ["", "abc", "1e3", "-1", "\uff11", "9" * 40, "1\x00"]:
        assert client.post(f"/holds/{hold.pk}/pay-saved", {"card": bad}).status_code == 400, bad
    assert client.post(f"/holds/{hold.pk}/pay-saved", {"card": "999999"}).status_code == 404
    for bad in ["", "seti_", "pi_123", "seti_x\x00", "seti_" + "a" * 80, "seti_../x"]:
        assert client.post("/cards/save", {"setup_intent": bad}).status_code == 400, bad
    assert client.post("/cards/save", {"setup_intent": "seti_unknown123"}).status_code == 404
    assert client.get("/cards/save").status_code == 405
    assert client.get("/cards/1/remove").status_code == 405
    assert client.post("/cards/abc/remove").status_code == 404
    # a setup not finished (no card confirmed yet) saves nothing
    secret = setup_secret(client)
    answer = client.post("/cards/save", {"setup_intent": secret.split("_secret_")[0]}, follow=True)
    assert "was not saved" in answer.content.decode()
    assert not SavedCard.objects.exists() and not Order.objects.exists() and not Payment.objects.exists()
    assert Hold.objects.get().state == "held" and not Hold.objects.get().extended


def test_every_card_form_needs_the_csrf_token(on_stripe: str) -> None:
    owner, _ = signed_in("hal")
    card = save(owner, on_stripe, VISA)
    client = Client(enforce_csrf_checks=True)
    client.force_login(card.buyer)
    hold = holding("csrf", card.buyer_id)
    assert client.post(f"/holds/{hold.pk}/pay-saved", {"card": card.pk}).status_code == 403
    assert client.post(f"/cards/{card.pk}/remove").status_code == 403
    assert client.post("/cards/save", {"setup_intent": "seti_abc"}).status_code == 403
    assert SavedCard.objects.count() == 1 and not Payment.objects.exists()


def test_the_cards_page_allows_stripe_js_and_signed_out_buyers_log_in(on_stripe: str) -> None:
    assert Client().get("/cards/")["Location"].startswith("/accounts/login/")
    client, _ = signed_in("ivy")
    page = client.get("/cards/")
    directives = {
        part.split()[0]: set(part.split()[1:])
        for part in page["Content-Security-Policy"].split(";")
        if part.strip()
    }
    # the pay page's additions (Stripe's documented list for Stripe.js), and the page loads Stripe.js
    for name, sources in STRIPE_DOCUMENTED.items():
        assert set(sources) <= directives[name], name
    assert '<script src="https://js.stripe.com/v3/"></script>' in page.content.decode()


def test_back_from_a_3ds_redirect_the_cards_page_saves_the_card(on_stripe: str) -> None:
    """Stripe.js's confirmSetup returns to /cards/?setup_intent=... after a redirected challenge."""
    client, buyer = signed_in("jo")
    setup = confirm_setup(on_stripe, setup_secret(client), CHALLENGED)  # its challenge passed
    assert setup["status"] == "succeeded"
    assert (
        client.get(f"/cards/?setup_intent={setup['id']}&redirect_status=succeeded")["Location"] == "/cards/"
    )
    assert client.get(f"/cards/?setup_intent={setup['id']}").status_code == 302  # a reload: the same card
    assert SavedCard.objects.get().buyer_id == buyer
    assert client.get("/cards/?setup_intent=seti_x%00").status_code == 200  # garbage is no setup
    other, _ = signed_in("kit")
    assert other.get(f"/cards/?setup_intent={setup['id']}").status_code == 404
    assert SavedCard.objects.count() == 1


def test_a_buyers_data_lists_their_cards_and_erasure_forgets_and_detaches_them(on_stripe: str) -> None:
    from accounts import privacy

    client, buyer = signed_in("lou")
    card = save(client, on_stripe, VISA)
    exported = privacy.export(user_id=buyer)["saved_cards"]
    assert isinstance(exported, list)
    assert [(c["brand"], c["last4"], c["expires"]) for c in exported] == [("visa", "4242", "12/2034")]

    privacy.erase(user_id=buyer)
    assert not SavedCard.objects.exists() and not PaymentCustomer.objects.exists()
    assert at_stripe(on_stripe, f"/v1/payment_methods/{card.payment_method_id}")["customer"] is None
