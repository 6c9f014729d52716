"""Hold reads for buyers."""

from __future__ import annotations

from django.utils import timezone
from django.utils.translation import gettext_lazy

from core.errors import NotFound
from holds import answers
from holds.models import Hold
from holds.services import effective_state
from shop import pricing, shipping


def hold_of_buyer(*, hold_id: object, buyer_id: int) -> Hold:
    """The buyer's own hold; another buyer's hold is indistinguishable from none."""
    try:
        pk = int(str(hold_id))
    except ValueError:
        raise NotFound(gettext_lazy("There is no such hold.")) from None
    hold = (
        Hold.objects.select_related("drop__product", "variant", "discount_code", "shipping_address")
        .filter(pk=pk, buyer_id=buyer_id)
        .first()
    )
    if hold is None:
        raise NotFound(gettext_lazy("There is no such hold among yours."))
    return hold


def hold_answer(hold: Hold, *, units: tuple[str, ...] | None = None, new: bool = False) -> answers.Hold:
    """The API's view of a hold; a hold just made passes its labels and has no order yet."""
    if units is None:
        units = () if hold.bucket_index is not None else tuple(hold.units.values_list("label", flat=True))
    extra: dict[str, object] = {} if hold.discount_code_id is None else {"discount": _discount_of(hold)}
    # A hold just made has no address yet, and its drop may come without its product (the claim's
    # hot path reads no product row): the reserve's answer leaves shipping out.
    if not new and hold.drop.product.ships:
        extra["shipping"] = _shipping_of(hold)
    return answers.Hold(
        id=hold.pk,
        drop=hold.drop.slug,
        state=effective_state(hold),
        quantity=hold.quantity,
        expires_at=hold.expires_at,
        extended=hold.extended,
        units=sorted(units),
        variant=hold.variant.name if hold.variant is not None else "",
        order=None if new else _order_of(hold),
        **extra,
    )


def hold_price(hold: Hold) -> pricing.Price:
    """The hold's line as it would be charged now: its discount code's terms taken off, if any."""
    if hold.exchange_price_minor is not None:  # an offer of a unit on the exchange: its listing's price
        return pricing.resale(hold.drop.product, hold.exchange_price_minor)
    code = hold.discount_code if hold.discount_code_id is not None else None
    off = code.terms if code is not None else None
    return pricing.line(hold.drop.product, hold.quantity, variant=hold.variant, off=off)


def hold_total(hold: Hold) -> pricing.Total:
    """What paying the hold would charge now: its line, and the shipping fee of its address's zone
    once an address is given (none before, and none for a product that is not shipped)."""
    address = hold.shipping_address if hold.shipping_address_id is not None else None
    product = hold.drop.product
    fee = shipping.fee(product, hold.quantity, address.country) if address is not None else None
    return pricing.Total(goods=hold_price(hold), shipping=fee)


def _shipping_of(hold: Hold) -> answers.HoldShipping | None:
    total = hold_total(hold)
    if total.shipping is None:
        return None
    return answers.HoldShipping(
        fee_minor=total.shipping.gross_minor,
        tax_minor=total.shipping.tax_minor,
        tax_rate=f"{total.shipping.rate:.2f}",
        gross_minor=total.gross_minor,
        currency=total.currency,
    )


def _discount_of(hold: Hold) -> answers.HoldDiscount:
    assert hold.discount_code is not None
    price = hold_price(hold)
    return answers.HoldDiscount(
        code=hold.discount_code.code,
        off_minor=price.off_minor,
        gross_minor=price.gross_minor,
        currency=price.currency,
    )


def hold_json(hold: Hold, *, units: tuple[str, ...] | None = None, new: bool = False) -> dict[str, object]:
    return hold_answer(hold, units=units, new=new).dump()


def _order_of(hold: Hold) -> answers.HoldOrder | None:
    order = getattr(hold, "order", None)  # reverse one-to-one: absent until payment starts
    return answers.HoldOrder(id=order.pk, state=order.state) if order is not None else None


def active_hold(*, drop_id: int, buyer_id: int) -> Hold | None:
    """The buyer's hold of this drop that is still running (at most one: a partial unique index)."""
    return (
        Hold.objects.select_related("drop__product", "variant")
        .filter(drop_id=drop_id, buyer_id=buyer_id, state="held", expires_at__gt=timezone.now())
        .first()
    )


def hold_units(hold: Hold) -> list[str]:
    """The labels of a hold's units, in order ([] for a hold from buckets)."""
    if hold.bucket_index is not None:
        return []
    return sorted(hold.units.values_list("label", flat=True))
