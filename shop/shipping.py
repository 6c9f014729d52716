"""Where a product ships and what the parcel costs: the one home of the shipping fee.

The address's country picks the product's zone; the zone's fee (per order or per unit) is taxed
by shop.pricing at the zone's own rate, else the product's. So the gross is known once the address
is given, and fixed when payment starts (the order keeps it). A product that does not ship has no
fee and takes no address; one that ships without any zone goes everywhere for free.
"""

from __future__ import annotations

from decimal import Decimal

from django.utils.translation import gettext_lazy

from core import formatting
from core.errors import FloodgateError, fill
from shop import pricing
from shop.models import FeeBasis, Product, ShippingZone


class NotShippedThere(FloodgateError):
    code, status = "not_shipped_there", 400


def zones_of(product: Product) -> list[ShippingZone]:
    return list(ShippingZone.objects.filter(product=product).order_by("id"))


def zone_for(product: Product, country: str) -> ShippingZone | None:
    """The zone that sends `product` to `country` (the first by id if two name it); None when the
    product ships nowhere there, or has no zones (then it ships everywhere, free)."""
    return ShippingZone.objects.filter(product=product, countries__contains=[country]).order_by("id").first()


def check_ships_to(product: Product, country: str) -> None:
    """NotShippedThere, with the countries it does ship to, when `country` is in none of the zones."""
    zones = zones_of(product)
    if not zones or any(country in zone.countries for zone in zones):
        return
    # Country names in the language of the request being answered (the raise runs in it).
    codes = sorted({code for zone in zones for code in zone.countries})
    names = ", ".join(name for _code, name in formatting.by_name((c, formatting.country(c)) for c in codes))
    raise NotShippedThere(
        fill(
            gettext_lazy("Sorry, this product is not shipped to %(country)s. It ships to: %(countries)s."),
            country=formatting.country(country),
            countries=names,
        )
    )


def fee(product: Product, quantity: int, country: str) -> pricing.Price | None:
    """The fee to send `quantity` units of `product` to `country`, taxed; None when it is not shipped,
    has no zones, or not to that country."""
    if not product.ships:
        return None
    zone = zone_for(product, country)
    if zone is None:
        return None
    return zone_fee(zone, product, quantity)


def zone_fee(zone: ShippingZone, product: Product, quantity: int) -> pricing.Price:
    shown = zone.fee_minor * (quantity if zone.fee_basis == FeeBasis.UNIT else 1)
    rate = Decimal(zone.tax_rate) if zone.tax_rate is not None else Decimal(product.tax_rate)
    return pricing.fee(shown, rate=rate, currency=product.currency)


def lowest_fee(product: Product) -> int | None:
    """The smallest fee for one unit, as shown ("+ shipping from ..."); None when nothing is charged."""
    if not product.ships:
        return None
    fees = [zone.fee_minor for zone in zones_of(product)]
    return min(fees) if fees else None
