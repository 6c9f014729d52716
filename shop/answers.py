"""The answers about a buyer's shipping address (built by shop.addresses), and what is asked."""

from __future__ import annotations

from pydantic import BaseModel, Field

from core.answers import Closed, Omittable


class ShippingAddress(Closed):
    id: int
    name: str
    line1: str
    line2: str
    postal_code: str
    city: str
    region: str
    country: str = Field(description="ISO 3166-1 alpha-2, e.g. DE")
    phone: str


# A request body is an open object (a field the view does not read is ignored), inlined in the operation.
class AddressBody(BaseModel):
    name: str = Field(max_length=100)
    line1: str = Field(max_length=100, description="Street and number")
    line2: Omittable[str] = Field(None, max_length=100)
    postal_code: str = Field(max_length=20)
    city: str = Field(max_length=60)
    region: Omittable[str] = Field(None, max_length=60)
    country: str = Field(pattern="^[A-Z]{2}$", description="ISO 3166-1 alpha-2, e.g. DE")
    phone: Omittable[str] = Field(None, max_length=30)
