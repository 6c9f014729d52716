"""The catalogue's answers: a drop as buyers see it (catalogue.selectors.DropView builds it)."""

from __future__ import annotations

from pydantic import Field, NonNegativeInt

from core.answers import Closed, Moment, Quantity
from shop.models import DropState


class VariantOnSale(Closed):
    name: str = Field(description='What to send as "variant"; "" for a drop of one unnamed variant')
    price_minor: NonNegativeInt
    remaining: NonNegativeInt
    sold_out: bool


class Drop(Closed):
    slug: str
    title: str
    state: DropState
    quantity: NonNegativeInt
    remaining: NonNegativeInt = Field(description="may be approximate")
    sold_out: bool
    starts_at: Moment
    ends_at: Moment
    waiting_room: bool
    presale_starts_at: Moment | None = Field(
        description="When the presale opens (a code or the list admits a buyer until starts_at); null: none"
    )
    price_minor: NonNegativeInt
    currency: str
    per_buyer_limit: Quantity
    variants: list[VariantOnSale] = Field(description="Its variants in order, each with its own stock")


class DropList(Closed):
    drops: list[Drop]


class Me(Closed):
    username: str
