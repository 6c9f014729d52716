"""Invoices and credit notes as a buyer and an accountant read them: the PDF's text read back, a
credit note after a refund, the downloads (the buyer's own only), the e-mails' attachments and the
admin's export."""

from __future__ import annotations

import io
from collections.abc import Iterator
from decimal import Decimal

import pytest
from django.core import mail
from django.utils import translation
from pypdf import PdfReader

from checkout import invoices, outbox, refunds
from checkout import services as checkout
from checkout.models import Invoice, Order, OutboxMessage, Payment, PaymentState
from config.celery import app as celery_app
from shop import identity, languages, setup
from tests.checkout.helpers import Sale, accepted, pending_sales
from tests.factories import make_buyer, make_drop

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def shop_identity() -> Iterator[None]:
    setup.configure(
        name="Harbour Lane Sneakers",
        legal_name="Harbour Lane GmbH",
        address="Hafenstraße 1\n20457 Hamburg",
        contact_email="hello@harbour-lane.example",
        vat_id="DE123456789",
    )
    identity.forget()
    yield
    identity.forget()
    celery_app.control.purge()  # process_event enqueues settle and relay tasks; nobody consumes them


def sold(slug: str, buyer: object | None = None) -> tuple[Sale, Order]:
    """One order of 2 units, 49.00 gross with 19% tax included (7.82), confirmed by the saga."""
    drop = make_drop(slug=slug, quantity=4, per_buyer_limit=2)
    buyer = buyer or make_buyer()
    (sale,) = pending_sales(drop, [buyer.pk])  # type: ignore[attr-defined]
    Order.objects.filter(pk=sale.order).update(quantity=1, tax_minor=782, tax_rate=Decimal("19.00"))
    assert checkout.process_event(event_pk=sale.event) == "confirmed"
    return sale, Order.objects.get(pk=sale.order)


def text_of(pdf: bytes) -> str:
    assert pdf.startswith(b"%PDF-")
    return "\n".join(page.extract_text() for page in PdfReader(io.BytesIO(pdf)).pages)


def test_the_invoice_pdf_says_number_seller_vat_id_net_tax_and_gross() -> None:
    _, order = sold("inv-pdf")
    invoice = Invoice.objects.get(order=order)

    text = text_of(invoices.pdf(invoice))

    assert invoice.number_text == "INV-000001"
    for words in [
        "INV-000001",
        "Harbour Lane GmbH",
        "Hafenstraße 1",
        "VAT ID: DE123456789",
        "€41.18",  # net
        "19%",
        "€7.82",  # tax
        "€49.00",  # gross
        "Card payment (test)",
        "Invoice",
    ]:
        assert words in text, (words, text)


def test_the_invoice_speaks_the_readers_language() -> None:
    _, order = sold("inv-de")
    with translation.override("de"):
        text = text_of(invoices.pdf(Invoice.objects.get(order=order)))

    assert "Rechnung" in text and "41,18\xa0€" in text.replace(" €", "\xa0€"), text
    assert "USt-IdNr.: DE123456789" in text, text


def test_a_refund_gives_a_credit_note_with_negative_amounts_and_the_tax_split() -> None:
    # given a confirmed, captured order of 49.00 with 7.82 tax
    sale, order = sold("inv-credit")
    Payment.objects.filter(pk=sale.payment).update(state=PaymentState.CAPTURED)

    # when the merchant refunds 24.50 of it and the provider says yes
    asked = refunds.request_refund(order_id=order.pk, amount_minor=2450, by=None)
    assert not Invoice.objects.filter(kind="credit_note").exists()  # not before the money went back
    assert accepted(asked.refund) == "succeeded"

    # then a credit note in its own sequence gives it back, tax split in the order's proportion
    note = Invoice.objects.get(kind="credit_note")
    assert (note.number_text, note.refund_id, note.order_id) == ("CRN-000001", asked.refund.pk, order.pk)
    assert (note.gross_minor, note.tax_minor, note.net_minor) == (-2450, -391, -2059)
    text = text_of(invoices.pdf(note))
    for words in ["CRN-000001", "Credit note", "INV-000001", "-€24.50", "-€3.91", "-€20.59", "DE123456789"]:
        assert words in text, (words, text)


def test_the_confirmation_and_refund_emails_carry_the_pdf_in_the_buyers_language() -> None:
    sale, order = sold("inv-mail", make_buyer("gerda", email="gerda@example.com"))
    Payment.objects.filter(pk=sale.payment).update(state=PaymentState.CAPTURED)
    asked = refunds.request_refund(order_id=order.pk, by=None)
    accepted(asked.refund)
    OutboxMessage.objects.exclude(topic__in=[outbox.EMAIL_TOPIC, outbox.REFUND_TOPIC]).delete()
    languages.remember(order.buyer_id, "de")

    assert outbox.relay_outbox() == 2

    confirmation, refund = sorted(mail.outbox, key=lambda m: "erstattet" in m.subject)
    ((name, pdf, kind),) = confirmation.attachments
    assert (name, kind) == ("INV-000001.pdf", "application/pdf")
    assert "Rechnung" in text_of(pdf) and "INV-000001" in text_of(pdf)
    ((name, pdf, kind),) = refund.attachments
    assert (name, kind) == ("CRN-000001.pdf", "application/pdf")
    assert "Gutschrift" in text_of(pdf) and "-49,00" in text_of(pdf)
