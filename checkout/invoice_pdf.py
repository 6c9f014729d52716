"""An invoice or credit note drawn as a PDF with reportlab, in the active language.

reportlab, not WeasyPrint: it is pure Python from pip, while WeasyPrint needs the system's Pango
and Cairo (one more thing for every machine and image). Its built-in Helvetica covers Latin-1 and
the euro sign: names in other scripts print as boxes (checkout/__init__.py, "Invoices").
"""

from __future__ import annotations

import io
from decimal import Decimal
from html import escape
from typing import TYPE_CHECKING

from django.utils.translation import gettext as _
from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
from reportlab.lib.units import mm
from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

from core import formatting
from shop import pricing

if TYPE_CHECKING:
    from checkout.models import Invoice

PROVIDERS = {"stripe": "Stripe"}  # a provider's name as a buyer knows it; others as stored


def payment_words(provider: str) -> str:
    if provider == "simulated":
        return _("Card payment (test)")
    return _("Card payment via %(provider)s") % {"provider": PROVIDERS.get(provider, provider.title())}


def _lines(text: str | list[str]) -> str:
    rows = text.splitlines() if isinstance(text, str) else text
    return "<br/>".join(escape(str(row)) for row in rows if str(row).strip())


def render(invoice: Invoice, *, corrects: Invoice | None = None) -> bytes:
    """The PDF: the seller (legal name, address, VAT ID), the buyer, the date and number, the line
    with net, tax rate, tax and gross, the totals and the payment method."""
    seller, buyer = invoice.seller, invoice.buyer
    credit = invoice.kind == "credit_note"
    title = _("Credit note") if credit else _("Invoice")
    styles = getSampleStyleSheet()
    body = ParagraphStyle("body", parent=styles["Normal"], fontSize=10, leading=13)

    def money(minor: int) -> str:
        return formatting.money(minor, invoice.currency)

    out = io.BytesIO()
    document = SimpleDocTemplate(
        out,
        pagesize=A4,
        leftMargin=20 * mm,
        rightMargin=20 * mm,
        topMargin=18 * mm,
        bottomMargin=18 * mm,
        title=f"{title} {invoice.number_text}",
        author=str(seller.get("legal_name", "")),
        creator=str(seller.get("name", "")),
        subject=title,
        invariant=True,  # the same invoice gives the same bytes (no timestamp or random id inside)
    )
    vat_id = str(seller.get("vat_id", ""))
    seller_block = [
        f"<b>{escape(str(seller.get('legal_name', '')))}</b>",
        _lines(str(seller.get("address", ""))),
        escape(_("VAT ID: %(vat_id)s") % {"vat_id": vat_id}) if vat_id else "",
        escape(str(seller.get("contact_email", ""))),
    ]
    billed_to = _("Billed to")  # outside the f-string: makemessages cannot see a gettext inside one
    buyer_block = [
        f"<b>{escape(billed_to)}</b>",
        escape(str(buyer.get("name", ""))),
        _lines(list(buyer.get("address") or [])),
        escape(str(buyer.get("email", ""))),
    ]
    facts = [
        [_("Credit note number") if credit else _("Invoice number"), invoice.number_text],
        [_("Date"), formatting.shop_time(invoice.issued_at, "Y-m-d")],
        [_("Order"), str(invoice.order_id)],
    ]
    if corrects is not None:
        facts.append([_("Corrects invoice"), corrects.number_text])
    rate = Decimal(invoice.tax_rate)
    described = escape(invoice.description)
    if invoice.discount_code:
        off = _("Discount code %(code)s: %(amount)s off, included") % {
            "code": invoice.discount_code,
            "amount": money(invoice.discount_minor),
        }
        described += f"<br/>{escape(off)}"
    line = [
        [_("Description"), _("Quantity"), _("Net"), _("Tax rate"), _("Tax"), _("Gross")],
        [
            Paragraph(described, body),
            str(invoice.quantity),
            money(invoice.goods_net_minor),
            pricing.rate_text(rate),
            money(invoice.goods_tax_minor),
            money(invoice.goods_gross_minor),
        ],
    ]
    taxes = {rate: invoice.goods_tax_minor}
    if invoice.shipping_gross_minor:
        shipping_rate = Decimal(invoice.shipping_tax_rate)
        line.append(
            [
                Paragraph(escape(_("Shipping")), body),
                "1",
                money(invoice.shipping_net_minor),
                pricing.rate_text(shipping_rate),
                money(invoice.shipping_tax_minor),
                money(invoice.shipping_gross_minor),
            ]
        )
        taxes[shipping_rate] = taxes.get(shipping_rate, 0) + invoice.shipping_tax_minor
    totals = [
        [_("Net total"), money(invoice.net_minor)],
        *([_("Tax %(rate)s") % {"rate": pricing.rate_text(r)}, money(t)] for r, t in taxes.items()),
        [_("Total refunded") if credit else _("Total"), money(invoice.gross_minor)],
    ]
    grid = TableStyle(
        [
            ("FONTNAME", (0, 0), (-1, 0), "Helvetica-Bold"),
            ("FONTSIZE", (0, 0), (-1, -1), 9),
            ("LINEBELOW", (0, 0), (-1, 0), 0.5, colors.black),
            ("ALIGN", (1, 0), (-1, -1), "RIGHT"),
            ("VALIGN", (0, 0), (-1, -1), "TOP"),
        ]
    )
    total_style = TableStyle(
        [
            ("ALIGN", (1, 0), (1, -1), "RIGHT"),
            ("FONTNAME", (0, -1), (-1, -1), "Helvetica-Bold"),
            ("LINEABOVE", (0, -1), (-1, -1), 0.5, colors.black),
        ]
    )
    method = _("Payment method: %(method)s") % {"method": payment_words(invoice.payment_method)}
    story = [
        Paragraph(escape(str(seller.get("name", ""))), styles["Title"]),
        Paragraph("<br/>".join(part for part in seller_block if part), body),
        Spacer(1, 8 * mm),
        Paragraph("<br/>".join(part for part in buyer_block if part), body),
        Spacer(1, 8 * mm),
        Paragraph(escape(title), styles["Heading2"]),
        Table(facts, hAlign="LEFT", colWidths=[45 * mm, 60 * mm]),
        Spacer(1, 6 * mm),
        Table(line, colWidths=[58 * mm, 17 * mm, 24 * mm, 17 * mm, 22 * mm, 24 * mm], style=grid),
        Spacer(1, 4 * mm),
        Table(totals, hAlign="RIGHT", colWidths=[45 * mm, 30 * mm], style=total_style),
        Spacer(1, 6 * mm),
        Paragraph(escape(method), body),
    ]
    if credit:
        story.append(
            Paragraph(escape(_("The amount is refunded by the payment method it was paid with.")), body)
        )
    document.build(story)
    return out.getvalue()
