"""Support in the admin: an order found by what the buyer quotes, their whole history on one page,
and a lost confirmation sent again."""

from __future__ import annotations

import re

import pytest
from django.core import mail
from django.test import Client

from admission.models import Ticket
from checkout import outbox
from checkout.models import Order, OrderState
from shop.models import Address
from tests.factories import confirmed_order, make_buyer, make_drop, staff

pytestmark = pytest.mark.django_db


@pytest.fixture
def desk(roles: None) -> Client:
    client = Client()
    client.force_login(staff("sam", "Merchants"))
    return client


def order_of(name: str, drop_slug: str = "support") -> Order:
    from shop.models import Drop

    drop = Drop.objects.filter(slug=drop_slug).first() or make_drop(slug=drop_slug, quantity=20)
    buyer = make_buyer(name)
    order = confirmed_order(drop, buyer, key=f"k-{name}", amount_minor=9900)
    address = Address.objects.create(
        user=buyer,
        name=f"{name.title()} Example",
        line1="Kastanienallee 7",
        postal_code="10435",
        city="Berlin",
        country="DE",
    )
    Order.objects.filter(pk=order.pk).update(shipping_address=address)
    order.refresh_from_db()
    return order


def found(desk: Client, query: str) -> list[int]:
    page = desk.get("/admin/checkout/order/", {"q": query})
    assert page.status_code == 200, query
    return sorted(int(n) for n in re.findall(r"/admin/checkout/order/(\d+)/change/", page.content.decode()))


def test_an_order_is_found_by_what_the_buyer_quotes(desk: Client) -> None:
    ada, bob = order_of("ada"), order_of("bob")
    assert bob.shipping_address_id is not None
    Address.objects.filter(pk=bob.shipping_address_id).update(
        line1="Marienplatz 1", postal_code="80331", city="München"
    )

    assert found(desk, "ada@example.com") == [ada.pk]
    assert found(desk, "Bob Example") == [bob.pk]
    assert found(desk, "80331") == [bob.pk]
    assert ada.pk in found(desk, str(ada.pk))  # with any whose postal code or street holds the digits
    assert found(desk, "Kastanienallee") == [ada.pk]
    found(desk, "\x00")  # Django drops the NUL: an empty search, every order, no error
    assert desk.get("/admin/checkout/order/?q=%ED%A0%80%FF").status_code == 200  # not UTF-8
    for garbage in ("x" * 5000, "'; DROP TABLE checkout_order; --", "%", "\ufffd"):
        assert found(desk, garbage) == [], repr(garbage)


def test_one_page_shows_a_buyers_holds_orders_refunds_e_mails_and_tickets(desk: Client) -> None:
    ada, bob = order_of("ada"), order_of("bob")
    outbox.relay_outbox()
    Ticket.objects.create(drop=ada.drop, buyer=ada.buyer, number=7)

    page = desk.get(f"/admin/checkout/order/buyer/{ada.buyer_id}/").content.decode()

    orders = page[page.index('id="buyer-orders"') : page.index('id="buyer-holds"')]
    assert f">{ada.pk}</a>" in orders and f">{bob.pk}</a>" not in orders
    assert "ada@example.com" in page and "order_confirmed.email" in page
    tickets = page[page.index('id="buyer-tickets"') :]
    assert "<td>7</td>" in tickets
    assert (
        desk.get(f"/admin/checkout/order/{ada.pk}/change/").content.decode().count('id="buyer-history"') == 1
    )
    assert desk.get("/admin/checkout/order/buyer/999999999/").status_code == 404

    nobody = Client()
    nobody.force_login(staff("nemo"))
    assert nobody.get(f"/admin/checkout/order/buyer/{ada.buyer_id}/").status_code == 403


def test_a_lost_confirmation_is_sent_again_and_only_for_a_confirmed_order(desk: Client) -> None:
    ada, pending = order_of("ada"), order_of("pat")
    Order.objects.filter(pk=pending.pk).update(state=OrderState.PENDING)
    outbox.relay_outbox()
    first = [m.subject for m in mail.outbox if m.to == ["ada@example.com"]]

    desk.post(
        "/admin/checkout/order/", {"action": "resend_confirmation", "_selected_action": [ada.pk, pending.pk]}
    )
    outbox.relay_outbox()

    again = [m.subject for m in mail.outbox if m.to == ["ada@example.com"]]
    assert len(first) == 1 and again == first * 2
    assert len([m for m in mail.outbox if m.to == ["pat@example.com"]]) == 1  # its first, nothing more


def test_an_order_is_found_by_its_invoice_or_credit_note_number(desk: Client) -> None:
    from django.db import connection

    from checkout import invoices
    from checkout.models import Invoice, InvoiceKind

    ada, bob = order_of("ada-inv"), order_of("bob-inv")
    with connection.cursor() as cursor:  # numbered as the confirming transaction numbers them
        for order in (ada, bob):
            Invoice.objects.create(
                order=order,
                kind=InvoiceKind.INVOICE,
                number=invoices.next_number_in(cursor, sequence=InvoiceKind.INVOICE),
                description="x",
                quantity=1,
                net_minor=9900,
                tax_minor=0,
                gross_minor=9900,
                tax_rate=0,
                currency="EUR",
                seller={},
                buyer={},
                payment_method="simulated",
            )
    number = Invoice.objects.get(order=bob).number_text  # INV-000002

    assert found(desk, number) == [bob.pk]
    assert found(desk, number.lower().replace("-00000", "-")) == [bob.pk]  # "inv-2", as read out
    assert found(desk, " INV000002 ") == [bob.pk]
    assert found(desk, "CRN-000002") == []  # a credit note's sequence is another one
    assert found(desk, "INV-999999") == []
    assert found(desk, "INV-" + "9" * 40) == []  # past any number: nothing, no error
