"""The payment saga: reserve, pay with nothing held, confirm exactly once.

1. start_payment: extend the hold once, write the order and a payment (one short
   transaction), then open the provider's hosted session (outside any transaction).
2. the provider calls our webhook; record_webhook stores it once per event id.
3. process_event (a Celery task): in one transaction, HELD -> SOLD and the order
   confirmed with its outbox messages, or, when the hold had already ended, the
   order failed and the authorisation marked for voiding. A decline fails the attempt, not
   the hold: the buyer may pay again with another card while the hold lasts.
4. settle_payment (a Celery task): capture or void at the provider, idempotently.

Lock order: webhook event row, payment row, then a dispute row or the hold row, stock rows, and
last the invoice counter (checkout.invoices).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import DatabaseError, connection, transaction
from django.db.backends.utils import CursorWrapper
from django.db.models import QuerySet
from django.db.models.functions import Now
from django.urls import reverse
from django.utils.translation import gettext_lazy
from psycopg.types.json import Jsonb

from checkout import disputes, exchange, failures, invoices, outbox, redirects, refunds, selectors, sql
from checkout.models import Order, OrderState, Payment, PaymentState, WebhookEvent
from checkout.providers import get_provider
from checkout.providers.base import DISPUTE_TYPES, PaymentProvider, PermanentProviderError, ProviderError
from checkout.providers.base import WebhookEvent as ProviderEvent
from core.errors import Busy, FloodgateError
from holds import selectors as hold_selectors
from holds import services as holds
from holds.models import Hold
from shop import identity
from shop.models import Drop

log = logging.getLogger(__name__)

# How long a hold whose payment the provider authorised waits for that event to be applied: a
# worker late or down must not let a paid hold expire (the web processes apply stale events).
AUTHORISED_HOLD_SECONDS = 15 * 60

OPENING_TIMEOUT = timedelta(seconds=30)  # well past the provider client's own timeouts


class ProviderUnavailable(Busy):
    code = "payment_unavailable"


class PaymentOpening(Busy):
    code = "payment_opening"


@dataclass(frozen=True)
class Started:
    payment: Payment
    order: Order


def _absolute(path: str) -> str:
    return settings.PUBLIC_BASE_URL.rstrip("/") + path


def _description(order: Order) -> str:
    """What the provider's page says the buyer pays for: the shop, the order, the goods."""
    name = identity.current().name
    return f"{name} order {order.pk}: {order.quantity} x {order.drop.display_title}"[:200]


def provider_for(drop: Drop) -> str:
    """The provider a drop's buyers pay with: a rehearsal's copy always the simulator, whatever the
    shop takes real money with (its stock and its buyers are made up)."""
    return "simulated" if drop.rehearsal_of_id is not None else settings.PAYMENT_PROVIDER


class AddressRequired(FloodgateError):
    code, status = "address_required", 409


def start_payment(*, hold_id: int, buyer_id: int) -> Started:
    """Extend the hold once and open a payment session; a second call returns the open one."""
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        quantity, drop_id = holds.hold_for_payment(cursor, hold_id=hold_id, buyer_id=buyer_id)
        hold = Hold.objects.select_related(
            "drop__product", "variant", "discount_code", "shipping_address"
        ).get(pk=hold_id)
        provider = get_provider(provider_for(hold.drop))
        if hold.drop.product.ships and hold.shipping_address_id is None:
            raise AddressRequired(
                gettext_lazy("Give the shipping address first: this product is sent by post.")
            )
        # charged: the gross after the hold's discount code (tax on the discounted price) and with
        # the shipping fee of the address's zone (its own tax), all snapshotted; no code can be
        # added after this (the hold is extended: LOCK_HOLD_FOR_DISCOUNT), and an address with
        # another fee is refused (sale.addresses)
        total = hold_selectors.hold_total(hold)
        fee = total.shipping
        order, _ = Order.objects.get_or_create(
            hold=hold,
            defaults={
                "buyer_id": buyer_id,
                "drop_id": drop_id,
                "quantity": quantity,
                "amount_minor": total.gross_minor,
                "tax_minor": total.tax_minor,
                "tax_rate": total.rate,
                "currency": total.currency,
                "shipping_minor": fee.gross_minor if fee is not None else 0,
                "shipping_tax_minor": fee.tax_minor if fee is not None else 0,
                "shipping_tax_rate": fee.rate if fee is not None else 0,
                "discount_code": hold.discount_code.code if hold.discount_code is not None else "",
                "discount_minor": total.off_minor,
                "shipping_address_id": hold.shipping_address_id,
            },
        )
        payment = order.payments.filter(state__in=[PaymentState.CREATED, PaymentState.PENDING]).first()
        if payment is not None and payment.state == PaymentState.CREATED:
            # Opening for longer than a provider call can take: its process died; retire it.
            abandoned = Payment.objects.filter(
                pk=payment.pk, state=PaymentState.CREATED, created_at__lt=Now() - OPENING_TIMEOUT
            ).update(state=PaymentState.FAILED, last_error="the session was never opened", updated_at=Now())
            if not abandoned:
                # Another click is opening the session right now; one session per attempt.
                raise PaymentOpening(
                    gettext_lazy("Your payment page is being prepared; try again in a second.")
                )
            payment = None
        if payment is None:
            # Another card after a decline: the order waits for this attempt again.
            if Order.objects.filter(pk=order.pk, state=OrderState.FAILED, refunded=False).update(
                state=OrderState.PENDING,
                failure_reason="",
                shipping_address_id=hold.shipping_address_id,  # as given for this attempt
                updated_at=Now(),
            ):
                order.state, order.failure_reason = OrderState.PENDING, ""
            payment = Payment.objects.create(
                order=order, provider=provider.name, amount_minor=order.amount_minor, currency=order.currency
            )
    if payment.state == PaymentState.PENDING:
        return Started(payment, order)
    # Outside the transaction: a slow provider holds no lock of ours.
    try:
        session = provider.create_session(
            reference=str(payment.reference),
            amount_minor=payment.amount_minor,
            currency=payment.currency,
            callback_url=_absolute(reverse("webhook", kwargs={"provider": provider.name})),
            return_url=_absolute(order.get_absolute_url()),
            description=_description(order),
            statement_descriptor=identity.current().statement_descriptor,
        )
    except ProviderError as error:
        Payment.objects.filter(pk=payment.pk, state=PaymentState.CREATED).update(
            state=PaymentState.FAILED, last_error=str(error)[:300]
        )
        raise ProviderUnavailable(
            gettext_lazy("The payment provider is not answering; try again in a moment.")
        ) from None
    if not redirects.allowed(session.redirect_url):
        # Never hand a buyer (page or API) an address off the provider's allowed origins.
        log.warning(
            "payment %s: the provider's page %r is not an allowed address", payment.pk, session.redirect_url
        )
        Payment.objects.filter(pk=payment.pk, state=PaymentState.CREATED).update(
            state=PaymentState.FAILED, last_error="the provider's payment page is not an allowed address"
        )
        _cancel_unused(provider, payment_pk=payment.pk, session_id=session.session_id)
        raise ProviderUnavailable(
            gettext_lazy("The payment page could not be opened; try again in a moment.")
        )
    # The one place a session is tied to a payment: a payment records one session, once (checkout/__init__.py,
    # "One charge per payment").
    unopened = Payment.objects.filter(pk=payment.pk, state=PaymentState.CREATED, session_id__isnull=True)
    opened = unopened.update(
        state=PaymentState.PENDING,
        session_id=session.session_id,
        redirect_url=session.redirect_url,
        updated_at=Now(),
    )
    if not opened:
        # Retired while the provider answered (a slower call than OPENING_TIMEOUT): another attempt
        # owns the order now, and this session must never be paid.
        _cancel_unused(provider, payment_pk=payment.pk, session_id=session.session_id)
        raise PaymentOpening(gettext_lazy("This payment changed meanwhile; open it again from your hold."))
    payment.refresh_from_db()
    return Started(payment, order)


def _cancel_unused(provider: PaymentProvider, *, payment_pk: int, session_id: str) -> None:
    """Cancel a session the provider opened that no payment records; best effort, and logged.

    Its page was never handed to a buyer, so it cannot be paid from the shop; cancelling it also
    closes it at the provider.
    """
    try:
        provider.void(session_id=session_id)
    except ProviderError as error:
        log.warning("payment %s: could not cancel its unused session %s: %s", payment_pk, session_id, error)
    else:
        log.info("payment %s: cancelled its unused session %s", payment_pk, session_id)


class EventConflict(FloodgateError):
    """A known event id arrived with another body: the first is kept, this one refused."""

    code, status = "event_conflict", 409


def record_webhook(*, provider_name: str, event: ProviderEvent, payload: dict[str, object]) -> int | None:
    """Store a verified event once per (provider, event id); returns its row id if not yet processed.

    The first delivery is kept whole; the same id with another body raises EventConflict. A dispute
    of a payment the shop never made is not stored (nothing can make it the shop's later).
    """
    if event.type in DISPUTE_TYPES and not _payment_for(provider_name, asdict(event)).exists():
        log.warning(
            "webhook %s:%s: a dispute of an unknown payment; not recorded", provider_name, event.event_id
        )
        return None
    params: dict[str, Any] = {
        "provider": provider_name,
        "event": event.event_id,
        "type": event.type,
        "payload": Jsonb(payload),
        "facts": Jsonb(asdict(event)),
    }
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        cursor.execute(sql.RECORD_EVENT, params)
        row = cursor.fetchone()
        if row is not None and event.type == "payment.authorized":
            # The buyer paid in time: the hold must not run out while the event waits for a
            # worker (late, or down: the web processes then apply it, ops/duties.py). Only an
            # authorisation that will confirm: of an open attempt, for the price asked.
            payment = _payment_for(provider_name, asdict(event)).first()
            if (
                payment is not None
                and payment.state in {PaymentState.CREATED, PaymentState.PENDING}
                and (event.amount_minor, event.currency) == (payment.amount_minor, payment.currency)
            ):
                holds.pin_for_settlement_in(
                    cursor, hold_id=payment.order.hold_id, since=row[1], seconds=AUTHORISED_HOLD_SECONDS
                )
        if row is None:
            cursor.execute(sql.SAME_EVENT, params)
            same = cursor.fetchone()
            if same is not None and not same[0]:
                log.warning(
                    "webhook %s:%s came again with another body; kept the first",
                    provider_name,
                    event.event_id,
                )
                raise EventConflict(gettext_lazy("This event id was received before with different content."))
    return row[0] if row else None


def process_event(*, event_pk: int) -> str:
    """Apply one webhook event exactly once; safe to run twice, and for events out of order."""
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        event = WebhookEvent.objects.select_for_update().get(pk=event_pk)
        if event.processed_at is not None:
            outcome = "already_processed"
            payment = None
        else:
            payment = _payment_of(event)
            outcome = _apply(cursor, event, payment) if payment else "unknown_payment"
            if payment is not None:  # an unmatched event stays for the sweep to try again
                cursor.execute(sql.MARK_PROCESSED, {"event": event.pk, "outcome": outcome})
    # Only the run that decided enqueues the capture or void; a lost task is picked up by
    # the beat's settle_unsettled_payments.
    voiding = {"too_late_voiding", "amount_mismatch_voiding", "declined_then_authorised_voiding"}
    if (outcome == "confirmed" or outcome in voiding) and payment is not None:
        _enqueue("checkout.settle_payment", payment.pk)
    log.info("webhook %s (%s): %s", event.event_id, event.type, outcome)
    return outcome


def _payment_of(event: WebhookEvent) -> Payment | None:
    """The payment an event is about, locked."""
    return _payment_for(event.provider, _facts(event)).select_for_update(of=("self",)).first()


def _facts(event: WebhookEvent) -> dict[str, Any]:
    """What the adapter read from the event (an event stored before facts were kept: its body,
    which then had the same fields)."""
    facts: dict[str, Any] = event.facts or event.payload
    return facts


def _payment_for(provider: str, payload: dict[str, object]) -> QuerySet[Payment]:
    """The payment a webhook's body names: by our own reference, else the provider's session."""
    payments = Payment.objects.select_related("order").filter(provider=provider)
    reference = str(payload.get("reference") or "")
    if reference:
        with contextlib.suppress(ValueError, ValidationError):
            if payments.filter(reference=reference).exists():
                return payments.filter(reference=reference)
    return payments.filter(session_id=payload.get("session_id"))


def _apply(cursor: CursorWrapper, event: WebhookEvent, payment: Payment) -> str:
    if event.type in DISPUTE_TYPES:  # the bank's, long after the sale: recorded, the merchant told
        return disputes.apply_event_in(cursor, payment=payment, provider=event.provider, facts=_facts(event))
    order = payment.order
    if event.type == "payment.failed":
        if payment.state not in {PaymentState.CREATED, PaymentState.PENDING}:
            return f"ignored_failure_after_{payment.state}"
        # The attempt failed, not the hold: it runs on, so the buyer can try another card; its
        # units come back when it expires or is released (issue 12).
        _set(payment, PaymentState.FAILED)
        if order.state == OrderState.PENDING:  # a later attempt may have confirmed it meanwhile
            _finish(order, OrderState.FAILED, failures.declined(str(_facts(event).get("reason") or "")))
        return "declined"
    if event.type.startswith("refund."):
        return refunds.apply_event_in(cursor, payment=payment, facts=_facts(event))
    # payment.authorized
    if payment.state not in {PaymentState.CREATED, PaymentState.PENDING, PaymentState.FAILED}:
        return f"ignored_authorisation_after_{payment.state}"
    facts = _facts(event)
    if (facts.get("amount_minor"), facts.get("currency")) != (payment.amount_minor, payment.currency):
        log.error(
            "payment %s authorised for %s %s, not %s %s",
            payment.pk,
            facts.get("amount_minor"),
            facts.get("currency"),
            payment.amount_minor,
            payment.currency,
        )
        holds.release_in(cursor, hold_id=order.hold_id)
        _set(payment, PaymentState.VOID_PENDING)
        order.refunded = True
        _finish(order, OrderState.FAILED, failures.AMOUNT_MISMATCH)
        return "amount_mismatch_voiding"
    if payment.state == PaymentState.FAILED:
        # Declined, then authorised after all (events out of order): the decline stands and the
        # authorisation is voided; the order follows the buyer's other attempts, if any.
        _set(payment, PaymentState.VOID_PENDING)
        return "declined_then_authorised_voiding"
    if holds.confirm_in(cursor, hold_id=order.hold_id):
        _set(payment, PaymentState.CAPTURE_PENDING)
        _finish(order, OrderState.CONFIRMED, "")
        outbox.announce(order)
        # Last: its counter row is the hottest lock of a selling drop, held until this commits.
        invoices.issue_invoice_in(cursor, order=order, payment=payment)
        return "confirmed"
    _set(payment, PaymentState.VOID_PENDING)
    order.refunded = True
    _finish(order, OrderState.FAILED, failures.TOO_LATE)
    outbox.announce_late_void(order)
    return "too_late_voiding"


def _set(payment: Payment, state: str) -> None:
    payment.state = state
    Payment.objects.filter(pk=payment.pk).update(state=state, updated_at=Now())


def _finish(order: Order, state: str, reason: str) -> None:
    order.state, order.failure_reason = state, reason
    Order.objects.filter(pk=order.pk).update(
        state=state, failure_reason=reason, refunded=order.refunded, updated_at=Now()
    )


def settle_payment(*, payment_pk: int) -> str:
    """Capture a sold order's authorisation, or void a late one; idempotent at both ends.

    The payment row stays locked while the provider is asked, so a buyer's cancel
    (refunds.cancel_order) waits for the capture's answer instead of crossing it.
    """
    steps = {
        PaymentState.CAPTURE_PENDING: ("capture", PaymentState.CAPTURED, PaymentState.CAPTURE_FAILED),
        PaymentState.VOID_PENDING: ("void", PaymentState.VOIDED, PaymentState.VOID_FAILED),
    }
    failure: ProviderError | None = None
    with transaction.atomic(durable=True):
        payment = Payment.objects.select_for_update().get(pk=payment_pk)
        if payment.state not in steps:
            return f"nothing_to_do_{payment.state}"
        action, done, refused = steps[PaymentState(payment.state)]
        provider = get_provider(payment.provider)
        try:
            getattr(provider, action)(session_id=payment.session_id)
        except PermanentProviderError as error:
            # Retrying cannot help: stop, keep why, and tell on-call (the admin filters on this state).
            Payment.objects.filter(pk=payment.pk).update(
                state=refused, last_error=f"{action}: {error}"[:300], updated_at=Now()
            )
            log.error("payment %s: the provider refused the %s for good: %s", payment.pk, action, error)
            return refused
        except ProviderError as error:
            failure = error
            # Kept for on-call, and updated_at moves so the safety net sweeps the others first.
            Payment.objects.filter(pk=payment.pk).update(
                last_error=f"{action}: {error}"[:300], updated_at=Now()
            )
        else:
            Payment.objects.filter(pk=payment.pk).update(state=done, last_error="", updated_at=Now())
            if done == PaymentState.CAPTURED:
                _pay_out(payment)
    if failure is not None:
        log.error("payment %s: %s failed: %s", payment.pk, action, failure)
        raise failure
    return done


# Safety nets run by beat ------------------------------------------------------------------

# A net starts no new event, refund or payment after this many seconds (its task's limit is 30):
# a provider that does not answer costs one run its tail, and the next run carries on.
NET_SECONDS = 20.0


def sweep() -> dict[str, int]:
    """Beat's safety net (checkout.sweep): apply the events whose task was lost or failed, resend the
    refunds whose task was lost, and fail the orders nobody paid for.

    Applied here, not queued: right in the worker, and in a web process covering for a worker that
    is down. Safe beside another run: each event and payment row is locked while applied, and a
    resent refund carries its key (one refund at the provider).
    """
    deadline = time.monotonic() + NET_SECONDS
    applied = _each(selectors.stale_event_ids(), lambda pk: process_event(event_pk=pk), "event", deadline)
    resent = _each(
        selectors.unsent_refund_ids(), lambda pk: refunds.send_refund(refund_pk=pk), "refund", deadline
    )
    return {"events_applied": applied, "refunds_resent": resent, "orders_abandoned": fail_abandoned_orders()}


def settle_unsettled_payments() -> int:
    """Beat's safety net (checkout.settle_unsettled_payments): capture or void, here and in turn,
    what a lost task left pending, then pay the exchange's sellers whose buyers' captures were
    recorded without their pay-out. Safe beside another run (settle_payment locks the payment's
    row); returns the payments settled."""
    deadline = time.monotonic() + NET_SECONDS
    settled = _each(
        selectors.unsettled_payment_ids(), lambda pk: settle_payment(payment_pk=pk), "payment", deadline
    )
    exchange.pay_out_missed()
    return settled


def _each(ids: list[int], run: Callable[[int], object], what: str, deadline: float) -> int:
    """Run each id in turn until the deadline; returns how many went through. One id's trouble is
    logged and the rest still run: a poisoned event must not hold back those behind it."""
    done = 0
    for pk in ids:
        if time.monotonic() > deadline:
            break
        try:
            run(pk)
        except ProviderError:
            continue  # logged where it was raised; the next run tries again
        except Exception:
            log.exception("safety net: %s %s failed", what, pk)
            continue
        done += 1
    return done


def fail_abandoned_orders() -> int:
    """Fail pending orders whose hold ended without a payment decision (the buyer left).

    The payment stays open, so a late authorisation is still voided by process_event.
    """
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        cursor.execute(sql.FAIL_ABANDONED_ORDERS, {"reason": failures.ABANDONED})
        return int(cursor.rowcount)


def _enqueue(task: str, *args: object) -> None:
    """Send a task by its name: the tasks module builds on this one, not the other way round."""
    current_app.send_task(task, args=args)


SETTLED_BY_HAND = {
    PaymentState.CAPTURE_FAILED: PaymentState.CAPTURED,
    PaymentState.VOID_FAILED: PaymentState.VOIDED,
}


def _pay_out(payment: Payment) -> None:
    """A captured payment that bought a unit on the exchange pays its seller, in the capture's
    transaction; a pay-out that cannot be written leaves the capture recorded and tells on-call."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            exchange.pay_out_in(cursor, order=payment.order)
    except (DatabaseError, RuntimeError):
        log.exception("payment %s: captured, but its exchange seller could not be paid out", payment.pk)


def settled_by_hand(*, payment_ids: list[int]) -> list[Payment]:
    """Record that on-call captured or voided these refused payments at the provider themselves.

    Only capture_failed and void_failed move (locked, so a settle task cannot cross it); the
    rest are left as they are. Returns the payments that moved, in their new state.
    """
    moved: list[Payment] = []
    with transaction.atomic():
        for before, after in SETTLED_BY_HAND.items():
            rows = list(Payment.objects.select_for_update().filter(pk__in=payment_ids, state=before))
            Payment.objects.filter(pk__in=[p.pk for p in rows]).update(state=after, updated_at=Now())
            for payment in rows:
                payment.state = after
                if after == PaymentState.CAPTURED:
                    _pay_out(payment)
            moved += rows
    return moved
