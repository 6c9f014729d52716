"""A buyer gives the shipping address of a hold whose product ships: the page and the API door."""

from __future__ import annotations

from django.db import transaction
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy

from core.errors import FloodgateError, HoldNotActive
from holds import selectors
from holds.models import Hold, HoldState
from shop import shipping
from shop.addresses import FIELDS, AddressForm, errors_of
from shop.models import Address


class InvalidAddress(FloodgateError):
    code, status = "invalid_address", 400


CHANGES_PRICE = gettext_lazy(
    "Payment has started at the price for the address given then; an address with another "
    "shipping fee cannot replace it now."
)


class AddressChangesPrice(FloodgateError):
    code, status = "address_changes_price", 409


class NoShipping(FloodgateError):
    code, status = "no_shipping", 409


def last_address(*, buyer_id: int) -> Address | None:
    """The account's latest address: what its next hold page suggests."""
    return Address.objects.filter(user_id=buyer_id).order_by("-id").first()


def give_address(*, hold_id: object, buyer_id: int, data: object) -> Address:
    """Validate and keep the address for the buyer's live hold (and as the account's latest).

    NotFound for another buyer's hold, NoShipping when its product ships nothing, InvalidAddress
    (field by field) for bad input, NotShippedThere for a country outside the product's shipping
    zones, HoldNotActive once the hold has ended: none writes anything. Once payment has started
    the order keeps the fee of the address it started with (a later address changes no price)."""
    hold = selectors.hold_of_buyer(hold_id=hold_id, buyer_id=buyer_id)
    if not hold.drop.product.ships:
        raise NoShipping(gettext_lazy("This product is not shipped: it needs no address."))
    if not isinstance(data, dict):
        raise InvalidAddress(gettext_lazy("Send the address as an object."), fields={})
    # JSON may carry numbers, nulls or lists; a form would read them as text. Only text is an answer.
    not_text = {key: "Give this as text." for key in FIELDS if key in data and not isinstance(data[key], str)}
    form = AddressForm({key: value for key, value in data.items() if key not in not_text})
    if not_text or not form.is_valid():
        fields = {**errors_of(form), **not_text}
        raise InvalidAddress(
            gettext_lazy("The address is not complete or not valid; see fields."), fields=fields
        )
    # Outside the product's zones: refused before anything is written (the zone fixes the fee).
    country = form.cleaned_data["country"]
    shipping.check_ships_to(hold.drop.product, country)
    order = getattr(hold, "order", None)  # once payment started, its amount is fixed
    if order is not None:
        fee = shipping.fee(hold.drop.product, hold.quantity, country)
        if (fee.gross_minor if fee is not None else 0) != order.shipping_minor:
            raise AddressChangesPrice(CHANGES_PRICE)
    with transaction.atomic(durable=True):
        address = Address.objects.create(user_id=buyer_id, **form.cleaned_data)
        # One conditional UPDATE on the hold's state, as every change of a hold: zero rows, it ended.
        # Checked without an order: a payment started meanwhile (it extends the hold) fixed the
        # price without this address, so the address must not slip in under it.
        live = Hold.objects.filter(pk=hold.pk, buyer_id=buyer_id, state=HoldState.HELD, expires_at__gt=Now())
        kept = (live if order is not None else live.filter(extended=False)).update(shipping_address=address)
        if not kept:
            if order is None and live.filter(extended=True).exists():
                raise AddressChangesPrice(CHANGES_PRICE)
            raise HoldNotActive(
                gettext_lazy("This hold has ended: it expired or was released. Reserve again to buy.")
            )
    return address
