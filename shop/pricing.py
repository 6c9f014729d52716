"""What a line costs: net, tax and gross in minor units, the one place tax is computed.

A product's `price_minor` is what the shop shows per unit; the shop's setting "prices include
tax" (shop.identity; PRICES_INCLUDE_TAX until the merchant sets it) says whether that is gross
(tax inside, as EU shops show buyers) or net (tax added at checkout). Either way the buyer is
charged the gross: an order's `amount_minor`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from django.conf import settings
from django.db import DatabaseError
from django.utils.translation import gettext as _

from shop import identity
from shop.models import Product, Variant

HUNDRED = Decimal(100)


@dataclass(frozen=True)
class Off:
    """What a discount code takes off a line: a percentage, or an amount in minor units."""

    percent: int | None = None
    amount_minor: int | None = None


@dataclass(frozen=True)
class Price:
    net_minor: int
    tax_minor: int
    rate: Decimal  # percent, e.g. Decimal("19.00")
    currency: str
    off_minor: int = 0  # taken off the line's shown price by a discount code, before tax

    @property
    def gross_minor(self) -> int:
        return self.net_minor + self.tax_minor

    @property
    def taxes(self) -> list[tuple[Decimal, int]]:
        """The tax by rate, as a Total gives it: [] when untaxed."""
        return [(self.rate, self.tax_minor)] if self.rate else []


@dataclass(frozen=True)
class Total:
    """What a buyer pays: the goods' line and, for a parcel whose zone is known, the shipping fee's
    own line (its own rate where the merchant set one). Shaped like a Price for the sums."""

    goods: Price
    shipping: Price | None = None  # None: nothing is shipped, or no address (no zone) yet

    @property
    def currency(self) -> str:
        return self.goods.currency

    @property
    def net_minor(self) -> int:
        return self.goods.net_minor + (self.shipping.net_minor if self.shipping else 0)

    @property
    def tax_minor(self) -> int:
        return self.goods.tax_minor + (self.shipping.tax_minor if self.shipping else 0)

    @property
    def gross_minor(self) -> int:
        return self.net_minor + self.tax_minor

    @property
    def rate(self) -> Decimal:
        return self.goods.rate

    @property
    def off_minor(self) -> int:
        return self.goods.off_minor

    @property
    def taxes(self) -> list[tuple[Decimal, int]]:
        """The tax per rate, the goods' rate first; rates of 0 left out (nothing to show)."""
        parts = [self.goods] + ([self.shipping] if self.shipping else [])
        by_rate: dict[Decimal, int] = {}
        for part in parts:
            if part.rate:
                by_rate[part.rate] = by_rate.get(part.rate, 0) + part.tax_minor
        return list(by_rate.items())


def _half_up(amount: Decimal) -> int:
    # Half-up, as tax authorities and receipts do (not Python's banker's rounding): 0.5 cent goes up.
    return int(amount.quantize(Decimal(1), rounding=ROUND_HALF_UP))


def line(
    product: Product,
    quantity: int,
    *,
    variant: Variant | None = None,
    prices_include_tax: bool | None = None,
    off: Off | None = None,
) -> Price:
    """`quantity` units of `product` (at `variant`'s own price where it has one). The tax is
    rounded once on the line's total, not per unit:
    3 x 9.99 at 19% is 5.69 of tax, not 3 x 1.90 = 5.70, so the line's figures add up exactly
    and a larger quantity never gathers rounding error. Amounts are already in the currency's
    minor unit (cents, yen, fils), so rounding to a whole minor unit is that currency's own
    precision: JPY rounds to a yen, BHD to a fils, EUR to a cent.

    A discount (`off`) comes off the shown line total first and the tax is computed on what is
    left, so the tax is the tax of the price paid."""
    included = identity.current().prices_include_tax if prices_include_tax is None else prices_include_tax
    rate = Decimal(product.tax_rate)
    shown = (variant.unit_price(product) if variant is not None else product.price_minor) * quantity
    taken = discount(shown, off) if off is not None else 0
    shown -= taken
    if included:
        tax = _half_up(shown * rate / (HUNDRED + rate))
        return Price(
            net_minor=shown - tax, tax_minor=tax, rate=rate, currency=product.currency, off_minor=taken
        )
    tax = _half_up(shown * rate / HUNDRED)
    return Price(net_minor=shown, tax_minor=tax, rate=rate, currency=product.currency, off_minor=taken)


def resale(product: Product, gross_minor: int) -> Price:
    """One unit resold at `gross_minor` (what its first buyer paid for it, or less: the face-value
    exchange): that is the price whatever the shop's tax setting, the product's rate inside it."""
    rate = Decimal(product.tax_rate)
    tax = _half_up(gross_minor * rate / (HUNDRED + rate))
    return Price(net_minor=gross_minor - tax, tax_minor=tax, rate=rate, currency=product.currency)


def fee(shown: int, *, rate: Decimal, currency: str, prices_include_tax: bool | None = None) -> Price:
    """A shipping fee of `shown` minor units, as the shop shows prices (gross where prices include
    tax, net where tax is added), taxed at `rate`: rounded once, as a line is."""
    included = identity.current().prices_include_tax if prices_include_tax is None else prices_include_tax
    if included:
        tax = _half_up(shown * rate / (HUNDRED + rate))
        return Price(net_minor=shown - tax, tax_minor=tax, rate=rate, currency=currency)
    return Price(net_minor=shown, tax_minor=_half_up(shown * rate / HUNDRED), rate=rate, currency=currency)


def discount(shown: int, off: Off) -> int:
    """What `off` takes from a line shown at `shown` minor units: a percentage rounded half-up, or
    the amount; never the whole line (one minor unit is left, since every order is a payment the
    provider takes, and a free one would need a path without one)."""
    if off.percent is not None:
        taken = _half_up(Decimal(shown) * off.percent / HUNDRED)
    else:
        taken = off.amount_minor or 0
    return max(0, min(taken, shown - 1))


def rate_text(rate: Decimal) -> str:
    """Decimal("19.00") -> "19%"; Decimal("7.70") -> "7.7%"."""
    text = f"{rate:f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"{text}%"


def footer_note(rates: Iterable[Decimal], *, prices_include_tax: bool | None = None) -> str:
    """What the footer may truthfully say about tax, given every product's rate: the rate when
    there is one, the tax's name only when there are several, nothing when no product is taxed."""
    included = identity.current().prices_include_tax if prices_include_tax is None else prices_include_tax
    distinct = set(rates)
    if not distinct - {Decimal(0)}:
        return ""
    name = settings.TAX_NAME
    named = f"{rate_text(next(iter(distinct)))} {name}" if len(distinct) == 1 else name
    if included:
        return _("Prices include %(tax)s.") % {"tax": named}
    return _("Prices exclude %(tax)s; it is added at checkout.") % {"tax": named}


# Every page's footer says it: one small query per process every half minute, not one per page
# under a crowd. A rate changed in the admin shows in the footer within that time.
FOOTER_SECONDS = 30.0
_footer: tuple[float, list[Decimal]] | None = None  # the rates; the words are the page's language


def shop_footer_note() -> str:
    global _footer
    now = time.monotonic()
    if _footer is None or now - _footer[0] > FOOTER_SECONDS:
        try:
            rates = list(Product.objects.values_list("tax_rate", flat=True).distinct())
        except DatabaseError:  # a 404 or 429 page still renders while the database is away
            return footer_note(_footer[1]) if _footer is not None else ""
        _footer = (now, rates)
    return footer_note(_footer[1])


def forget_footer_note() -> None:
    """The next footer reads the rates afresh (after a product's rate changed; tests)."""
    global _footer
    _footer = None
