"""The face-value exchange, the buyer's and the money's side (the line's side: sale/exchange.py).

A buyer with a confirmed, captured order lists units back at the price they paid for one (or less,
never more); each goes to the next ticket in line as an offer. When the new buyer's payment is
captured, the seller is refunded the price less the merchant's fee (pay_out_in, in the capture's
transaction: once per listing, by its one-to-one refund), and gets a credit note; the new buyer gets
an invoice as any buyer. Listed units are not the seller's to refund or list again meanwhile.

Lock order: the seller's order row, then its payment, then listings and holds (sale.sql).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.db.models import F
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy

from checkout import refunds
from checkout.models import Order, OrderState, Payment, PaymentState, Refund
from core.errors import FloodgateError, InvalidInput, NotFound, fill
from holds import services as holds
from holds.models import Hold, Listing, ListingState
from sale import sql as exchange_sql

log = logging.getLogger(__name__)


class ExchangeClosed(FloodgateError):
    code, status = "exchange_closed", 409


class NotListable(FloodgateError):
    code, status = "not_listable", 409


@dataclass(frozen=True)
class Listed:
    order: Order
    listings: list[Listing]  # the order's listings, oldest first


def unit_price(order: Order) -> int:
    """What the seller paid for one unit: the goods (after any discount, without shipping) per unit."""
    return (order.amount_minor - order.shipping_minor) // order.quantity


def _whole(value: object, what: str, *, default: int | None = None) -> int:
    if value is None and default is not None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(fill(gettext_lazy("%(what)s must be a whole number."), what=what))
    return value


def list_units(*, order_id: int, buyer_id: int, quantity: object = 1, price_minor: object = None) -> Listed:
    """Put `quantity` units of the buyer's order on the drop's exchange at `price_minor` each (default
    and most: what they paid for one). Raises InvalidInput (bad numbers, above the price, the fee
    taking it all), NotFound (not theirs), NotListable (not paid and captured, refunded, every unit
    listed already), ExchangeClosed; nothing changes then."""
    units = _whole(quantity, "quantity")
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        order = (
            Order.objects.select_for_update(of=("self",))
            .select_related("drop__product", "hold")
            .filter(pk=order_id, buyer_id=buyer_id)
            .first()
        )
        if order is None:
            raise NotFound(gettext_lazy("There is no such order among yours."))
        paid = unit_price(order)
        price = _whole(price_minor, "price_minor", default=paid)
        _check(cursor, order, units=units, price=price, paid=paid)
        cursor.execute(
            exchange_sql.LIST_UNITS,
            {
                "drop": order.drop_id,
                "hold": order.hold_id,
                "buyer": buyer_id,
                "n": units,
                "most": order.quantity - order.refunded_quantity,
                "price": price,
                "fee": order.drop.exchange_fee_minor,
            },
        )
        made = cursor.fetchall()
        if len(made) != units:  # the checks above passed under the order's lock: the statement decides
            raise NotListable(
                gettext_lazy("These units cannot be put on the exchange now; reload the order.")
            )
        holds.offer_after_commit(order.drop_id)  # to the line now, not at beat's next tick
    log.info("order %s: %s units on the exchange at %s", order.pk, units, price)
    return Listed(order, listings_of(order))


def _check(cursor: CursorWrapper, order: Order, *, units: int, price: int, paid: int) -> None:
    """Why a listing is refused, in the buyer's words, before the statement that decides."""
    cursor.execute(exchange_sql.EXCHANGE_STATE, {"drop": order.drop_id})
    trading, closed = cursor.fetchone()
    if order.drop.exchange_closes_at is None:
        raise ExchangeClosed(gettext_lazy("This drop has no exchange."))
    if closed:
        raise ExchangeClosed(gettext_lazy("The exchange of this drop has closed."))
    if not trading:
        raise ExchangeClosed(
            gettext_lazy("The exchange opens when the sale is over (or sold out), unless it is paused.")
        )
    if order.state != OrderState.CONFIRMED:
        raise NotListable(gettext_lazy("Only a confirmed order's units can go on the exchange."))
    if order.drop.product.ships:  # a parcel is not handed down a line: it would be sent twice
        raise NotListable(gettext_lazy("Units sent by post cannot go on the exchange."))
    if order.disputes.exists():  # a chargeback and a resale would pay the buyer twice
        raise NotListable(gettext_lazy("This order's payment is disputed with your bank."))
    if not Payment.objects.filter(order=order, state=PaymentState.CAPTURED).exists():
        raise NotListable(gettext_lazy("The payment is still being taken; try again in a minute."))
    left = order.quantity - order.refunded_quantity - order.hold.listed
    if left <= 0:
        raise NotListable(gettext_lazy("Every unit of this order is refunded or on the exchange already."))
    if not 1 <= units <= left:
        raise InvalidInput(
            fill(gettext_lazy("quantity must be between 1 and %(left)s, the units you may list."), left=left)
        )
    if not 1 <= price <= paid:
        raise InvalidInput(
            fill(
                gettext_lazy("price_minor must be between 1 and %(paid)s, what you paid for one unit."),
                paid=paid,
            )
        )
    if order.drop.exchange_fee_minor >= price:
        raise InvalidInput(
            fill(
                gettext_lazy("The exchange's fee is %(fee)s per unit: ask more than that."),
                fee=order.drop.exchange_fee_minor,
            )
        )


def withdraw(*, order_id: int, buyer_id: int) -> Listed:
    """Take back the order's listed units nobody has been offered yet (offered ones stay with that
    buyer while they may pay). NotFound for another's order; NotListable when none is waiting."""
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        order = (
            Order.objects.select_for_update(of=("self",))
            .select_related("drop")
            .filter(pk=order_id, buyer_id=buyer_id)
            .first()
        )
        if order is None:
            raise NotFound(gettext_lazy("There is no such order among yours."))
        cursor.execute(exchange_sql.WITHDRAW, {"drop": order.drop_id, "hold": order.hold_id})
        if not cursor.fetchone()[0]:
            raise NotListable(gettext_lazy("None of this order's units is waiting on the exchange."))
    return Listed(order, listings_of(order))


@dataclass(frozen=True)
class Standing:
    """The order's place on the drop's exchange, as its page shows it."""

    trading: bool  # the exchange takes listings now
    closed: bool  # and never again
    listable: int  # units the buyer may list now
    price_minor: int  # what the next buyer pays for one, by default
    refund_minor: int  # what the seller gets back for one
    listings: list[Listing]

    @property
    def waiting(self) -> int:
        return sum(1 for x in self.listings if x.state == ListingState.LISTED)


def standing(order: Order) -> Standing | None:
    """None: the drop has no exchange, or the order was never confirmed."""
    if order.drop.exchange_closes_at is None or order.state not in {
        OrderState.CONFIRMED,
        OrderState.REFUNDED,
    }:
        return None
    with connection.cursor() as cursor:
        cursor.execute(exchange_sql.EXCHANGE_STATE, {"drop": order.drop_id})
        trading, closed = cursor.fetchone()
    captured = Payment.objects.filter(order=order, state=PaymentState.CAPTURED).exists()
    left = order.quantity - order.refunded_quantity - Hold.objects.get(pk=order.hold_id).listed
    price = unit_price(order)
    return Standing(
        trading=trading,
        closed=closed,
        listable=left if trading and captured and order.state == OrderState.CONFIRMED else 0,
        price_minor=price,
        refund_minor=max(0, price - order.drop.exchange_fee_minor),
        listings=listings_of(order),
    )


def listings_of(order: Order) -> list[Listing]:
    return list(Listing.objects.filter(drop_id=order.drop_id, seller_hold_id=order.hold_id).order_by("id"))


def pay_out_missed(*, limit: int = 100) -> int:
    """Beat's safety net: sellers of units whose new buyers' payments were captured but whose pay-out
    was not written (it lost a deadlock, or the capture was recorded by hand). Each in its own
    transaction; returns the pay-outs written."""
    paid = 0
    orders = Order.objects.filter(
        hold__listing__state=ListingState.SOLD, payments__state=PaymentState.CAPTURED
    ).distinct()[:limit]
    for order in orders:
        with transaction.atomic(durable=True), connection.cursor() as cursor:
            if pay_out_in(cursor, order=order) is not None:
                paid += 1
    if paid:
        log.warning("exchange: %s sellers paid out by the safety net", paid)
    return paid


def pay_out_in(cursor: CursorWrapper, *, order: Order) -> Refund | None:
    """The order's payment was just captured: if it bought a listed unit, pay its seller (in the
    capture's transaction, so a capture recorded is a seller paid). None: not an exchange sale, or
    paid out already. The refund is sent after commit (a lost task: the beat sweep resends)."""
    listing = Listing.objects.filter(hold_id=order.hold_id, state=ListingState.SOLD).values_list(
        "seller_hold_id", flat=True
    )
    seller_hold = listing.first()
    if seller_hold is None:
        return None
    seller = Order.objects.select_for_update(of=("self",)).filter(hold_id=seller_hold).first()
    payment = Payment.objects.select_for_update().filter(order=seller, state=PaymentState.CAPTURED).first()
    if seller is None or payment is None:  # the seller's order listed only once captured: cannot happen
        raise RuntimeError(f"order {order.pk}: the seller of its listed unit has no captured payment")
    cursor.execute(exchange_sql.PAY_OUT, {"drop": order.drop_id, "hold": order.hold_id})
    row = cursor.fetchone()
    if row is None:
        return None
    listing_id, _, price, fee = row
    refund = Refund.objects.create(
        order=seller,
        payment=payment,
        quantity=1,
        amount_minor=price - fee,
        currency=seller.currency,
        restock=False,
        reason="face-value exchange",
        request_key=f"exchange:{listing_id}",
        listing_id=listing_id,
    )
    Order.objects.filter(pk=seller.pk).update(
        refunded_quantity=F("refunded_quantity") + 1,
        refunded_minor=F("refunded_minor") + refund.amount_minor,
        updated_at=Now(),
    )
    refunds.enqueue(refund)
    log.info("listing %s resold: seller's order %s refunded %s", listing_id, seller.pk, refund.amount_minor)
    return refund
