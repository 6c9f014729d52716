"""Invoices and credit notes as a buyer and an accountant read them: the PDF's text read back, a
credit note after a refund, the downloads (the buyer's own only), the e-mails' attachments and the
admin's export."""

from __future__ import annotations

import csv
import io
import zipfile
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.test import Client
from django.utils import timezone, translation
from pypdf import PdfReader

from checkout import invoices, outbox, refunds
from checkout import services as checkout
from checkout.models import Invoice, Order, OutboxMessage, Payment, PaymentState
from checkout.providers.base import WebhookEvent as ProviderEvent
from config.celery import app as celery_app
from shop import identity, languages, setup
from tests.checkout.helpers import Sale, accepted, confirmed_order, pending_sales
from tests.factories import make_buyer, make_drop, merchant

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


def sold(slug: str, buyer: User | None = None, *, tax_minor: int = 782) -> tuple[Sale, Order]:
    """One order of 49.00 gross with 19% tax included (7.82), confirmed by the saga."""
    drop = make_drop(slug=slug, quantity=4, per_buyer_limit=2)
    buyer = buyer or make_buyer()
    (sale,) = pending_sales(drop, [buyer.pk])
    Order.objects.filter(pk=sale.order).update(tax_minor=tax_minor, tax_rate=Decimal("19.00"))
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
    assert "USt-IdNr.: DE123456789" in text and "Rechnungsnummer" in text, text


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


def test_partial_credit_notes_add_up_to_the_invoices_tax() -> None:
    # given an order of 2 units for 20.00 whose tax (3.19) does not halve into whole cents
    order = confirmed_order(make_drop(slug="inv-halves", quantity=2), tax_minor=319, tax_rate="19")

    # when it is refunded unit by unit
    for _unit in range(2):
        accepted(refunds.request_refund(order_id=order.pk, quantity=1, by=None).refund)

    # then each is rounded once, and the last takes what is left
    notes = Invoice.objects.filter(kind="credit_note").order_by("number")
    assert [(n.gross_minor, n.tax_minor) for n in notes] == [(-1000, -160), (-1000, -159)]
    assert sum(n.tax_minor for n in notes) == -Invoice.objects.get(kind="invoice").tax_minor == -319


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


def test_a_buyer_downloads_their_own_invoice_and_no_one_elses() -> None:
    _, mine = sold("inv-own")
    _, theirs = sold("inv-theirs")
    own, other = Invoice.objects.get(order=mine), Invoice.objects.get(order=theirs)
    client = Client()
    client.force_login(mine.buyer)

    page = client.get(f"/orders/{mine.pk}/")
    answer = client.get(f"/orders/{mine.pk}/invoices/{own.pk}.pdf")

    assert f"/orders/{mine.pk}/invoices/{own.pk}.pdf" in page.content.decode()
    assert answer.status_code == 200 and answer["Content-Type"] == "application/pdf"
    assert answer["Content-Disposition"] == 'attachment; filename="INV-000001.pdf"'
    assert answer["Cache-Control"] == "private, no-store"
    assert "INV-000001" in text_of(answer.content)
    for path in [
        f"/orders/{theirs.pk}/invoices/{other.pk}.pdf",  # another buyer's
        f"/orders/{mine.pk}/invoices/{other.pk}.pdf",  # another's invoice under my order
        f"/orders/{mine.pk}/invoices/99999999999999999999999.pdf",  # past bigint
        f"/orders/99999999999999999999999/invoices/{own.pk}.pdf",
        f"/orders/{mine.pk}/invoices/0.pdf",
        f"/orders/{mine.pk}/invoices/abc.pdf",
        f"/orders/{mine.pk}/invoices/{own.pk}",
        f"/orders/{mine.pk}/invoices/-1.pdf",
    ]:
        refused = client.get(path)
        assert refused.status_code == 404, path
        assert b"%PDF" not in refused.content
    assert Client().get(f"/orders/{mine.pk}/invoices/{own.pk}.pdf").status_code == 302  # sign in first


def test_the_admin_downloads_an_orders_invoice_and_exports_the_selected_as_csv_and_zip(roles: None) -> None:
    (_, first), (sale, second) = sold("inv-adm-1"), sold("inv-adm-2")
    Payment.objects.filter(pk=sale.payment).update(state=PaymentState.CAPTURED)
    accepted(refunds.request_refund(order_id=second.pk, by=None).refund)
    client = merchant()
    invoice = Invoice.objects.get(order=first)

    page = client.get(f"/admin/checkout/order/{first.pk}/change/")
    one = client.get(f"/admin/checkout/order/{first.pk}/invoices/{invoice.pk}.pdf")
    mismatched = client.get(f"/admin/checkout/order/{second.pk}/invoices/{invoice.pk}.pdf")
    exported = client.post(
        "/admin/checkout/order/", {"action": "invoices_zip", "_selected_action": [first.pk, second.pk]}
    )

    assert f"/admin/checkout/order/{first.pk}/invoices/{invoice.pk}.pdf" in page.content.decode()
    assert one.status_code == 200 and "INV-000001" in text_of(one.content)
    assert mismatched.status_code == 404
    assert exported.status_code == 200 and exported["Content-Type"] == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(exported.content))
    names = ["CRN-000001.pdf", "INV-000001.pdf", "INV-000002.pdf", "invoices.csv"]
    assert sorted(archive.namelist()) == names
    rows = list(csv.DictReader(io.StringIO(archive.read("invoices.csv").decode())))
    assert [(r["number"], r["order"], r["net"], r["tax"], r["gross"]) for r in rows] == [
        ("CRN-000001", str(second.pk), "-41.18", "-7.82", "-49.00"),
        ("INV-000001", str(first.pk), "41.18", "7.82", "49.00"),
        ("INV-000002", str(second.pk), "41.18", "7.82", "49.00"),
    ]
    assert "CRN-000001" in text_of(archive.read("CRN-000001.pdf"))


def test_the_admin_exports_a_periods_invoices_and_refuses_a_bad_period(roles: None) -> None:
    sold("inv-period")
    client = merchant()
    today = timezone.localdate()
    url = "/admin/checkout/order/invoices/"

    form = client.get(url)
    exported = client.get(url, {"since": str(today), "until": str(today)})
    empty = client.get(url, {"since": "2020-01-01", "until": "2020-01-31"})
    backwards = client.get(url, {"since": str(today), "until": str(today - timedelta(days=1))})
    garbage = client.get(url, {"since": "yesterday", "until": "2026-13-45"})
    changelist = client.get("/admin/checkout/order/")

    assert form.status_code == 200 and b"export-invoices-form" in form.content
    assert exported["Content-Type"] == "application/zip"
    names = zipfile.ZipFile(io.BytesIO(exported.content)).namelist()
    assert sorted(names) == ["INV-000001.pdf", "invoices.csv"]
    assert empty.status_code == 200 and "There is no invoice to export there." in empty.content.decode()
    assert backwards.status_code == 200 and "The period ends before it starts." in backwards.content.decode()
    assert garbage.status_code == 200 and b"errorlist" in garbage.content
    assert b"application/zip" not in garbage.headers.get("Content-Type", "").encode()
    assert url in changelist.content.decode()
    assert Client().get(url).status_code == 302  # the admin's login first


def words_and_metadata(pdf: bytes) -> str:
    reader = PdfReader(io.BytesIO(pdf))
    return text_of(pdf) + "\n" + "\n".join(str(value) for value in (reader.metadata or {}).values())


def test_an_invoice_names_the_shop_never_the_software() -> None:
    _, order = sold("inv-name")
    invoice = Invoice.objects.get(order=order)

    read = words_and_metadata(invoices.pdf(invoice))

    assert "Harbour Lane Sneakers" in read and "Floodgate" not in read, read


def test_control_the_scan_finds_the_software_name_where_it_is_planted() -> None:
    _, order = sold("inv-planted")
    invoice = Invoice.objects.get(order=order)
    invoice.seller = {**invoice.seller, "name": "Floodgate"}

    assert "Floodgate" in words_and_metadata(invoices.pdf(invoice))


def test_a_refund_pending_at_the_provider_gets_its_credit_note_from_the_webhook_once() -> None:
    order = confirmed_order(make_drop(slug="inv-pending", quantity=1, per_buyer_limit=1), quantity=1)
    refund = refunds.request_refund(order_id=order.pk, by=None).refund
    refunds._record(refund, "pending", "re_abc", "")
    assert not Invoice.objects.filter(kind="credit_note").exists()  # no money back yet: no credit note
    session = str(Payment.objects.get(order=order).session_id)

    def event(n: int) -> int | None:
        facts = ProviderEvent(
            event_id=f"evt_refund_{n}",
            type="refund.succeeded",
            session_id=session,
            reference=refund.key,
            amount_minor=refund.amount_minor,
            currency="EUR",
            refund_id="re_abc",
        )
        return checkout.record_webhook(provider_name="simulated", event=facts, payload={"id": facts.event_id})

    first, duplicate = event(1), event(2)
    assert first is not None and duplicate is not None
    assert checkout.process_event(event_pk=first) == "refund_succeeded"
    assert checkout.process_event(event_pk=duplicate) == "refund_already_succeeded"

    (note,) = Invoice.objects.filter(kind="credit_note")
    assert (note.refund_id, note.number, note.gross_minor) == (refund.pk, 1, -1000)

    # and the buyer gets it by e-mail, once: the refund's own e-mail went out pending, without it
    OutboxMessage.objects.exclude(topic__in=[outbox.REFUND_TOPIC, outbox.CREDIT_NOTE_TOPIC]).delete()
    languages.remember(order.buyer_id, "de")
    assert outbox.relay_outbox() == 2
    late = event(3)  # the provider's third copy, after the e-mails went out
    assert late is not None and checkout.process_event(event_pk=late) == "refund_already_succeeded"
    assert outbox.relay_outbox() == 0
    attached = [(m.subject, name) for m in mail.outbox for name, _pdf, _kind in m.attachments]
    subject = f"[Harbour Lane Sneakers] Bestellung {order.pk}: Ihre Gutschrift CRN-000001"
    assert len(mail.outbox) == 2 and attached == [(subject, "CRN-000001.pdf")]
    credit = next(m for m in mail.outbox if m.attachments)
    assert "CRN-000001" in credit.body and "Gutschrift" in text_of(credit.attachments[0][1])
