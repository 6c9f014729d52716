"""The holds layer's answers: a hold (holds.selectors.hold_json) and a drop's invariant (holds.counts)."""

from __future__ import annotations

from pydantic import BaseModel, Field, NonNegativeInt

from core.answers import Closed, Moment, Omittable, Quantity, Slug
from holds.models import HoldState


class HoldOrder(Closed):
    id: int
    # checkout's OrderState: holds sits below checkout and cannot name it; config/api.py puts
    # the enum into the published schema.
    state: str


class HoldDiscount(Closed):
    code: str
    off_minor: NonNegativeInt = Field(
        description="Taken off the line's price as the shop shows it (before tax where tax is added)"
    )
    gross_minor: NonNegativeInt = Field(
        description="The line's gross after the discount: what payment charges"
    )
    currency: str


class HoldShipping(Closed):
    fee_minor: NonNegativeInt = Field(
        description="The shipping fee of the address's zone, gross (per order or per unit, counted)"
    )
    tax_minor: NonNegativeInt = Field(description="The tax in fee_minor")
    tax_rate: str = Field(pattern=r"^\d{1,2}\.\d{2}$", description="The fee's tax rate, e.g. 19.00")
    gross_minor: NonNegativeInt = Field(description="The whole gross with the fee: what payment charges")
    currency: str


class Hold(Closed):
    id: int
    drop: Slug
    state: HoldState
    quantity: Quantity
    expires_at: Moment
    extended: bool = Field(description="Paying extends a hold once")
    units: list[str] = Field(description="Unit labels (seats); empty for identical units")
    variant: str = Field(description='The variant held; "" for a drop of one unnamed variant')
    order: HoldOrder | None = Field(description="The order once payment has started")
    shipping: Omittable[HoldShipping | None] = Field(
        None,
        description="A product that ships: the fee once the address is given (its country picks the "
        "zone), null before it and for a product without zones (free); absent for a product not shipped",
    )
    discount: Omittable[HoldDiscount] = Field(
        None, description="The discount code this hold spent, and the price after it; absent without one"
    )


class VariantInvariant(Closed):
    name: str
    quantity: NonNegativeInt
    available: NonNegativeInt
    held: NonNegativeInt
    sold: NonNegativeInt
    refunded: NonNegativeInt
    exchange: NonNegativeInt = Field(description="Units on the face-value exchange, not yet resold")
    drift: int


class Invariant(Closed):
    quantity: NonNegativeInt
    available: NonNegativeInt
    held: NonNegativeInt
    sold: NonNegativeInt
    refunded: NonNegativeInt = Field(description="Refunded units kept off sale (put back: available)")
    exchange: NonNegativeInt = Field(description="Units on the face-value exchange, not yet resold")
    expired_unreclaimed: NonNegativeInt
    expired_holds: NonNegativeInt
    drift: int = Field(description="quantity - (available + held + sold + refunded + exchange); 0")
    variants: Omittable[list[VariantInvariant]] = Field(
        None, description="GET /api/ops/drops/<slug>/invariant: the same per variant, in order"
    )


# A request body is an open object (a field the view does not read is ignored), inlined in the operation.
class VariantBody(BaseModel):
    variant: str = Field(description="The name of the variant (size) the hold should be of instead")


class ReserveBody(BaseModel):
    quantity: Quantity
    unit: Omittable[str] = None
    variant: Omittable[str] = Field(
        None, description="The variant's name; required where the drop has several"
    )
    presale_code: Omittable[str] = Field(
        None,
        pattern=r"^[A-Za-z0-9]{1,32}$",
        description="A presale code (any case): spent in the drop's presale window, unused outside it",
    )
    discount_code: Omittable[str] = Field(
        None,
        pattern=r"^[A-Za-z0-9]{1,32}$",
        description="A discount code (any case): one use spent on the new hold; refused, nothing is held",
    )
