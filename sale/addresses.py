"""A buyer gives the shipping address of a hold whose product ships: the page and the API door."""

from __future__ import annotations

from django.db import transaction
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy

from core.errors import FloodgateError, HoldNotActive
from holds import selectors
from holds.models import Hold, HoldState
from shop.addresses import FIELDS, AddressForm, errors_of
from shop.models import Address


class InvalidAddress(FloodgateError):
    code, status = "invalid_address", 400


class NoShipping(FloodgateError):
    code, status = "no_shipping", 409


def last_address(*, buyer_id: int) -> Address | None:
    """The account's latest address: what its next hold page suggests."""
    return Address.objects.filter(user_id=buyer_id).order_by("-id").first()


def give_address(*, hold_id: object, buyer_id: int, data: object) -> Address:
    """Validate and keep the address for the buyer's live hold (and as the account's latest).

    NotFound for another buyer's hold, NoShipping when its product ships nothing, InvalidAddress
    (field by field) for bad input, HoldNotActive once the hold has ended: none writes anything."""
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
    with transaction.atomic(durable=True):
        address = Address.objects.create(user_id=buyer_id, **form.cleaned_data)
        # One conditional UPDATE on the hold's state, as every change of a hold: zero rows, it ended.
        kept = Hold.objects.filter(
            pk=hold.pk, buyer_id=buyer_id, state=HoldState.HELD, expires_at__gt=Now()
        ).update(shipping_address=address)
        if not kept:
            raise HoldNotActive(
                gettext_lazy("This hold has ended: it expired or was released. Reserve again to buy.")
            )
    return address
