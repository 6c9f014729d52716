"""A discount code taken on a hold is shown after the sale too: the order page, the pay page, the
confirmation e-mail, the invoice (the line reduced, its tax on the reduced price) and the API."""

from __future__ import annotations

import io
from collections.abc import Iterator
from decimal import Decimal

import pytest
from django.core import mail
from django.template.loader import render_to_string
from django.test import Client
from pypdf import PdfReader
from pytest_django import Settings

from checkout import invoices, outbox
from checkout import services as checkout
from checkout.models import Invoice, Order
from checkout.providers.base import WebhookEvent as ProviderEvent
from config.celery import app as celery_app
from holds import discounts
from holds import services as holds
from tests.conftest import PROVIDER_SECRET, WEBHOOK_SECRET
from tests.factories import make_buyer, make_drop

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def provider(settings, payment_provider: str) -> Iterator[str]:
    settings.PAYMENT_PROVIDER_URL = payment_provider
    settings.PAYMENT_PROVIDER_SECRET = PROVIDER_SECRET
    settings.PAYMENT_WEBHOOK_SECRET = WEBHOOK_SECRET
    yield payment_provider
    celery_app.control.purge()  # process_event enqueues settle and relay tasks; nobody consumes them


def discounted_order(*, settings: Settings, control: bool = False) -> tuple[Order, Client]:
    """3 x 9.99 with 19% added, 10% off (3.00): 26.97 net + 5.12 tax = 32.09, confirmed by the saga;
    the control takes no code."""
    settings.PRICES_INCLUDE_TAX = False
    drop = make_drop(
        slug="deal-shown", quantity=5, price_minor=999, tax_rate=Decimal("19"), per_buyer_limit=3
    )
    buyer = make_buyer()
    hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=3, idempotency_key="k").hold
    if not control:
        (code,) = discounts.generate_codes(drop=drop, count=1, terms=discounts.Terms(percent=10))
        discounts.apply_code(hold=hold, buyer_id=buyer.pk, code=code.code)
    order = Order.objects.get(pk=checkout.start_payment(hold_id=hold.pk, buyer_id=buyer.pk).order.pk)
    payment = order.payments.get()
    event = ProviderEvent(
        event_id=f"evt_{payment.session_id}",
        type="payment.authorized",
        session_id=str(payment.session_id),
        reference=str(payment.reference),
        amount_minor=payment.amount_minor,
        currency=payment.currency,
    )
    event_pk = checkout.record_webhook(provider_name=payment.provider, event=event, payload={"id": "e"})
    assert event_pk is not None and checkout.process_event(event_pk=event_pk) == "confirmed"
    client = Client()
    client.force_login(buyer)
    order.refresh_from_db()
    return order, client


def test_the_discount_shows_on_the_order_page_pay_page_email_invoice_and_api(settings, provider: str) -> None:
    order, client = discounted_order(settings=settings)
    code = order.hold.discount_code.code  # type: ignore[union-attr]

    page = client.get(f"/orders/{order.pk}/").content.decode()
    answer = client.get(f"/api/orders/{order.pk}").json()
    pay = render_to_string("checkout/stripe_pay.html", {"order": order, "payment": order.payments.get()})
    outbox.relay_outbox()
    email = mail.outbox[0].body
    invoice = Invoice.objects.get(order=order, kind="invoice")
    pdf = PdfReader(io.BytesIO(invoices.pdf(invoice)))
    text = " ".join(" ".join(p.extract_text() for p in pdf.pages).split())  # the column wraps words

    assert (order.amount_minor, order.tax_minor, order.discount_code, order.discount_minor) == (
        3209,
        512,
        code,
        300,
    )
    assert f'<p class="muted" id="order-discount">Discount code {code}: €3.00 off.</p>' in page
    assert f"Discount code {code}: €3.00 off." in pay
    assert answer["discount"] == {"code": code, "off_minor": 300}
    assert f": €32.09\n  discount code {code}: €3.00 off\n" in email, email
    assert "Total paid: €32.09\nof which net: €26.97\nVAT 19%: €5.12\n" in email
    assert (invoice.discount_code, invoice.discount_minor, invoice.net_minor, invoice.tax_minor) == (
        code,
        300,
        2697,
        512,
    )
    for words in [f"Discount code {code}: €3.00 off, included", "€26.97", "€5.12", "€32.09"]:
        assert words in text, (words, text)


def test_control_an_order_without_a_code_says_no_discount(settings, provider: str) -> None:
    order, client = discounted_order(settings=settings, control=True)

    page = client.get(f"/orders/{order.pk}/").content.decode()
    answer = client.get(f"/api/orders/{order.pk}").json()
    outbox.relay_outbox()

    assert (order.amount_minor, order.discount_code, order.discount_minor) == (3566, "", 0)
    assert 'id="order-discount"' not in page and answer["discount"] is None
    assert "discount code" not in mail.outbox[0].body
    invoice = Invoice.objects.get(order=order, kind="invoice")
    assert "Discount code" not in "\n".join(
        p.extract_text() for p in PdfReader(io.BytesIO(invoices.pdf(invoice))).pages
    )


def test_orders_paid_before_the_order_kept_its_discount_get_it_from_the_hold(settings, provider: str) -> None:
    import importlib

    from django.apps import apps

    order, _ = discounted_order(settings=settings)
    Order.objects.filter(pk=order.pk).update(discount_code="", discount_minor=0)  # as before 0016

    importlib.import_module("checkout.migrations.0017_orders_keep_their_discount").keep(apps, None)

    kept = Order.objects.get(pk=order.pk)
    assert (kept.discount_code, kept.discount_minor) == (order.discount_code, 300)
