"""Invoices and credit notes: one gapless sequence each, a number taken in the transaction that
confirms the order (services.process_event) or records a refund as succeeded (refunds), and the
accountant's export (a CSV summary and the PDFs in one ZIP).

An invoice keeps what it says (seller, buyer, line, amounts) as it was when it was issued; the
PDF (checkout.invoice_pdf) is drawn from the row, in the reader's language, whenever asked.

Lock order: whatever the calling transaction locked, then the counter row last (core/locks.py).
"""

from __future__ import annotations

import csv
import io
import logging
import zipfile
from collections.abc import Iterable
from datetime import date, datetime, time, timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import connection
from django.db.backends.utils import CursorWrapper
from django.db.models import QuerySet, Sum
from django.http import HttpResponse
from django.utils import timezone

from checkout import invoice_pdf, sql
from checkout.models import Invoice, InvoiceKind, Order, Payment, Refund
from core import formatting
from shop import identity

log = logging.getLogger(__name__)

# Past this many invoices one export is refused (a ZIP built in memory): export a shorter period.
EXPORT_MAX = 5000


def _in_transaction() -> None:
    if not connection.in_atomic_block:
        raise RuntimeError("a number is taken inside the transaction that issues it")


def next_number_in(cursor: CursorWrapper, *, sequence: str) -> int:
    """The next number of `sequence`, its counter row locked until the transaction ends."""
    _in_transaction()
    cursor.execute(sql.NEXT_NUMBER, {"sequence": sequence})
    row = cursor.fetchone()
    assert row is not None  # the statement always returns its row
    return int(row[0])


def _seller() -> dict[str, str]:
    shop = identity.current()
    return {
        "name": shop.name,
        "legal_name": shop.legal_name or shop.name,
        "address": shop.address,
        "vat_id": shop.vat_id,
        "contact_email": shop.contact_email,
    }


def _buyer(order: Order) -> dict[str, object]:
    """Who the invoice is made out to: the name and address the order was shipped to, else the
    account's name (or e-mail) alone, for goods that are not sent by post."""
    user: AbstractBaseUser = order.buyer
    email = str(getattr(user, "email", ""))
    address = order.shipping_address
    if address is not None:
        lines = [address.line1, address.line2, f"{address.postal_code} {address.city}".strip()]
        lines += [address.region, address.country]
        return {"name": address.name, "address": [line for line in lines if line], "email": email}
    full = " ".join(
        part for part in (getattr(user, "first_name", ""), getattr(user, "last_name", "")) if part
    )
    return {"name": full or email or user.get_username(), "address": [], "email": email}


def _description(order: Order) -> str:
    variant = order.hold.variant
    title = order.drop.display_title
    return (f"{title} ({variant.name})" if variant is not None else title)[:300]


def issue_invoice_in(cursor: CursorWrapper, *, order: Order, payment: Payment) -> Invoice:
    """The invoice of an order being confirmed, in the confirming transaction: its number is
    taken last (the counter is the hot row), and rolls back with the confirmation."""
    order = Order.objects.select_related("buyer", "drop__product", "hold__variant", "shipping_address").get(
        pk=order.pk
    )
    fields = {
        "order": order,
        "kind": InvoiceKind.INVOICE,
        "description": _description(order),
        "quantity": order.quantity,
        "net_minor": order.amount_minor - order.tax_minor,
        "tax_minor": order.tax_minor,
        "gross_minor": order.amount_minor,
        "tax_rate": order.tax_rate,
        "currency": order.currency,
        "seller": _seller(),
        "buyer": _buyer(order),
        "payment_method": payment.provider,
        # the fee its own line, the discount the line's own reduction (the totals above hold both)
        "shipping_gross_minor": order.shipping_minor,
        "shipping_tax_minor": order.shipping_tax_minor,
        "shipping_tax_rate": order.shipping_tax_rate,
        "discount_code": order.discount_code,
        "discount_minor": order.discount_minor,
    }
    number = next_number_in(cursor, sequence=InvoiceKind.INVOICE)
    return Invoice.objects.create(number=number, **fields)


def _completes(refund: Refund, order: Order) -> bool:
    """Whether this refund gives back all that is left of what was paid (its credit note the last)."""
    credited = order.invoices.filter(kind=InvoiceKind.CREDIT_NOTE).aggregate(
        gross=Sum("gross_minor", default=0)
    )
    return refund.amount_minor - int(credited["gross"]) == order.amount_minor


def _tax_share(refund: Refund, order: Order) -> int:
    """The refund's part of the order's tax, rounded half up once (as shop.pricing rounds); the
    refund that completes the order takes what is left, so its credit notes' tax adds up to the
    invoice's, as request_refund's amounts add up to what was paid. A refund before the last gives
    back goods (the shipping fee comes back with the last: checkout.refunds), so its share is of
    the goods' tax."""
    credited_tax = order.invoices.filter(kind=InvoiceKind.CREDIT_NOTE).aggregate(
        tax=Sum("tax_minor", default=0)
    )
    if _completes(refund, order):
        return order.tax_minor + int(credited_tax["tax"])  # credited tax is negative
    goods = order.amount_minor - order.shipping_minor
    if not goods:
        return 0
    goods_tax = order.tax_minor - order.shipping_tax_minor
    share = Decimal(refund.amount_minor) * Decimal(goods_tax) / Decimal(goods)
    return int(share.quantize(Decimal(1), rounding=ROUND_HALF_UP))


def issue_credit_note_in(cursor: CursorWrapper, *, refund: Refund) -> Invoice:
    """The credit note of a refund recorded as succeeded, in that transaction: the money given back
    as negative amounts, its tax split in the order's proportion, numbered in its own sequence."""
    order = Order.objects.select_related("buyer", "drop__product", "hold__variant", "shipping_address").get(
        pk=refund.order_id
    )
    invoice = order.invoices.filter(kind=InvoiceKind.INVOICE).first()
    tax = _tax_share(refund, order)
    # The last refund gives the shipping fee back: its own line again, negative, at its own rate.
    # (Not when earlier refunds of chosen amounts took part of it: then the line holds the rest.)
    fee_back = (
        order.shipping_minor > 0
        and _completes(refund, order)
        and refund.amount_minor >= order.shipping_minor
        and tax >= order.shipping_tax_minor
    )
    fields = {
        "order": order,
        "refund": refund,
        "kind": InvoiceKind.CREDIT_NOTE,
        "description": _description(order),
        "quantity": -refund.quantity,
        "net_minor": -(refund.amount_minor - tax),
        "tax_minor": -tax,
        "gross_minor": -refund.amount_minor,
        "tax_rate": order.tax_rate,
        "currency": refund.currency,
        # The seller and buyer as the invoice said them: a credit note corrects that invoice.
        "seller": invoice.seller if invoice is not None else _seller(),
        "buyer": invoice.buyer if invoice is not None else _buyer(order),
        "payment_method": Payment.objects.filter(pk=refund.payment_id).values_list("provider", flat=True)[0],
        "shipping_gross_minor": -order.shipping_minor if fee_back else 0,
        "shipping_tax_minor": -order.shipping_tax_minor if fee_back else 0,
        "shipping_tax_rate": order.shipping_tax_rate if fee_back else 0,
    }
    number = next_number_in(cursor, sequence=InvoiceKind.CREDIT_NOTE)
    return Invoice.objects.create(number=number, **fields)


def pdf(invoice: Invoice) -> bytes:
    """The invoice's PDF in the active language."""
    corrects = None
    if invoice.kind == InvoiceKind.CREDIT_NOTE:
        corrects = invoice.order.invoices.filter(kind=InvoiceKind.INVOICE).first()
    return invoice_pdf.render(invoice, corrects=corrects)


def pdf_response(invoice: Invoice) -> HttpResponse:
    """The PDF as a download (the buyer's page and the admin): private, never cached on the way."""
    response = HttpResponse(pdf(invoice), content_type="application/pdf")
    response["Content-Disposition"] = f'attachment; filename="{invoice.file_name}"'
    response["Cache-Control"] = "private, no-store"
    return response


def attachment(invoice: Invoice) -> tuple[str, bytes, str]:
    """(file name, content, type) as EmailMessage.attach takes them."""
    return invoice.file_name, pdf(invoice), "application/pdf"


def of_buyer(*, order_id: int, invoice_id: int, buyer_id: int) -> Invoice | None:
    """A buyer's own invoice or credit note; another buyer's is indistinguishable from none."""
    return (
        Invoice.objects.select_related("order")
        .filter(pk=invoice_id, order_id=order_id, order__buyer_id=buyer_id)
        .first()
    )


def of_order(order_id: int) -> list[Invoice]:
    return list(Invoice.objects.filter(order_id=order_id).order_by("issued_at", "pk"))


def for_orders(orders: QuerySet[Order]) -> QuerySet[Invoice]:
    """The invoices and credit notes of these orders, in the order they were issued."""
    return Invoice.objects.filter(order__in=orders.values("pk")).order_by("kind", "number")


def in_period(*, since: date, until: date) -> QuerySet[Invoice]:
    """Invoices and credit notes issued on the shop's days `since` to `until`, both included."""
    zone = timezone.get_current_timezone()
    start = timezone.make_aware(datetime.combine(since, time.min), zone)
    end = timezone.make_aware(datetime.combine(until + timedelta(days=1), time.min), zone)
    return Invoice.objects.filter(issued_at__gte=start, issued_at__lt=end).order_by("kind", "number")


class TooMany(ValueError):
    pass


CSV_HEADER = [
    "number",
    "kind",
    "issued_at",
    "order",
    "buyer",
    "description",
    "quantity",
    "net",
    "tax_rate",
    "tax",
    "gross",
    "currency",
    "payment_method",
    "shipping_gross",
    "shipping_tax",
    "discount_code",
]


def summary_csv(invoices: Iterable[Invoice]) -> str:
    """One line per invoice or credit note, amounts as plain numbers (a spreadsheet's), a credit
    note's negative."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_HEADER)
    for invoice in invoices:

        def amount(minor: int, currency: str = invoice.currency) -> str:
            return formatting.plain_amount(minor, currency)

        writer.writerow(
            [
                invoice.number_text,
                invoice.kind,
                formatting.shop_time(invoice.issued_at, "Y-m-d H:i"),
                invoice.order_id,
                _safe(str(invoice.buyer.get("name", ""))),
                _safe(invoice.description),
                invoice.quantity,
                amount(invoice.net_minor),
                f"{invoice.tax_rate:f}",
                amount(invoice.tax_minor),
                amount(invoice.gross_minor),
                invoice.currency,
                invoice.payment_method,
                amount(invoice.shipping_gross_minor),
                amount(invoice.shipping_tax_minor),
                _safe(invoice.discount_code),
            ]
        )
    return out.getvalue()


def _safe(text: str) -> str:
    """A buyer's or merchant's words never start a spreadsheet formula (CSV injection)."""
    return "'" + text if text[:1] in {"=", "+", "-", "@", "\t", "\r"} else text


def export_zip(invoices: QuerySet[Invoice]) -> bytes:
    """invoices.csv and every PDF in one ZIP; TooMany past EXPORT_MAX (nothing built then)."""
    chosen = list(invoices.select_related("order")[: EXPORT_MAX + 1])
    if len(chosen) > EXPORT_MAX:
        raise TooMany(f"more than {EXPORT_MAX} invoices")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("invoices.csv", summary_csv(chosen))
        for invoice in chosen:
            archive.writestr(invoice.file_name, pdf(invoice))
    log.info("exported %s invoices", len(chosen))
    return out.getvalue()
