"""Support: everything the shop did with one buyer on one page, and a confirmation sent again."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from admission.models import Ticket
from checkout import outbox
from checkout.models import Invoice, InvoiceKind, Order, OrderState, OutboxMessage, Refund, Reminder
from core.errors import FloodgateError, NotFound, fill
from holds.models import Hold

SHOWN = 200  # of each kind, newest first: a support page, not an export


@dataclass(frozen=True)
class BuyerHistory:
    buyer: AbstractBaseUser
    holds: list[Hold]
    orders: list[Order]
    refunds: list[Refund]
    emails: list[OutboxMessage]
    tickets: list[Ticket]


def buyer_history(*, buyer_id: int) -> BuyerHistory:
    buyer = get_user_model().objects.filter(pk=buyer_id).first()
    if buyer is None:
        raise NotFound(fill(_("There is no buyer %(number)s."), number=buyer_id))
    reminders = Reminder.objects.filter(buyer_id=buyer_id).values_list("pk", flat=True)
    mails = OutboxMessage.objects.filter(topic__endswith=".email").filter(
        Q(payload__buyer=buyer_id) | Q(payload__reminder__in=list(reminders))
    )
    return BuyerHistory(
        buyer=buyer,
        holds=list(
            Hold.objects.filter(buyer_id=buyer_id).select_related("drop", "variant").order_by("-pk")[:SHOWN]
        ),
        orders=list(Order.objects.filter(buyer_id=buyer_id).select_related("drop").order_by("-pk")[:SHOWN]),
        refunds=list(
            Refund.objects.filter(order__buyer_id=buyer_id).select_related("order").order_by("-pk")[:SHOWN]
        ),
        emails=list(mails.order_by("-pk")[:SHOWN]),
        tickets=list(Ticket.objects.filter(buyer_id=buyer_id).select_related("drop").order_by("-pk")[:SHOWN]),
    )


# A number as an invoice prints it (checkout.models.Invoice.number_text), any case, zeros optional.
INVOICE_NUMBER = re.compile(r"^\s*(INV|CRN)-?0*(\d{1,18})\s*$", re.IGNORECASE)


def orders_by_invoice_number(text: str) -> list[int]:
    """The order an invoice (INV-000042) or credit note (CRN-000007) number belongs to; [] for any
    other text."""
    match = INVOICE_NUMBER.match(text)
    if match is None:
        return []
    kind = InvoiceKind.INVOICE if match.group(1).upper() == "INV" else InvoiceKind.CREDIT_NOTE
    return list(
        Invoice.objects.filter(kind=kind, number=int(match.group(2))).values_list("order_id", flat=True)
    )


class NotConfirmed(FloodgateError):
    code, status = "not_confirmed", 409


def resend_confirmation(*, order_id: int) -> None:
    """The confirmation e-mail once more (a buyer who lost it), under a key of its own: the relay
    drops a repeat of one key, so the first one's key would send nothing."""
    with transaction.atomic():
        order = Order.objects.filter(pk=order_id).first()
        if order is None:
            raise NotFound(fill(_("There is no order %(number)s."), number=order_id))
        if order.state != OrderState.CONFIRMED:
            raise NotConfirmed(
                fill(_("Order %(number)s is not confirmed: there is no confirmation."), number=order_id)
            )
        key, payload = outbox.confirmation(order)
        outbox.announce_email_again(key=f"{key}-again-{uuid.uuid4().hex[:12]}", payload=payload)
