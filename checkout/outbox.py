"""The outbox: what must leave the process (e-mail, the merchant's webhook) is written in the
transaction of the change it announces, and relayed one message per transaction.

E-mails and pushes (checkout/push.py) are written in their buyer's language (shop.languages: the
one they last used the shop in); a buyer with none recorded gets the relaying worker's, LANGUAGE_CODE.

A crash loses nothing (the message stays unsent) and can repeat only the message in
flight, with the same key, which its consumer uses to drop the repeat.
"""

from __future__ import annotations

import logging
from datetime import timedelta

import httpx
from celery import current_app
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.db.models.functions import Now
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from checkout import carriers, emails, invoices, push
from checkout.models import (
    DISPUTE_DECIDED,
    Dispute,
    DisputeState,
    Invoice,
    InvoiceKind,
    Order,
    OutboxMessage,
    Refund,
    Reminder,
)
from checkout.selectors import merchants_with_email
from core import formatting
from holds.counts import claimable_by_drop
from holds.models import Hold
from shop import calendar, languages, pricing
from shop.models import Drop, DropState

log = logging.getLogger(__name__)

EMAIL_TOPIC = "order_confirmed.email"
MERCHANT_TOPIC = "order_confirmed.merchant_webhook"
LATE_VOIDED_TOPIC = "late_payment_voided.email"
REFUND_TOPIC = "refund.email"
CREDIT_NOTE_TOPIC = "credit_note.email"
CANCELLED_TOPIC = "order_cancelled.email"
REMINDER_TOPIC = "drop_open.email"
RAFFLE_TOPIC = "raffle_result.email"
DISPUTE_TOPIC = "dispute.merchant_email"
DRAW_BEACON_TOPIC = "draw_beacon.merchant_email"
SHIPPED_TOPIC = "order_shipped.email"
MAX_ATTEMPTS = 30  # with backoff capped at an hour: about a day of retries


def confirmation(order: Order) -> tuple[str, dict[str, object]]:
    """The consumer key and payload announcing a confirmed order (one key per order)."""
    payload = {
        "order": order.pk,
        "drop": order.drop_id,
        "buyer": order.buyer_id,
        "quantity": order.quantity,
        "amount_minor": order.amount_minor,
        "currency": order.currency,
    }
    return f"order-{order.pk}-confirmed", payload


def announce(order: Order) -> None:
    """Outbox rows, in the confirming transaction: they leave only if the sale commits."""
    key, payload = confirmation(order)
    OutboxMessage.objects.bulk_create(
        [OutboxMessage(topic=topic, key=key, payload=payload) for topic in (EMAIL_TOPIC, MERCHANT_TOPIC)],
        ignore_conflicts=True,
    )
    transaction.on_commit(lambda: current_app.send_task("checkout.relay_outbox"))


def announce_email_again(*, key: str, payload: dict[str, object]) -> None:
    """The buyer's confirmation e-mail once more (support), without the merchant's webhook."""
    OutboxMessage.objects.create(topic=EMAIL_TOPIC, key=key, payload=payload)
    transaction.on_commit(lambda: current_app.send_task("checkout.relay_outbox"))


def announce_late_void(order: Order) -> None:
    """In the transaction that voids a payment that came after its hold ended: the buyer is told
    once (one key per order) that it was cancelled, that they are not charged, and where to try again."""
    payload = {"order": order.pk, "drop": order.drop_id, "buyer": order.buyer_id}
    OutboxMessage.objects.bulk_create(
        [OutboxMessage(topic=LATE_VOIDED_TOPIC, key=f"order-{order.pk}-late-voided", payload=payload)],
        ignore_conflicts=True,
    )
    transaction.on_commit(lambda: current_app.send_task("checkout.relay_outbox"))


def _announce_once(topic: str, key: str, order: Order, **extra: object) -> None:
    payload = {"order": order.pk, "drop": order.drop_id, "buyer": order.buyer_id, **extra}
    OutboxMessage.objects.bulk_create(
        [OutboxMessage(topic=topic, key=key, payload=payload)], ignore_conflicts=True
    )
    transaction.on_commit(lambda: current_app.send_task("checkout.relay_outbox"))


def announce_refund(refund: Refund, *, pending: bool = False) -> None:
    """In the transaction that records the provider's yes: the buyer hears of it once per refund.
    A pending refund's e-mail carries no credit note: announce_credit_note sends it when it is issued."""
    _announce_once(REFUND_TOPIC, f"refund-{refund.pk}", refund.order, refund=refund.pk, pending=pending)


def announce_credit_note(refund: Refund) -> None:
    """In the transaction that settles a pending refund (the provider's later webhook): its credit
    note goes to the buyer, once per refund however often the webhook comes."""
    _announce_once(CREDIT_NOTE_TOPIC, f"refund-{refund.pk}-credit-note", refund.order, refund=refund.pk)


def announce_cancel(order: Order, *, by_shop: bool = False, reason: str = "") -> None:
    """In the cancelling transaction: the buyer's own cancel confirmed, or the shop's explained,
    once per order."""
    _announce_once(CANCELLED_TOPIC, f"order-{order.pk}-cancelled", order, by_shop=by_shop, reason=reason)


def announce_shipment(order: Order) -> None:
    """In the transaction that marks it shipped: the buyer hears once per tracking number (a
    corrected number is news, the same number again is not)."""
    _announce_once(SHIPPED_TOPIC, f"order-{order.pk}-shipped-{order.tracking_number}", order)


def shipment_text(order: Order) -> str:
    return render_to_string(
        "checkout/shipped_email.txt",
        {
            "order": order,
            "units": formatting.units(order.quantity - order.refunded_quantity),
            "carrier": carriers.carrier_name(order.carrier),
            "tracking_url": carriers.tracking_url(order),
            "url": settings.PUBLIC_BASE_URL.rstrip("/") + order.get_absolute_url(),
        },
    )


def announce_dispute(dispute: Dispute, *, news: str) -> None:
    """In the transaction that records it: the merchant hears once that a dispute opened, and once
    that it was decided (news "opened" or "decided")."""
    payload = {"dispute": dispute.pk, "order": dispute.order_id, "news": news}
    OutboxMessage.objects.bulk_create(
        [OutboxMessage(topic=DISPUTE_TOPIC, key=f"dispute-{dispute.pk}-{news}", payload=payload)],
        ignore_conflicts=True,
    )
    transaction.on_commit(lambda: current_app.send_task("checkout.relay_outbox"))


def announce_draw_beacon_unreachable(*, drop_id: int, round: int, note: str) -> None:
    """In the transaction that records the failed check: the merchant hears once per drop that no
    drand relay answered with a valid round before the sale (ops/preflight.py)."""
    payload = {"drop": drop_id, "round": round, "note": note}
    OutboxMessage.objects.bulk_create(
        [OutboxMessage(topic=DRAW_BEACON_TOPIC, key=f"draw-beacon-{drop_id}", payload=payload)],
        ignore_conflicts=True,
    )
    transaction.on_commit(lambda: current_app.send_task("checkout.relay_outbox"))


def draw_beacon_text(drop: Drop, note: str) -> str:
    """The merchant's e-mail: whose draw is at risk, why, and what the choices are."""
    return render_to_string(
        "checkout/draw_beacon_email.txt",
        {
            "drop": drop,
            "starts": formatting.moment(drop.starts_at),
            "note": note,
            "url": settings.PUBLIC_BASE_URL.rstrip("/") + reverse("admin:shop_drop_change", args=[drop.pk]),
        },
    )


def dispute_subject(dispute: Dispute, news: str) -> str:
    words = {"number": dispute.order_id, "amount": dispute.amount_display}
    if news == "opened":
        return _("Order %(number)s: the buyer's bank disputes %(amount)s") % words
    if dispute.state == DisputeState.WON:
        return _("Order %(number)s: the dispute of %(amount)s is won") % words
    return _("Order %(number)s: the dispute of %(amount)s is lost") % words


def dispute_text(dispute: Dispute, news: str) -> str:
    """The merchant's e-mail: what is disputed, why, by when to answer, where the order is."""
    order = dispute.order
    return render_to_string(
        "checkout/dispute_email.txt",
        {
            "news": news,
            "order": order,
            "state": dispute.get_state_display(),
            "decided": dispute.state in DISPUTE_DECIDED,
            "won": dispute.state == DisputeState.WON,
            "amount": dispute.amount_display,
            "reason": dispute.reason.replace("_", " ") or "-",
            "due": formatting.moment(dispute.evidence_due_at) if dispute.evidence_due_at else "",
            "url": settings.PUBLIC_BASE_URL.rstrip("/")
            + reverse("admin:checkout_order_change", args=[order.pk]),
        },
    )


def _absolute(path: str) -> str:
    return settings.PUBLIC_BASE_URL.rstrip("/") + path


def merchant_addresses() -> list[str]:
    """Who hears of disputes: MERCHANT_EMAIL, else the Merchants group's addresses."""
    configured: list[str] = list(getattr(settings, "MERCHANT_EMAIL", []))
    return configured or merchants_with_email()


def refund_text(refund: Refund) -> str:
    return render_to_string(
        "checkout/refund_email.txt",
        {
            "refund": refund,
            "order": refund.order,
            "units": formatting.units(refund.quantity),
            "total": formatting.money(refund.amount_minor, refund.currency),
            "url": settings.PUBLIC_BASE_URL.rstrip("/") + refund.order.get_absolute_url(),
        },
    )


def credit_note_text(refund: Refund, note: Invoice) -> str:
    return render_to_string(
        "checkout/credit_note_email.txt",
        {
            "order": refund.order,
            "note": note.number_text,
            "total": formatting.money(refund.amount_minor, refund.currency),
            "url": settings.PUBLIC_BASE_URL.rstrip("/") + refund.order.get_absolute_url(),
        },
    )


def cancel_text(order: Order, *, by_shop: bool = False, reason: str = "") -> str:
    return render_to_string(
        "checkout/cancelled_email.txt",
        {
            "order": order,
            "by_shop": by_shop,
            "reason": reason,
            "units": formatting.units(order.quantity),
            "total": formatting.money(order.amount_minor, order.currency),
        },
    )


def late_void_text(order: Order) -> str:
    """The e-mail's body; the link to reserve again only while the drop is on sale with units left."""
    drop = order.drop
    left = claimable_by_drop([drop.pk]).get(drop.pk, 0)
    on_sale = drop.state_at(timezone.now()) == DropState.LIVE and left > 0
    return render_to_string(
        "checkout/late_payment_email.txt",
        {
            "order": order,
            "units": formatting.units(order.quantity),
            "total": formatting.money(order.amount_minor, order.currency),
            # The tax as snapshotted on the order; an untaxed order's e-mail says the total alone.
            "net": formatting.money(order.charge.net_minor, order.currency),
            "tax": formatting.money(order.tax_minor, order.currency) if order.tax_rate else "",
            "tax_label": f"{settings.TAX_NAME} {pricing.rate_text(order.price.rate)}",
            "left": formatting.units(left),
            "url": settings.PUBLIC_BASE_URL.rstrip("/") + drop.get_absolute_url() if on_sale else "",
        },
    )


def room_ahead(drop: Drop) -> bool:
    """A reminder of a waiting room that is open before the sale: it says "join now", not "buy"."""
    return drop.waiting_room and timezone.now() < drop.starts_at


def reminder_subject(reminder: Reminder) -> str:
    title = reminder.drop.display_title
    if room_ahead(reminder.drop):
        return _("The waiting room of %(title)s is open") % {"title": title}
    return _("%(title)s is on sale now") % {"title": title}


def reminder_text(reminder: Reminder) -> str:
    drop = reminder.drop
    return render_to_string(
        "checkout/reminder_email.txt",
        {
            "reminder": reminder,
            "drop": drop,
            "room_ahead": room_ahead(drop),
            "starts": formatting.moment(drop.starts_at),
            "ends": formatting.moment(drop.ends_at),
            "limit": formatting.units(drop.per_buyer_limit),
            "url": settings.PUBLIC_BASE_URL.rstrip("/") + drop.get_absolute_url(),
            "calendar_url": settings.PUBLIC_BASE_URL.rstrip("/") + reverse("drop-calendar", args=[drop.slug]),
        },
    )


def raffle_text(message: OutboxMessage, drop: Drop, buyer: AbstractBaseUser) -> str:
    """A raffle result's body: won, with the hold's page to pay on and its deadline; lost, with
    where the draw can be checked."""
    base = settings.PUBLIC_BASE_URL.rstrip("/")
    hold = Hold.objects.filter(pk=message.payload.get("hold")).first()
    won = message.payload["result"] == "won" and hold is not None
    return render_to_string(
        "checkout/raffle_email.txt",
        {
            "buyer": buyer,
            "drop": drop,
            "result": "won" if won else "lost",
            "deadline": formatting.moment(hold.expires_at) if won and hold is not None else "",
            "url": base + (hold.get_absolute_url() if won and hold is not None else _verify_url(drop)),
        },
    )


def _verify_url(drop: Drop) -> str:
    return reverse("drop-queue-verify", kwargs={"slug": drop.slug})


def relay_outbox(*, limit: int = 200) -> int:
    """Send unsent outbox messages one by one, each marked sent in the transaction that locked it.

    A crash loses nothing (the message stays unsent) and can repeat only the one message in
    flight, with the same key, which its consumer uses to drop the repeat.
    """
    sent, failed = 0, list[int]()
    for _round in range(limit):
        with transaction.atomic(durable=True):
            message = (
                OutboxMessage.objects.select_for_update(skip_locked=True)
                .filter(sent_at__isnull=True, attempts__lt=MAX_ATTEMPTS, next_attempt_at__lte=Now())
                .exclude(pk__in=failed)
                .order_by("id")
                .first()
            )
            if message is None:
                break
            try:
                with translation.override(_language_of(message)):
                    _deliver(message)
            except Exception as error:  # any consumer failure: keep it for a later round
                backoff = timedelta(seconds=min(2**message.attempts, 3600))
                OutboxMessage.objects.filter(pk=message.pk).update(
                    attempts=message.attempts + 1,
                    last_error=str(error)[:300],
                    next_attempt_at=Now() + backoff,
                )
                log.warning("outbox %s %s not sent: %s", message.topic, message.key, error)
                failed.append(message.pk)
                continue
            OutboxMessage.objects.filter(pk=message.pk).update(sent_at=Now(), attempts=message.attempts + 1)
            sent += 1
    return sent


def confirmation_text(order: Order) -> str:
    """The confirmation e-mail's body, a receipt: the line (its variant, which seats), net, tax and
    total, the address, the order number, where to see it."""
    labels = sorted(order.hold.units.values_list("label", flat=True))
    variant = order.hold.variant

    def money(minor: int) -> str:
        return formatting.money(minor, order.currency)

    return render_to_string(
        "checkout/confirmation_email.txt",
        {
            "order": order,
            "units": formatting.units(order.quantity),
            "variant": variant.name if variant is not None else "",  # "" for a drop of one stock
            "placed": formatting.moment(order.created_at),
            "seats": formatting.seats(labels),
            "total": formatting.money(order.amount_minor, order.currency),
            "line": formatting.money(order.price.gross_minor, order.currency),
            # The fee and the discount as snapshotted; "" where none.
            "shipping": formatting.money(order.shipping_minor, order.currency)
            if order.shipping_minor
            else "",
            "discount": formatting.money(order.discount_minor, order.currency) if order.discount_code else "",
            # The tax as snapshotted on the order, per rate; an untaxed order's e-mail says the total alone.
            "net": formatting.money(order.charge.net_minor, order.currency),
            "tax": formatting.money(order.tax_minor, order.currency) if order.tax_minor else "",
            "taxes": [
                (f"{settings.TAX_NAME} {pricing.rate_text(rate)}", formatting.money(tax, order.currency))
                for rate, tax in order.charge.taxes
            ],
            "url": settings.PUBLIC_BASE_URL.rstrip("/") + order.get_absolute_url(),
        },
    )


def _language_of(message: OutboxMessage) -> str:
    """The language to write the message in: its buyer's (every e-mail's payload names them; a
    reminder written before it did names its reminder), else the worker's."""
    worker = translation.get_language() or settings.LANGUAGE_CODE
    if message.topic in (DISPUTE_TOPIC, DRAW_BEACON_TOPIC):
        return settings.LANGUAGE_CODE  # the merchant's e-mail: the shop's own language
    if not message.topic.endswith((".email", ".push")):
        return worker  # the merchant's webhook: JSON, no words
    buyer = message.payload.get("buyer")
    if buyer is None and "reminder" in message.payload:
        reminders = Reminder.objects.filter(pk=message.payload["reminder"])
        buyer = reminders.values_list("buyer_id", flat=True).first()
    return languages.of(buyer, default=worker)


def _deliver(message: OutboxMessage) -> None:
    if message.topic == EMAIL_TOPIC:
        order = Order.objects.select_related("buyer", "drop__product").get(pk=message.payload["order"])
        if not order.buyer.email:
            return  # nobody to write to; delivered as far as it can be
        mail = emails.build(
            key=message.key,
            to=[order.buyer.email],
            subject=_("Your order %(number)s is confirmed: %(title)s")
            % {"number": order.pk, "title": order.drop.display_title},
            body=confirmation_text(order),
        )
        # The invoice, in the buyer's language (an order confirmed before invoices existed has none).
        invoice = order.invoices.filter(kind=InvoiceKind.INVOICE).first()
        if invoice is not None:
            mail.attach(*invoices.attachment(invoice))
        mail.send()
    elif message.topic == LATE_VOIDED_TOPIC:
        order = Order.objects.select_related("buyer", "drop__product").get(pk=message.payload["order"])
        if not order.buyer.email:
            return
        emails.build(
            key=message.key,
            to=[order.buyer.email],
            subject=_("Your payment for order %(number)s was cancelled: you are not charged")
            % {"number": order.pk},
            body=late_void_text(order),
        ).send()
    elif message.topic == REFUND_TOPIC:
        refund = Refund.objects.select_related("order__buyer", "order__drop__product").get(
            pk=message.payload["refund"]
        )
        # The credit note, once the money went back; a refund pending at the provider has none yet,
        # and gets it in its own e-mail when the provider confirms (CREDIT_NOTE_TOPIC).
        note = None if message.payload.get("pending") else Invoice.objects.filter(refund=refund).first()
        _mail(
            refund.order,
            message,
            _("Order %(number)s: %(amount)s refunded")
            % {
                "number": refund.order.pk,
                "amount": formatting.money(refund.amount_minor, refund.currency),
            },
            refund_text(refund),
            attachments=[invoices.attachment(note)] if note is not None else [],
        )
    elif message.topic == CREDIT_NOTE_TOPIC:
        refund = Refund.objects.select_related("order__buyer", "order__drop__product").get(
            pk=message.payload["refund"]
        )
        note = Invoice.objects.get(refund=refund)
        _mail(
            refund.order,
            message,
            _("Order %(number)s: your credit note %(note)s")
            % {"number": refund.order.pk, "note": note.number_text},
            credit_note_text(refund, note),
            attachments=[invoices.attachment(note)],
        )
    elif message.topic == CANCELLED_TOPIC:
        order = Order.objects.select_related("buyer", "drop__product").get(pk=message.payload["order"])
        subject = _("Your order %(number)s is cancelled: you are not charged") % {"number": order.pk}
        by_shop, reason = bool(message.payload.get("by_shop")), str(message.payload.get("reason") or "")
        _mail(order, message, subject, cancel_text(order, by_shop=by_shop, reason=reason))
    elif message.topic == SHIPPED_TOPIC:
        order = Order.objects.select_related("buyer", "drop__product").get(pk=message.payload["order"])
        subject = _("Your order %(number)s is on its way") % {"number": order.pk}
        _mail(order, message, subject, shipment_text(order))
    elif message.topic == REMINDER_TOPIC:
        reminder = Reminder.objects.select_related("buyer", "drop__product").get(
            pk=message.payload["reminder"]
        )
        if not reminder.buyer.email:
            return
        mail = emails.build(
            key=message.key,
            to=[reminder.buyer.email],
            subject=reminder_subject(reminder),
            body=reminder_text(reminder),
            unsubscribe_for=reminder.buyer_id,  # optional mail: one click stops it (RFC 8058)
        )
        # The start as a calendar event, for the next time (or a buyer who reads this late).
        event = calendar.drop_event(reminder.drop, stamped_at=timezone.now())
        mail.attach(calendar.file_name(reminder.drop), event, "text/calendar; method=PUBLISH")
        mail.send()
    elif message.topic == RAFFLE_TOPIC:
        drop = Drop.objects.select_related("product").get(pk=message.payload["drop"])
        buyer = get_user_model().objects.get(pk=message.payload["buyer"])
        if not buyer.email:
            return
        won = message.payload["result"] == "won"
        if won:
            subject = _("You won: pay for your unit of %(title)s") % {"title": drop.display_title}
        else:
            subject = _("The raffle of %(title)s is decided") % {"title": drop.display_title}
        emails.build(
            key=message.key,
            to=[buyer.email],
            subject=subject,
            body=raffle_text(message, drop, buyer),
        ).send()
    elif message.topic == DISPUTE_TOPIC:
        dispute = Dispute.objects.select_related("order__drop__product").get(pk=message.payload["dispute"])
        to = merchant_addresses()
        if not to:
            log.warning("dispute %s: no MERCHANT_EMAIL and no merchant with an address to tell", dispute.pk)
            return  # nobody to write to; the admin and the dashboard still show it
        news = str(message.payload["news"])
        emails.build(
            key=message.key,
            to=to,
            subject=dispute_subject(dispute, news),
            body=dispute_text(dispute, news),
        ).send()
    elif message.topic == push.TOPIC:
        push.deliver(message)  # a phone's notification (checkout/push.py)
    elif message.topic == DRAW_BEACON_TOPIC:
        drop = Drop.objects.select_related("product").get(pk=message.payload["drop"])
        to = merchant_addresses()
        if not to:
            log.warning("draw beacon of drop %s: no MERCHANT_EMAIL and no merchant to tell", drop.pk)
            return  # the alert rule still pages on-call
        emails.build(
            key=message.key,
            to=to,
            subject=_("The draw of %(title)s cannot reach its public random round")
            % {"title": drop.display_title},
            body=draw_beacon_text(drop, str(message.payload.get("note", ""))),
        ).send()
    elif message.topic == MERCHANT_TOPIC:
        url = getattr(settings, "MERCHANT_WEBHOOK_URL", "")
        if not url:
            return  # no merchant hook configured
        answer = httpx.post(url, json=message.payload, headers={"Idempotency-Key": message.key}, timeout=5)
        answer.raise_for_status()
    else:
        raise ValueError(f"unknown outbox topic {message.topic}")


def _mail(
    order: Order,
    message: OutboxMessage,
    subject: str,
    body: str,
    *,
    attachments: list[tuple[str, bytes, str]] | None = None,
) -> None:
    if order.buyer.email:  # else nobody to write to: delivered as far as it can be
        mail = emails.build(key=message.key, to=[order.buyer.email], subject=subject, body=body)
        for name, content, kind in attachments or []:
            mail.attach(name, content, kind)
        mail.send()
