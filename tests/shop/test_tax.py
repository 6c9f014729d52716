"""Tax: the line's net, tax and gross (shop.pricing), the footer's sentence, and where a rate is set."""

from __future__ import annotations

import io
from decimal import Decimal

import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError, transaction
from django.test import Client

from shop import pricing
from shop.models import Drop, Product
from tests.factories import make_drop, merchant

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_footer() -> None:
    pricing.forget_footer_note()


def product(price_minor: int, currency: str, rate: str) -> Product:
    return Product(sku="T", name="T", price_minor=price_minor, currency=currency, tax_rate=Decimal(rate))


def figures(price: pricing.Price) -> tuple[int, int, int]:
    return price.net_minor, price.tax_minor, price.gross_minor


@pytest.mark.parametrize(
    ("price_minor", "currency", "rate", "quantity", "included", "expected"),
    [
        # EUR 9.99 at 19%, tax inside: 999 * 19/119 = 159.50.. -> 1.60
        (999, "EUR", "19", 1, True, (839, 160, 999)),
        # three of them: 2997 * 19/119 = 478.51.. -> 4.79, once on the line
        (999, "EUR", "19", 3, True, (2518, 479, 2997)),
        # tax added: 9.99 * 19% = 1.8981 -> 1.90
        (999, "EUR", "19", 1, False, (999, 190, 1189)),
        # three: 29.97 * 19% = 5.6943 -> 5.69 (per unit it would have been 3 x 1.90 = 5.70)
        (999, "EUR", "19", 3, False, (2997, 569, 3566)),
        # JPY has no minor unit: 999 yen at 10% is 99.9 -> 100 yen; inside: 90.8.. -> 91 yen
        (999, "JPY", "10", 1, False, (999, 100, 1099)),
        (999, "JPY", "10", 1, True, (908, 91, 999)),
        # BHD has three decimals: 2.005 at 10% is 0.2005 -> 0.201, half-up (half-even would say 0.200)
        (2005, "BHD", "10", 1, False, (2005, 201, 2206)),
        # a rate with a fraction: 7.7% of 10.00 = 0.77
        (1000, "CHF", "7.7", 1, False, (1000, 77, 1077)),
        # untaxed: the price is net and gross alike, either setting
        (999, "EUR", "0", 3, True, (2997, 0, 2997)),
        (999, "EUR", "0", 3, False, (2997, 0, 2997)),
    ],
)
def test_a_line_is_rounded_half_up_once_in_the_currencys_minor_unit(
    price_minor: int, currency: str, rate: str, quantity: int, included: bool, expected: tuple[int, int, int]
) -> None:
    price = pricing.line(product(price_minor, currency, rate), quantity, prices_include_tax=included)

    assert figures(price) == expected
    assert (price.rate, price.currency) == (Decimal(rate), currency)


def test_the_shop_setting_decides_whether_the_price_is_net_or_gross(settings) -> None:
    tee = product(999, "EUR", "19")

    settings.PRICES_INCLUDE_TAX = True
    assert figures(pricing.line(tee, 1)) == (839, 160, 999)
    settings.PRICES_INCLUDE_TAX = False
    assert figures(pricing.line(tee, 1)) == (999, 190, 1189)


@pytest.mark.parametrize(
    ("rates", "included", "note"),
    [
        (["19.00", "19.00"], True, "Prices include 19% VAT."),
        (["7.70"], False, "Prices exclude 7.7% VAT; it is added at checkout."),
        (["19.00", "7.00"], True, "Prices include VAT."),
        (["19.00", "0.00"], False, "Prices exclude VAT; it is added at checkout."),
        (["0.00", "0.00"], True, ""),
        ([], True, ""),
    ],
)
def test_the_footer_says_what_is_true_for_the_rates(rates: list[str], included: bool, note: str) -> None:
    assert pricing.footer_note([Decimal(r) for r in rates], prices_include_tax=included) == note


def test_every_pages_footer_reads_this_shops_rates_and_tax_name(settings) -> None:
    settings.TAX_NAME = "GST"
    settings.PRICES_INCLUDE_TAX = False
    make_drop(slug="untaxed", price_minor=999)

    untaxed = Client().get("/").content.decode()
    assert "Prices include" not in untaxed and "Prices exclude" not in untaxed
    assert "Times are shown in UTC" in untaxed

    Product.objects.update(tax_rate=Decimal("15"))
    pricing.forget_footer_note()
    taxed = Client().get("/").content.decode()
    assert "Prices exclude 15% GST; it is added at checkout. Times are shown in UTC" in taxed


def test_the_database_refuses_a_rate_out_of_range() -> None:
    drop = make_drop(slug="range")
    for rate in (Decimal("-0.01"), Decimal("100")):
        with pytest.raises(IntegrityError), transaction.atomic():
            Product.objects.filter(pk=drop.product_id).update(tax_rate=rate)
    assert Product.objects.get(pk=drop.product_id).tax_rate == Decimal(0)


def product_form(**changes: str) -> dict[str, str]:
    return {"sku": "TAXED", "name": "Taxed", "description": "", "price": "9.99", "currency": "EUR", **changes}


def test_the_product_admin_keeps_a_rate(roles: None) -> None:
    answer = merchant().post("/admin/shop/product/add/", product_form(tax_rate="19"))

    assert answer.status_code == 302, answer.context["adminform"].form.errors if answer.context else answer
    assert Product.objects.get(sku="TAXED").tax_rate == Decimal("19.00")


@pytest.mark.parametrize(
    ("rate", "message"),
    [
        ("-1", "A tax rate is a percentage from 0 up to (not including) 100"),
        ("100", "A tax rate is a percentage from 0 up to (not including) 100"),
        ("250", "A tax rate is a percentage from 0 up to (not including) 100"),
        ("nineteen", "Enter a number."),
        ("19.123", "no more than 2 decimal places"),
    ],
)
def test_the_product_admin_refuses_a_bad_rate_beside_the_field(roles: None, rate: str, message: str) -> None:
    answer = merchant().post("/admin/shop/product/add/", product_form(tax_rate=rate))

    assert answer.status_code == 200
    errors = answer.context["adminform"].form.errors
    assert message in " ".join(errors["tax_rate"])
    assert not Product.objects.filter(sku="TAXED").exists()


def test_create_drop_takes_a_tax_rate() -> None:
    call_command(
        "create_drop", "--slug", "taxed", "--quantity", "5", "--tax-rate", "7.7", stdout=io.StringIO()
    )

    assert Drop.objects.get(slug="taxed").product.tax_rate == Decimal("7.70")


@pytest.mark.parametrize(
    ("rate", "message"),
    [
        ("-5", "A tax rate is a percentage from 0 up to (not including) 100"),
        ("100", "A tax rate is a percentage from 0 up to (not including) 100"),
        ("abc", "The tax rate must be a number of percent such as 19 or 7.7 (got 'abc')"),
        ("NaN", "The tax rate must be a number of percent such as 19 or 7.7 (got 'NaN')"),
    ],
)
def test_create_drop_refuses_a_bad_tax_rate_and_writes_nothing(rate: str, message: str) -> None:
    with pytest.raises(CommandError, match="drop not created") as refused:
        call_command("create_drop", "--slug", "bad-tax", "--quantity", "5", "--tax-rate", rate)

    assert message in str(refused.value)
    assert not Drop.objects.filter(slug="bad-tax").exists()
    assert not Product.objects.filter(sku="BAD-TAX").exists()


def test_a_product_added_without_a_rate_is_untaxed(roles: None) -> None:
    answer = merchant().post("/admin/shop/product/add/", product_form(tax_rate=""))

    assert answer.status_code == 302
    assert Product.objects.get(sku="TAXED").tax_rate == Decimal(0)
