"""A product that ships is paid only with an address; the order keeps it, and its page, e-mail,
admin page and export show where it goes."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.test import Client

from checkout import outbox
from checkout import services as checkout
from checkout.models import Order, OrderState
from holds import services as holds
from holds.models import Hold
from sale import addresses
from shop.models import Address, Drop
from tests.conftest import PROVIDER_SECRET, WEBHOOK_SECRET
from tests.factories import make_buyer, make_drop, merchant

pytestmark = pytest.mark.django_db(transaction=True)

GOOD = {
    "name": "Ada Lovelace",
    "line1": "1 Rue de Rivoli",
    "postal_code": "75001",
    "city": "Paris",
    "country": "FR",
}


def held(slug: str) -> tuple[User, Hold, Client]:
    buyer = make_buyer()
    buyer.email = f"{slug}@example.test"
    buyer.save()
    drop: Drop = make_drop(slug=slug, quantity=3, ships=True)
    hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=1, idempotency_key="k").hold
    client = Client()
    client.force_login(buyer)
    return buyer, hold, client


@pytest.fixture
def provider(settings, payment_provider: str) -> Iterator[str]:
    settings.PAYMENT_PROVIDER_URL = payment_provider
    settings.PAYMENT_PROVIDER_SECRET = PROVIDER_SECRET
    settings.PAYMENT_WEBHOOK_SECRET = WEBHOOK_SECRET
    yield payment_provider


def test_paying_a_shipped_product_without_an_address_is_refused_clearly() -> None:
    _, hold, client = held("no-address")

    api = client.post(f"/api/holds/{hold.pk}/payment")
    page = client.post(f"/holds/{hold.pk}/pay", follow=True)

    assert (api.status_code, api.json()["error"]) == (409, "address_required")
    assert "Give the shipping address first" in page.content.decode()
    hold.refresh_from_db()
    assert not Order.objects.exists() and not hold.extended


def test_the_order_takes_the_address_given_when_payment_starts(provider: str) -> None:
    buyer, hold, _ = held("with-address")
    given = addresses.give_address(hold_id=hold.pk, buyer_id=buyer.pk, data=GOOD)

    started = checkout.start_payment(hold_id=hold.pk, buyer_id=buyer.pk)

    assert Order.objects.get(pk=started.order.pk).shipping_address_id == given.pk


def shipped_order(slug: str) -> Order:
    buyer, hold, _ = held(slug)
    address = Address.objects.create(user=buyer, **GOOD)
    assert holds.confirm(hold_id=hold.pk)
    return Order.objects.create(
        hold=hold,
        buyer=buyer,
        drop=hold.drop,
        quantity=1,
        amount_minor=4900,
        currency="EUR",
        state=OrderState.CONFIRMED,
        shipping_address=address,
    )


def test_the_order_page_and_the_email_say_where_it_goes() -> None:
    order = shipped_order("shown-address")
    client = Client()
    client.force_login(order.buyer)

    page = client.get(f"/orders/{order.pk}/").content.decode()
    outbox.announce(order)
    outbox.relay_outbox()

    assert '<p id="order-address">Ships to Ada Lovelace, 1 Rue de Rivoli, 75001 Paris, France</p>' in page
    assert "Shipping to:\n  Ada Lovelace\n  1 Rue de Rivoli\n  75001 Paris\n  France\n" in mail.outbox[0].body


def test_the_admin_order_page_and_the_export_show_the_address(roles: None) -> None:
    order = shipped_order("admin-address")
    merchant_client = merchant()

    admin_page = merchant_client.get(f"/admin/checkout/order/{order.pk}/change/").content.decode()
    export = merchant_client.post(
        "/admin/shop/drop/", {"action": "export_orders_csv", "_selected_action": [order.drop_id]}
    )
    header, row = csv.reader(io.StringIO(export.content.decode()))

    assert "Ada Lovelace, 1 Rue de Rivoli, 75001 Paris, France" in admin_page
    assert dict(zip(header, row, strict=True))["shipping_address"] == (
        "Ada Lovelace, 1 Rue de Rivoli, 75001 Paris, France"
    )
