"""The checkout's answers: orders, refunds and a started payment (checkout.selectors builds them)."""

from __future__ import annotations

from pydantic import BaseModel, Field, NonNegativeInt, PositiveInt

from checkout.models import OrderState, PaymentState, RefundState
from core.answers import Closed, Moment, Omittable, Quantity, Slug


class Shipment(Closed):
    carrier: str = Field(description="dhl, dpd, gls, hermes, ups, fedex, usps, royal_mail or other")
    carrier_name: str = Field(description="The carrier as the buyer reads it")
    tracking_number: str
    tracking_url: str = Field(description='The carrier\'s public tracking page; "" when it has none')
    shipped_at: Moment


class OrderDiscount(Closed):
    code: str
    off_minor: NonNegativeInt = Field(
        description="Taken off the goods' line as shown, before tax where tax is added"
    )


class Order(Closed):
    id: int
    hold: int
    drop: Slug
    state: OrderState
    quantity: Quantity
    variant: str = Field(description='The variant bought; "" for a drop of one unnamed variant')
    amount_minor: NonNegativeInt = Field(description="The gross, tax included: what is charged")
    net_minor: NonNegativeInt = Field(description="amount_minor without the tax")
    tax_minor: NonNegativeInt = Field(description="The tax in amount_minor, rounded half-up on the order")
    tax_rate: str = Field(
        pattern=r"^\d{1,2}\.\d{2}$", description="The tax rate in percent when payment started, e.g. 19.00"
    )
    currency: str
    failure_reason: str = Field(description="Empty unless failed; why, in the request's language")
    refunded: bool = Field(description="An authorisation that came too late was voided")
    refunded_quantity: NonNegativeInt = Field(description="Units refunded (or being refunded)")
    refunded_minor: NonNegativeInt = Field(description="Money refunded (or being refunded), minor units")
    created_at: Moment
    cancellable: bool = Field(
        default=False, description="The buyer may still cancel: nothing has been charged yet"
    )
    failure_code: str = Field(
        default="",
        description="Empty unless failed; why, for programs: too_late, amount_mismatch, abandoned, "
        'declined or declined:<reason> (e.g. declined:expired_card); "" for orders failed before codes',
    )
    shipment: Shipment | None = Field(default=None, description="null until the merchant ships the order")
    shipping_minor: NonNegativeInt = Field(
        default=0, description="The shipping fee inside amount_minor, gross; 0 when none was charged"
    )
    shipping_tax_minor: NonNegativeInt = Field(default=0, description="The fee's tax, inside tax_minor")
    shipping_tax_rate: str = Field(
        default="0.00", pattern=r"^\d{1,2}\.\d{2}$", description="The fee's tax rate in percent, e.g. 19.00"
    )
    discount: OrderDiscount | None = Field(
        default=None, description="The discount code the hold spent and what it took off; null without one"
    )


class Refund(Closed):
    id: int
    order: int
    state: RefundState = Field(description="requested: the provider has not answered yet (retried)")
    quantity: Quantity
    amount_minor: PositiveInt
    currency: str
    restock: bool = Field(description="The units went back on sale")
    reason: str
    created_at: Moment


class OrderList(Closed):
    orders: list[Order]


class PaymentStarted(Closed):
    payment: int
    state: PaymentState
    redirect_url: str = Field(description="Send the buyer here to pay")
    order: Order


class DropReminder(Closed):
    drop: Slug
    reminded: bool = Field(description="An e-mail goes (or went) to you when the drop opens")
    sent_at: Moment | None = Field(description="When the reminder was written to the outbox; null until then")
    starts_at: Moment
    sends_at: Moment = Field(
        description="When the e-mail goes: the start, or for a waiting room its opening (an hour before)"
    )
    calendar: str = Field(description="The drop's start as an iCalendar file (text/calendar), for anyone")


class PushSubscribed(Closed):
    subscribed: bool = Field(
        description="This browser gets a push when your turn comes, a unit comes back for you, a raffle "
        "you entered is drawn and a drop you asked to be reminded of opens"
    )


# A push subscription as the browser's PushSubscription.toJSON() gives it.
class PushKeys(BaseModel):
    p256dh: str = Field(description="The browser's P-256 public key, base64url (65 bytes)")
    auth: str = Field(description="The browser's authentication secret, base64url (16 bytes)")


class PushSubscriptionBody(BaseModel):
    endpoint: str = Field(max_length=1000, description="The browser's push service address (https)")
    keys: PushKeys | None = Field(None, description="Required to subscribe; DELETE needs the endpoint only")


# A request body is an open object (a field the view does not read is ignored), inlined in the operation.
class RefundBody(BaseModel):
    quantity: Omittable[Quantity] = Field(None, description="Default: every unit not refunded yet")
    amount_minor: Omittable[PositiveInt] = Field(None, description="Default: those units' share of the price")
    restock: bool = Field(False, description="Put the units back on sale")
    reason: str = Field("", max_length=300, description="Shown to the buyer")


class ExchangeBody(BaseModel):
    quantity: Omittable[Quantity] = Field(None, description="Units to put on the exchange; default 1")
    price_minor: Omittable[PositiveInt] = Field(
        None, description="The price of each, at most (and by default) what you paid for one unit"
    )


class ExchangeListing(Closed):
    id: int
    state: str = Field(
        description="listed (waiting for the next ticket), offered (held for it), sold (its payment "
        "being taken), paid (you were refunded), withdrawn, or kept (the exchange closed)"
    )
    price_minor: PositiveInt = Field(description="What the next buyer pays for the unit")
    fee_minor: NonNegativeInt = Field(description="The shop's fee, kept from your refund")
    refund_minor: PositiveInt = Field(description="What you get back once the unit is resold")


class OrderExchange(Closed):
    order: int
    drop: Slug
    closes_at: Moment | None = Field(description="When the drop's exchange closes; null: it has none")
    listings: list[ExchangeListing] = Field(description="This order's units on the exchange, oldest first")
