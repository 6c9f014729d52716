"""Refunds and cancellations: money back for a paid order, its units back on sale if the merchant says.

1. request_refund: in one transaction, lock the order, check what is left to refund, write the
   refund row and count it on the order (a CHECK keeps the counts within what was paid).
2. send_refund (inline, then a Celery task until the provider answers): ask the provider with the
   refund's own key, so a repeat is the same refund; record its answer once, and with it count the
   units refunded on the hold and put them back on sale if asked (holds.refund_units_in).
3. A refund.* webhook confirms a pending refund (apply_event_in, from the saga's process_event).

cancel_order: the buyer's, before the money is taken: an open payment's hold is released, a
confirmed but uncaptured one is voided and its units come back.

Lock order: order row, payment row, refund row, hold row, stock rows, the credit-note counter.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from celery import current_app
from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.db.models import F
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy

from checkout import invoices, outbox
from checkout.models import REFUND_KEY_MAX, Order, OrderState, Payment, PaymentState, Refund, RefundState
from checkout.providers import get_provider
from checkout.providers.base import PermanentProviderError, ProviderError
from core.errors import FloodgateError, IdempotencyKeyReused, InvalidInput, NotFound, fill
from core.text import storable
from holds import services as holds
from holds.models import Hold

log = logging.getLogger(__name__)

REASON_MAX = 300


class NotRefundable(FloodgateError):
    code, status = "not_refundable", 409


class CapturePending(FloodgateError):
    """Confirmed, the capture not done yet: a refund now could cross it (asked again in a moment)."""

    code, status = "capture_pending", 409


class NotCancellable(FloodgateError):
    code, status = "not_cancellable", 409


@dataclass(frozen=True)
class Asked:
    refund: Refund
    created: bool  # False: the same Idempotency-Key again, answered with the refund it made


def _whole(value: object, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(fill(gettext_lazy("%(what)s must be a whole number."), what=what))
    return value


def request_refund(
    *,
    order_id: int,
    quantity: object = None,
    amount_minor: object = None,
    restock: object = False,
    reason: object = "",
    by: int | None,
    request_key: str = "",
) -> Asked:
    """Write a refund of `quantity` units (default: all not yet refunded) for `amount_minor`
    (default: their share of what was paid; the last units get the remainder, so the parts add
    up to the whole). Raises InvalidInput, NotFound, NotRefundable or CapturePending; changes
    nothing then."""
    units, amount = _whole(quantity, "quantity"), _whole(amount_minor, "amount_minor")
    if not isinstance(restock, bool):
        raise InvalidInput(gettext_lazy("restock must be true or false."))
    if not isinstance(reason, str) or len(reason) > REASON_MAX or not storable(reason):
        raise InvalidInput(
            fill(
                gettext_lazy("reason must be text of at most %(reason_max)s characters."),
                reason_max=REASON_MAX,
            )
        )
    if len(request_key) > REFUND_KEY_MAX or not request_key.isprintable():
        raise InvalidInput(
            fill(
                gettext_lazy("The Idempotency-Key must be printable, at most %(refund_key_max)s characters."),
                refund_key_max=REFUND_KEY_MAX,
            )
        )
    with transaction.atomic(durable=True):
        order = Order.objects.select_for_update(of=("self",)).filter(pk=order_id).first()
        if order is None:
            raise NotFound(fill(gettext_lazy("There is no order %(order_id)s."), order_id=order_id))
        if request_key and (same := order.refunds.filter(request_key=request_key).first()):
            asked = (units or same.quantity, amount or same.amount_minor, restock)
            if asked != (same.quantity, same.amount_minor, same.restock):
                raise IdempotencyKeyReused(
                    gettext_lazy("This Idempotency-Key was used for another refund of this order.")
                )
            return Asked(same, created=False)
        payment = _captured_payment(order)
        hold = Hold.objects.only("listed", "exchange").get(pk=order.hold_id)
        if restock and hold.exchange:
            raise InvalidInput(
                gettext_lazy(
                    "A unit bought through the exchange cannot go back on sale: refund it with restock false."
                )
            )
        left_units = order.quantity - order.refunded_quantity - hold.listed  # listed: the exchange's
        left_money = order.amount_minor - order.refunded_minor
        if left_units <= 0 and hold.listed:
            raise NotRefundable(
                fill(
                    gettext_lazy(
                        "Order %(pk)s's units are refunded or on the exchange: withdraw them first."
                    ),
                    pk=order.pk,
                )
            )
        if left_units <= 0:
            raise NotRefundable(
                fill(gettext_lazy("Every unit of order %(pk)s is refunded already."), pk=order.pk)
            )
        units = left_units if units is None else units
        if not 1 <= units <= left_units:
            raise InvalidInput(
                fill(
                    gettext_lazy(
                        "quantity must be between 1 and %(left_units)s, the units not refunded yet."
                    ),
                    left_units=left_units,
                )
            )
        if amount is None:
            # The last units take what is left, so rounded shares still add up to the amount paid;
            # the shipping fee comes back with them, not a share of it with each partial refund.
            # Not after a resale through the exchange: what is left then holds its fee (and any price
            # below what was paid), which the buyer does not get for these units.
            goods = order.amount_minor - order.shipping_minor
            last = units == left_units and hold.listed == 0
            share = goods * units // order.quantity + (order.shipping_minor if last else 0)
            resold = order.refunds.filter(listing__isnull=False).exists()
            amount = left_money if last and not resold else min(share, left_money)
        if not 1 <= amount <= left_money:
            raise InvalidInput(
                f"amount_minor must be between 1 and {left_money}, what is left of {order.amount_minor} paid."
                if left_money
                else "Nothing is left to refund of what was paid."
            )
        refund = Refund.objects.create(
            order=order,
            payment=payment,
            quantity=units,
            amount_minor=amount,
            currency=order.currency,
            restock=restock,
            reason=reason,
            requested_by_id=by,
            request_key=request_key,
        )
        Order.objects.filter(pk=order.pk).update(
            refunded_quantity=F("refunded_quantity") + units,
            refunded_minor=F("refunded_minor") + amount,
            updated_at=Now(),
        )
    log.info(
        "order %s: refund %s of %s units (%s) requested", order.pk, refund.pk, units, refund.amount_display
    )
    return Asked(refund, created=True)


def _captured_payment(order: Order) -> Payment:
    """The payment whose money a refund gives back, locked; refuses any other state clearly."""
    if order.state not in {OrderState.CONFIRMED}:
        words = {
            OrderState.REFUNDED: gettext_lazy("is refunded already"),
            OrderState.CANCELLED: gettext_lazy("was cancelled: nothing was charged"),
            OrderState.FAILED: gettext_lazy("was never paid (or its payment was cancelled)"),
            OrderState.PENDING: gettext_lazy("is not paid yet"),
        }
        raise NotRefundable(
            fill(
                gettext_lazy("Order %(pk)s %(value)s."),
                pk=order.pk,
                value=words.get(OrderState(order.state), order.state),
            )
        )
    payment = (
        Payment.objects.select_for_update()
        .filter(order=order, state__in=[PaymentState.CAPTURED, PaymentState.CAPTURE_PENDING])
        .first()
    )
    if payment is None:
        raise NotRefundable(
            fill(
                gettext_lazy("Order %(pk)s has no captured payment to refund; see its payments."), pk=order.pk
            )
        )
    if payment.state == PaymentState.CAPTURE_PENDING:
        raise CapturePending(
            gettext_lazy("The payment is still being captured; try the refund again in a minute.")
        )
    return payment


def send_refund(*, refund_pk: int) -> str:
    """Ask the provider for a requested refund and record its answer; safe to run twice (the key
    makes it one refund at the provider; only one run records it). Raises ProviderError to retry."""
    refund = Refund.objects.select_related("payment").get(pk=refund_pk)
    if refund.state != RefundState.REQUESTED:
        return f"nothing_to_do_{refund.state}"
    provider = get_provider(refund.payment.provider)
    try:
        answer = provider.refund(
            session_id=str(refund.payment.session_id),
            amount_minor=refund.amount_minor,
            currency=refund.currency,
            key=refund.key,
        )
    except PermanentProviderError as error:
        return _record(refund, RefundState.FAILED, "", f"{error}")
    except ProviderError as error:
        Refund.objects.filter(pk=refund.pk).update(last_error=str(error)[:300], updated_at=Now())
        log.warning("refund %s: the provider did not answer: %s", refund.pk, error)
        raise
    return _record(refund, answer.state, answer.refund_id, "")


def _record(refund: Refund, state: str, provider_refund_id: str, error: str) -> str:
    """Record the provider's first answer to a requested refund, once (a second run finds it
    recorded). A refund that went through counts its units on the hold (and puts them back on
    sale); a pending one waits for the provider's word (apply_event_in) before it moves a unit, so
    a refund that fails later never leaves units resold that the buyer kept; a refused one gives
    its units and amount back to the order's refundable."""
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        order = Order.objects.select_for_update(of=("self",)).get(pk=refund.order_id)
        moved = Refund.objects.filter(pk=refund.pk, state=RefundState.REQUESTED).update(
            state=state, provider_refund_id=provider_refund_id, last_error=error[:300], updated_at=Now()
        )
        if not moved:
            return "already_recorded"
        if state == RefundState.FAILED:
            _give_back(refund)
            log.error("refund %s refused by the provider: %s", refund.pk, error)
            return "failed"
        if state == RefundState.SUCCEEDED:
            _refund_units(cursor, refund, hold_id=order.hold_id)
        outbox.announce_refund(refund, pending=state == RefundState.PENDING)
    return state


def _give_back(refund: Refund) -> None:
    """A refund that did not happen: its units and amount are the order's to refund again. A seller's
    refund for a unit resold through the exchange gives back only the amount: the unit is the new
    buyer's, and the money is owed by hand (logged for on-call)."""
    units = 0 if refund.listing_id is not None else refund.quantity
    Order.objects.filter(pk=refund.order_id).update(
        refunded_quantity=F("refunded_quantity") - units,
        refunded_minor=F("refunded_minor") - refund.amount_minor,
        updated_at=Now(),
    )
    if refund.listing_id is not None:
        log.error("refund %s of a unit resold on the exchange failed: pay its seller by hand", refund.pk)


def _refund_units(cursor: CursorWrapper, refund: Refund, *, hold_id: int) -> None:
    """The money went back: the hold counts the units refunded (back on sale if asked), and a
    whole order is refunded. A seller's refund for a unit resold through the exchange moved its unit
    when the new buyer's payment was captured (checkout.exchange.pay_out_in), not now."""
    resold = refund.listing_id is not None
    if not resold and not holds.refund_units_in(
        cursor, hold_id=hold_id, units=refund.quantity, restock=refund.restock
    ):
        # Cannot happen while the order's counts bound the hold's; loud if it ever does.
        raise RuntimeError(f"refund {refund.pk}: hold {hold_id} has fewer sold units than refunded")
    _mark_refunded_if_whole(refund.order_id)
    invoices.issue_credit_note_in(cursor, refund=refund)  # its counter last: the hottest row


def _mark_refunded_if_whole(order_pk: int) -> None:
    """CONFIRMED -> REFUNDED once every unit's refund has gone through."""
    order = Order.objects.get(pk=order_pk)
    done = sum(r.quantity for r in order.refunds.filter(state=RefundState.SUCCEEDED))
    if done >= order.quantity:
        Order.objects.filter(pk=order_pk, state=OrderState.CONFIRMED).update(
            state=OrderState.REFUNDED, updated_at=Now()
        )


def apply_event_in(cursor: CursorWrapper, *, payment: Payment, facts: dict[str, Any]) -> str:
    """A refund.succeeded or refund.failed webhook, inside process_event's transaction: it settles
    the pending refund it names (a refund the provider answered at once is already recorded)."""
    refund_id, kind = str(facts.get("refund_id") or ""), str(facts.get("type"))
    refunds = Refund.objects.select_for_update().filter(payment=payment)
    refund = refunds.filter(provider_refund_id=refund_id).first() if refund_id else None
    if refund is None and not refund_id:
        # The provider did not name the refund (a charge-level event): the oldest pending one.
        refund = refunds.filter(state=RefundState.PENDING).order_by("created_at").first()
    if refund is None:
        log.warning("payment %s: a %s for a refund Floodgate did not make (%r)", payment.pk, kind, refund_id)
        return "refund_unknown"
    if refund.state != RefundState.PENDING:
        return f"refund_already_{refund.state}"
    order = Order.objects.select_for_update(of=("self",)).get(pk=refund.order_id)  # lock order: as _record
    if kind == "refund.succeeded":
        Refund.objects.filter(pk=refund.pk).update(state=RefundState.SUCCEEDED, updated_at=Now())
        _refund_units(cursor, refund, hold_id=order.hold_id)
        outbox.announce_credit_note(refund)  # the buyer's e-mail went out pending, without it
        return "refund_succeeded"
    # Accepted, then failed: no unit moved while it was pending, so the order may be refunded again.
    Refund.objects.filter(pk=refund.pk).update(
        state=RefundState.FAILED, last_error="the provider reported the refund failed", updated_at=Now()
    )
    _give_back(refund)
    log.error(
        "refund %s failed at the provider after it was accepted; the buyer has no money back", refund.pk
    )
    return "refund_failed"


def enqueue(refund: Refund) -> None:
    """Send the refund in a task after this transaction (a lost task: the beat sweep resends)."""
    transaction.on_commit(lambda: current_app.send_task("checkout.send_refund", args=(refund.pk,)))


def send_now_or_later(refund: Refund) -> Refund:
    """Try the provider at once, so the merchant sees the answer; if it does not answer, a task
    keeps trying with the same key. Returns the refund as recorded."""
    try:
        send_refund(refund_pk=refund.pk)
    except ProviderError:
        enqueue(refund)
    refund.refresh_from_db()
    return refund


def cancel_order(*, order_id: int, buyer_id: int | None, reason: str = "") -> Order:
    """A cancel before the money is taken, by the buyer (buyer_id) or by the shop (None, with the
    reason the buyer is told): a pending order's hold is released (a late authorisation is then
    voided); a confirmed one's authorisation is voided and its units come back to the drop (or its
    line). NotFound for another's order; NotCancellable once captured (a refund is the way then)."""
    if len(reason) > REASON_MAX or not storable(reason):
        raise InvalidInput(fill(gettext_lazy("A reason is at most %(max)s characters."), max=REASON_MAX))
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        mine = {} if buyer_id is None else {"buyer_id": buyer_id}
        order = Order.objects.select_for_update(of=("self",)).filter(pk=order_id, **mine).first()
        if order is None:
            raise NotFound(gettext_lazy("There is no such order among yours."))
        if order.state == OrderState.CANCELLED:
            return order
        if order.state == OrderState.PENDING:
            holds.release_in(cursor, hold_id=order.hold_id)
            # An authorisation that still comes for this attempt is then voided (the saga's
            # declined-then-authorised path): the buyer is not charged for a cancelled order.
            Payment.objects.filter(
                order=order, state__in=[PaymentState.CREATED, PaymentState.PENDING]
            ).update(state=PaymentState.FAILED, last_error="the buyer cancelled the order", updated_at=Now())
        elif order.state == OrderState.CONFIRMED:
            # Locked: settle_payment holds this row while it captures, so this waits for its answer.
            payment = Payment.objects.select_for_update().filter(
                order=order, state=PaymentState.CAPTURE_PENDING
            )
            if not payment.update(state=PaymentState.VOID_PENDING, updated_at=Now()):
                raise NotCancellable(
                    gettext_lazy("The payment has been taken already; ask the shop for a refund.")
                )
            holds.refund_units_in(cursor, hold_id=order.hold_id, units=order.quantity, restock=True)
            transaction.on_commit(lambda: _send_settle(order.pk))
        else:
            raise NotCancellable(
                fill(gettext_lazy("This order is %(state)s: there is nothing to cancel."), state=order.state)
            )
        Order.objects.filter(pk=order.pk).update(state=OrderState.CANCELLED, updated_at=Now())
        outbox.announce_cancel(order, by_shop=buyer_id is None, reason=reason)
    order.refresh_from_db()
    return order


def _send_settle(order_pk: int) -> None:
    for payment_pk in Payment.objects.filter(order_id=order_pk, state=PaymentState.VOID_PENDING).values_list(
        "pk", flat=True
    ):
        current_app.send_task("checkout.settle_payment", args=(payment_pk,))
