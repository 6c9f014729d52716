"""Tax through checkout: the provider charges the gross, the order keeps net, tax and rate as they
were, and the hold page, order page, e-mail, export and API show them."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from decimal import Decimal

import httpx
import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.test import Client

from checkout import outbox
from checkout import services as checkout
from checkout.models import Order, OrderState
from holds import services as holds
from holds.models import Hold
from shop.models import Drop, Product
from tests.conftest import PROVIDER_SECRET, WEBHOOK_SECRET
from tests.factories import make_buyer, make_drop, merchant


def taxed_drop(slug: str, *, currency: str = "EUR", price_minor: int = 999) -> Drop:
    return make_drop(
        slug=slug,
        quantity=5,
        price_minor=price_minor,
        currency=currency,
        tax_rate=Decimal("19"),
        per_buyer_limit=3,
    )


def held(drop: Drop, quantity: int = 3) -> tuple[User, Hold]:
    buyer = make_buyer()
    return buyer, holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=quantity, idempotency_key="k").hold


@pytest.fixture
def provider(settings, payment_provider: str) -> Iterator[str]:
    settings.PAYMENT_PROVIDER_URL = payment_provider
    settings.PAYMENT_PROVIDER_SECRET = PROVIDER_SECRET
    settings.PAYMENT_WEBHOOK_SECRET = WEBHOOK_SECRET
    yield payment_provider


def charged_at_provider(provider: str, session_id: str) -> int:
    session = httpx.get(
        f"{provider}/api/sessions/{session_id}", headers={"Authorization": f"Bearer {PROVIDER_SECRET}"}
    )
    return int(session.json()["amount_minor"])


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("included", "net", "tax", "gross"),
    [
        (False, 2997, 569, 3566),  # 3 x 9.99 net, 19% added on the line
        (True, 2518, 479, 2997),  # 3 x 9.99 gross, 19% inside
    ],
)
def test_the_provider_charges_the_gross_and_the_order_keeps_the_tax(
    settings, provider: str, included: bool, net: int, tax: int, gross: int
) -> None:
    settings.PRICES_INCLUDE_TAX = included
    buyer, hold = held(taxed_drop(f"charged-{int(included)}"))

    started = checkout.start_payment(hold_id=hold.pk, buyer_id=buyer.pk)

    order = Order.objects.get(pk=started.order.pk)
    assert (order.net_minor, order.tax_minor, order.amount_minor) == (net, tax, gross)
    assert order.tax_rate == Decimal("19.00")
    assert started.payment.amount_minor == gross
    assert charged_at_provider(provider, str(started.payment.session_id)) == gross


@pytest.mark.django_db(transaction=True)
def test_a_rate_changed_after_payment_started_does_not_rewrite_the_order(settings, provider: str) -> None:
    settings.PRICES_INCLUDE_TAX = False
    drop = taxed_drop("snapshot")
    buyer, hold = held(drop)
    checkout.start_payment(hold_id=hold.pk, buyer_id=buyer.pk)
    Product.objects.filter(pk=drop.product_id).update(tax_rate=Decimal("7"))

    again = checkout.start_payment(hold_id=hold.pk, buyer_id=buyer.pk)
    client = Client()
    client.force_login(buyer)
    page = client.get(f"/holds/{hold.pk}/").content.decode()

    assert (again.order.amount_minor, again.order.tax_minor) == (3566, 569)
    assert "VAT 19%" in page and "€35.66" in page


def taxed_order(*, state: str = OrderState.CONFIRMED) -> Order:
    """A confirmed order of 3 x 9.99 with 19% added (as start_payment writes it)."""
    buyer, hold = held(taxed_drop("shown"))
    buyer.email = "tess@example.test"
    buyer.save()
    assert holds.confirm(hold_id=hold.pk)
    return Order.objects.create(
        hold=hold,
        buyer=buyer,
        drop=hold.drop,
        quantity=3,
        amount_minor=3566,
        tax_minor=569,
        tax_rate=Decimal("19"),
        currency="EUR",
        state=state,
    )


@pytest.mark.django_db
def test_the_hold_page_shows_net_tax_and_the_gross_it_will_charge(settings) -> None:
    settings.PRICES_INCLUDE_TAX = False
    buyer, hold = held(taxed_drop("hold-page"))
    client = Client()
    client.force_login(buyer)

    page = client.get(f"/holds/{hold.pk}/").content.decode()

    assert '<dd id="price-net">€29.97</dd>' in page
    assert "VAT 19%" in page and '<dd id="price-tax">€5.69</dd>' in page
    assert '<dd id="price-gross"><strong>€35.66</strong></dd>' in page
    assert "Order with obligation to pay · €35.66</button>" in page


@pytest.mark.django_db
def test_an_untaxed_hold_shows_its_total_alone() -> None:
    buyer, hold = held(make_drop(slug="untaxed-hold", price_minor=999, per_buyer_limit=3))
    client = Client()
    client.force_login(buyer)

    page = client.get(f"/holds/{hold.pk}/").content.decode()

    assert 'id="price-net"' not in page and 'id="price-tax"' not in page
    assert '<dd id="price-gross"><strong>€29.97</strong></dd>' in page


@pytest.mark.django_db
def test_the_order_page_and_its_api_answer_show_the_breakdown() -> None:
    order = taxed_order()
    client = Client()
    client.force_login(order.buyer)

    page = client.get(f"/orders/{order.pk}/").content.decode()
    answer = client.get(f"/api/orders/{order.pk}").json()  # checked against the published schema too

    assert '<strong id="order-total">€35.66</strong>' in page
    assert '<dd id="price-net">€29.97</dd>' in page and '<dd id="price-tax">€5.69</dd>' in page
    assert (answer["amount_minor"], answer["net_minor"], answer["tax_minor"]) == (3566, 2997, 569)
    assert answer["tax_rate"] == "19.00"


@pytest.mark.django_db
def test_an_order_from_before_tax_is_all_net() -> None:
    buyer, hold = held(make_drop(slug="old-order", per_buyer_limit=3), quantity=1)
    Order.objects.create(
        hold=hold, buyer=buyer, drop=hold.drop, quantity=1, amount_minor=4900, currency="EUR"
    )
    client = Client()
    client.force_login(buyer)

    order = Order.objects.get(hold=hold)
    answer = client.get(f"/api/orders/{order.pk}").json()

    assert (order.net_minor, order.tax_minor, order.tax_rate) == (4900, 0, Decimal("0.00"))
    assert (answer["net_minor"], answer["tax_minor"], answer["tax_rate"]) == (4900, 0, "0.00")


@pytest.mark.django_db
def test_the_confirmation_email_says_net_and_tax() -> None:
    outbox.announce(taxed_order())

    outbox.relay_outbox()

    body = mail.outbox[0].body
    assert "Total paid: €35.66\nof which net: €29.97\nVAT 19%: €5.69\n" in body


@pytest.mark.django_db
def test_the_export_has_net_tax_and_rate_in_the_currencys_decimals(roles: None) -> None:
    order = taxed_order()
    jpy_buyer, jpy_hold = held(taxed_drop("yen", currency="JPY", price_minor=999), quantity=1)
    Order.objects.create(
        hold=jpy_hold,
        buyer=jpy_buyer,
        drop=jpy_hold.drop,
        quantity=1,
        amount_minor=1189,
        tax_minor=190,
        tax_rate=Decimal("19"),
        currency="JPY",
    )

    answer = merchant().post(
        "/admin/shop/drop/",
        {"action": "export_orders_csv", "_selected_action": [order.drop_id, jpy_hold.drop_id]},
    )
    header, *rows = csv.reader(io.StringIO(answer.content.decode()))
    by_currency = {row[header.index("currency")]: dict(zip(header, row, strict=True)) for row in rows}

    assert header[header.index("net") :][:3] == ["net", "tax", "tax_rate"]
    eur, jpy = by_currency["EUR"], by_currency["JPY"]
    assert (eur["amount"], eur["net"], eur["tax"], eur["tax_rate"]) == ("35.66", "29.97", "5.69", "19.00")
    assert (jpy["amount"], jpy["net"], jpy["tax"]) == ("1189", "999", "190")
