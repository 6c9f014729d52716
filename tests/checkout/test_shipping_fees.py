"""Shipping zones and fees: the address's country picks the zone, the zone's fee (per order or per
unit, taxed like the product or at its own rate) is charged at the provider and shown on every
surface; a country outside the zones is refused with nothing changed, in the buyer's language."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from decimal import Decimal

import httpx
import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.core.management import call_command
from django.test import Client
from django.utils import translation
from pypdf import PdfReader

from checkout import fulfilment, invoices, outbox, refunds
from checkout import services as checkout
from checkout.models import Invoice, Order
from checkout.providers.base import WebhookEvent as ProviderEvent
from config.celery import app as celery_app
from holds import services as holds
from holds.models import Hold
from shop import shipping
from shop.models import Address, Drop, FeeBasis, Product, ShippingZone
from tests.conftest import PROVIDER_SECRET, WEBHOOK_SECRET
from tests.factories import make_buyer, make_drop, merchant

pytestmark = pytest.mark.django_db(transaction=True)

HOME = {"name": "Ada Lovelace", "line1": "Hauptstraße 5", "postal_code": "10115", "city": "Berlin"}


@pytest.fixture
def provider(settings, payment_provider: str) -> Iterator[str]:
    settings.PAYMENT_PROVIDER_URL = payment_provider
    settings.PAYMENT_PROVIDER_SECRET = PROVIDER_SECRET
    settings.PAYMENT_WEBHOOK_SECRET = WEBHOOK_SECRET
    yield payment_provider
    celery_app.control.purge()  # process_event enqueues settle and relay tasks; nobody consumes them


def zoned(slug: str, *, basis: str = FeeBasis.ORDER, fee_rate: Decimal | None = None) -> Drop:
    """9.99 a unit at 19%; Germany 4.90, the EU's others 9.90 (at `fee_rate`, else 19%)."""
    drop = make_drop(
        slug=slug, quantity=6, price_minor=999, tax_rate=Decimal("19"), per_buyer_limit=3, ships=True
    )
    ShippingZone.objects.create(product=drop.product, name="Germany", countries=["DE"], fee_minor=490)
    ShippingZone.objects.create(
        product=drop.product,
        name="EU",
        countries=["AT", "FR", "NL"],
        fee_minor=990,
        fee_basis=basis,
        tax_rate=fee_rate,
    )
    return drop


def held(drop: Drop, quantity: int = 2) -> tuple[User, Hold, Client]:
    buyer = make_buyer()
    buyer.email = f"{drop.slug}@example.test"
    buyer.save()
    hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=quantity, idempotency_key="k").hold
    client = Client()
    client.force_login(buyer)
    return buyer, hold, client


def put(client: Client, hold_id: int, body: object) -> tuple[int, dict]:
    answer = client.put(f"/api/holds/{hold_id}/address", json.dumps(body), content_type="application/json")
    return answer.status_code, answer.json()


def charged_at_provider(provider: str, session_id: str) -> int:
    session = httpx.get(
        f"{provider}/api/sessions/{session_id}", headers={"Authorization": f"Bearer {PROVIDER_SECRET}"}
    )
    return int(session.json()["amount_minor"])


def confirm(order: Order) -> None:
    """The provider's authorisation for the order's open payment, applied as the worker would."""
    payment = order.payments.get()
    event = ProviderEvent(
        event_id=f"evt_{payment.session_id}",
        type="payment.authorized",
        session_id=str(payment.session_id),
        reference=str(payment.reference),
        amount_minor=payment.amount_minor,
        currency=payment.currency,
    )
    event_pk = checkout.record_webhook(
        provider_name=payment.provider, event=event, payload={"id": event.event_id}
    )
    assert event_pk is not None
    assert checkout.process_event(event_pk=event_pk) == "confirmed"


def pdf_text(invoice: Invoice) -> str:
    return "\n".join(page.extract_text() for page in PdfReader(io.BytesIO(invoices.pdf(invoice))).pages)


# The fee's arithmetic ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("included", "basis", "fee", "tax"),
    [
        (True, FeeBasis.ORDER, 990, 158),  # 9.90 gross, 19% inside: 1.58
        (True, FeeBasis.UNIT, 2970, 474),  # 3 x 9.90 = 29.70, tax rounded once: 4.74
        (False, FeeBasis.ORDER, 1178, 188),  # 9.90 net + 19% = 1.88
        (False, FeeBasis.UNIT, 3534, 564),  # 29.70 net + 5.643 -> 5.64
    ],
)
def test_a_fee_is_per_order_or_per_unit_and_taxed_like_the_product(
    settings, included: bool, basis: str, fee: int, tax: int
) -> None:
    settings.PRICES_INCLUDE_TAX = included
    drop = zoned(f"arith-{int(included)}-{basis}", basis=basis)

    price = shipping.fee(drop.product, 3, "FR")

    assert price is not None
    assert (price.gross_minor, price.tax_minor, price.rate) == (fee, tax, Decimal("19"))
    assert shipping.fee(drop.product, 3, "DE").gross_minor in {490, 583}  # type: ignore[union-attr]
    assert shipping.fee(drop.product, 3, "US") is None  # not shipped there: no fee, refused earlier


def test_the_fees_own_rate_wins_over_the_products(settings) -> None:
    settings.PRICES_INCLUDE_TAX = True
    drop = zoned("own-rate", fee_rate=Decimal("7"))

    price = shipping.fee(drop.product, 2, "AT")

    assert price is not None and (price.gross_minor, price.tax_minor, price.rate) == (990, 65, Decimal("7"))


# Refused outside the zones ------------------------------------------------------------------------


def test_a_country_outside_the_zones_is_refused_in_the_page_and_the_api_and_nothing_changes() -> None:
    _, hold, client = held(zoned("outside"))
    addresses_before = Address.objects.count()

    status, body = put(client, hold.pk, {**HOME, "country": "US"})
    page = client.post(f"/holds/{hold.pk}/address", {**HOME, "country": "US"}, follow=True)

    assert (status, body["error"]) == (400, "not_shipped_there")
    assert (
        "not shipped to United States" in body["detail"]
        and "Austria, France, Germany, Netherlands" in body["detail"]
    )
    assert "not shipped to United States" in page.content.decode()
    hold.refresh_from_db()
    assert hold.shipping_address_id is None and Address.objects.count() == addresses_before
    assert "shipping" in client.get(f"/api/holds/{hold.pk}").json()  # a product that ships: null fee yet
    assert client.get(f"/api/holds/{hold.pk}").json()["shipping"] is None


@pytest.mark.parametrize(
    "body",
    [
        {**HOME, "country": "XX"},  # no such country
        {**HOME, "country": "de"},  # not the code's case
        {**HOME, "country": 49},  # not text
        {**HOME, "country": ["DE"]},
        "DE",  # not an object
        {**HOME, "country": "D\x00"},
    ],
)
def test_garbage_countries_are_refused_and_nothing_changes(body: object) -> None:
    _, hold, client = held(zoned("garbage"), quantity=1)
    before = Address.objects.count()

    status, answer = put(client, hold.pk, body)

    # a field refused by name; a body that is no object refused as a body
    assert (status, answer["error"]) in {(400, "invalid_address"), (422, "invalid")}, answer
    hold.refresh_from_db()
    assert hold.shipping_address_id is None and Address.objects.count() == before


def test_a_german_buyer_is_refused_in_german() -> None:
    _, hold, client = held(zoned("auf-deutsch"), quantity=1)

    api = client.put(
        f"/api/holds/{hold.pk}/address",
        json.dumps({**HOME, "country": "US"}),
        content_type="application/json",
        headers={"Accept-Language": "de"},
    )
    page = client.post(
        f"/holds/{hold.pk}/address", {**HOME, "country": "CH"}, follow=True, headers={"Accept-Language": "de"}
    )

    assert api.status_code == 400
    assert "nicht nach Vereinigte Staaten versandt" in api.json()["detail"], api.json()
    assert "Deutschland, Frankreich, Niederlande, Österreich" in api.json()["detail"]
    assert "nicht nach Schweiz versandt" in page.content.decode()


def test_a_product_without_zones_ships_everywhere_free(provider: str) -> None:
    drop = make_drop(slug="no-zones", quantity=3, price_minor=999, ships=True)
    buyer, hold, client = held(drop, quantity=1)

    status, _ = put(client, hold.pk, {**HOME, "country": "US"})
    started = checkout.start_payment(hold_id=hold.pk, buyer_id=buyer.pk)

    assert status == 200
    assert (started.order.amount_minor, started.order.shipping_minor) == (999, 0)
    assert client.get(f"/api/holds/{hold.pk}").json()["shipping"] is None


# Every surface -----------------------------------------------------------------------------------


def test_the_fee_and_its_tax_on_every_surface(settings, provider: str, roles: None) -> None:
    settings.PRICES_INCLUDE_TAX = True
    drop = zoned("every-surface", basis=FeeBasis.UNIT, fee_rate=Decimal("7"))
    buyer, hold, client = held(drop)  # 2 x 9.99 = 19.98 (3.19 of 19%); 2 x 9.90 = 19.80 (1.30 of 7%)

    drop_page = Client().get("/drops/every-surface/").content.decode()
    before = client.get(f"/holds/{hold.pk}/").content.decode()
    status, _ = put(
        client, hold.pk, {**HOME, "line1": "Ring 1", "postal_code": "1010", "city": "Wien", "country": "AT"}
    )
    hold_page = client.get(f"/holds/{hold.pk}/").content.decode()
    hold_api = client.get(f"/api/holds/{hold.pk}").json()
    started = checkout.start_payment(hold_id=hold.pk, buyer_id=buyer.pk)

    assert status == 200
    assert '<span class="muted" id="shipping-from">+ shipping from €4.90</span>' in drop_page
    assert 'id="shipping-from"' in before and 'id="price-shipping"' not in before
    assert '<dd id="price-shipping">€19.80</dd>' in hold_page
    assert '<dd id="price-tax">€3.19</dd>' in hold_page and '<dd id="price-tax-2">€1.30</dd>' in hold_page
    assert "VAT 7%" in hold_page and '<dd id="price-gross"><strong>€39.78</strong></dd>' in hold_page
    assert "Order with obligation to pay · €39.78</button>" in hold_page
    assert hold_api["shipping"] == {
        "fee_minor": 1980,
        "tax_minor": 130,
        "tax_rate": "7.00",
        "gross_minor": 3978,
        "currency": "EUR",
    }
    # the provider's amount
    order = Order.objects.get(pk=started.order.pk)
    assert (order.amount_minor, order.tax_minor, order.shipping_minor, order.shipping_tax_minor) == (
        3978,
        449,
        1980,
        130,
    )
    assert started.payment.amount_minor == 3978
    assert charged_at_provider(provider, str(started.payment.session_id)) == 3978

    confirm(order)
    order.refresh_from_db()
    order_page = client.get(f"/orders/{order.pk}/").content.decode()
    order_api = client.get(f"/api/orders/{order.pk}").json()  # checked against the published schema too
    outbox.relay_outbox()
    email = mail.outbox[0].body  # the plain part
    invoice = Invoice.objects.get(order=order, kind="invoice")
    text = pdf_text(invoice)
    shipping_list = list(csv.DictReader(io.StringIO(fulfilment.shipping_list([order]))))
    export = merchant().post(
        "/admin/shop/drop/", {"action": "export_orders_csv", "_selected_action": [drop.pk]}
    )
    (exported,) = list(csv.DictReader(io.StringIO(export.content.decode())))

    assert '<strong id="order-total">€39.78</strong>' in order_page
    assert (
        '<dd id="price-shipping">€19.80</dd>' in order_page
        and '<dd id="price-tax-2">€1.30</dd>' in order_page
    )
    assert (order_api["amount_minor"], order_api["tax_minor"], order_api["net_minor"]) == (3978, 449, 3529)
    assert (order_api["shipping_minor"], order_api["shipping_tax_minor"], order_api["shipping_tax_rate"]) == (
        1980,
        130,
        "7.00",
    )
    assert ": €19.98\n" in email and "  Shipping: €19.80\n" in email, email
    assert "Total paid: €39.78\nof which net: €35.29\nVAT 19%: €3.19\nVAT 7%: €1.30\n" in email, email
    # the invoice: the goods' line, the fee's own line, a tax total per rate
    assert (
        invoice.gross_minor,
        invoice.tax_minor,
        invoice.shipping_gross_minor,
        invoice.shipping_tax_minor,
    ) == (
        3978,
        449,
        1980,
        130,
    )
    for words in [
        "€16.79",
        "€3.19",
        "€19.98",
        "Shipping",
        "€18.50",
        "€1.30",
        "€19.80",
        "Tax 19%",
        "Tax 7%",
        "€39.78",
    ]:
        assert words in text, (words, text)
    assert (shipping_list[0]["shipping_fee"], shipping_list[0]["shipping_tax"]) == ("19.80", "1.30")
    assert (exported["shipping"], exported["shipping_tax"], exported["shipping_tax_rate"]) == (
        "19.80",
        "1.30",
        "7.00",
    )
    with translation.override("de"):  # the invoice in the reader's language: the fee's line too
        german = " ".join(pdf_text(invoice).split())
    assert "Versand" in german and "Steuer 7%" in german and "Steuer 19%" in german, german
    # the pay page (Stripe's) says the fee inside the amount
    assert "Including shipping: €19.80." in _pay_page(client, order)


def _pay_page(client: Client, order: Order) -> str:
    from django.template.loader import render_to_string

    return render_to_string("checkout/stripe_pay.html", {"order": order, "payment": order.payments.get()})


def test_the_gross_is_fixed_by_the_address_and_another_zone_cannot_replace_it_once_paying(
    provider: str,
) -> None:
    buyer, hold, client = held(zoned("fixed"), quantity=1)
    assert put(client, hold.pk, {**HOME, "country": "DE"})[0] == 200
    started = checkout.start_payment(hold_id=hold.pk, buyer_id=buyer.pk)

    status, body = put(client, hold.pk, {**HOME, "country": "FR"})
    same_fee, _ = put(client, hold.pk, {**HOME, "line1": "Ring 2", "country": "DE"})

    assert (status, body["error"]) == (409, "address_changes_price")
    assert same_fee == 200  # another address in the same zone: the price stays what it is
    assert Order.objects.get(pk=started.order.pk).amount_minor == started.order.amount_minor


def test_a_partial_refund_returns_the_units_share_and_the_last_returns_the_fee(provider: str) -> None:
    buyer, hold, client = held(zoned("refunded"), quantity=2)
    put(client, hold.pk, {**HOME, "country": "DE"})
    order = checkout.start_payment(hold_id=hold.pk, buyer_id=buyer.pk).order
    confirm(order)
    order.refresh_from_db()
    order.payments.update(state="captured")

    first = refunds.request_refund(order_id=order.pk, quantity=1, by=None).refund
    second = refunds.request_refund(order_id=order.pk, quantity=1, by=None).refund

    assert order.amount_minor == 2 * 999 + 490
    assert first.amount_minor == 999  # one unit's share of the goods, none of the fee
    assert second.amount_minor == 999 + 490  # the rest, with the fee
    assert Order.objects.get(pk=order.pk).refunded_minor == order.amount_minor


# Where zones are set ---------------------------------------------------------------------------


def test_create_drop_sets_the_zones_and_refuses_bad_ones() -> None:
    out = io.StringIO()
    call_command(
        "create_drop",
        "--slug=zoned-cli",
        "--quantity=5",
        "--ships",
        "--tax-rate=19",
        "--ship-zone=Germany:DE:490",
        "--ship-zone=EU:AT, fr,NL:290:unit:7",
        stdout=out,
    )
    product = Product.objects.get(sku="ZONED-CLI")
    zones = list(
        product.shipping_zones.order_by("id").values_list(
            "name", "countries", "fee_minor", "fee_basis", "tax_rate"
        )
    )

    assert zones == [
        ("Germany", ["DE"], 490, "order", None),
        ("EU", ["AT", "FR", "NL"], 290, "unit", Decimal("7.00")),
    ]
    for bad in ["Nowhere:XX:100", "Twice:DE:1", "Bad:DE:ten", "EU:AT:1:unit:7:9"]:
        with pytest.raises(Exception, match=r"(?i)country|zone|one shipping zone"):
            call_command(
                "create_drop",
                f"--slug=bad-{len(bad)}",
                "--quantity=5",
                "--ships",
                "--ship-zone=Germany:DE:490",
                f"--ship-zone={bad}",
                stdout=io.StringIO(),
            )
    assert not Product.objects.filter(sku__startswith="BAD-").exists()


def test_the_admin_sets_zones_on_the_product_and_refuses_a_country_in_two(roles: None) -> None:
    drop = make_drop(slug="admin-zones", ships=True)
    product = drop.product
    form = {
        "sku": product.sku,
        "name": product.name,
        "price": "49.00",
        "currency": "EUR",
        "ships": "on",
        "tax_rate": "19",
        "shipping_zones-TOTAL_FORMS": "2",
        "shipping_zones-INITIAL_FORMS": "0",
        "shipping_zones-0-name": "Germany",
        "shipping_zones-0-countries": "DE",
        "shipping_zones-0-fee_minor": "490",
        "shipping_zones-0-fee_basis": "order",
        "shipping_zones-1-name": "DACH",
        "shipping_zones-1-countries": "AT,DE,CH",
        "shipping_zones-1-fee_minor": "690",
        "shipping_zones-1-fee_basis": "unit",
        "shipping_zones-1-tax_rate": "7",
    }
    desk = merchant()

    refused = desk.post(f"/admin/shop/product/{product.pk}/change/", form)
    form["shipping_zones-1-countries"] = "AT,CH"
    saved = desk.post(f"/admin/shop/product/{product.pk}/change/", form)

    assert (
        refused.status_code == 200
        and "A country may be in one shipping zone only: DE." in refused.content.decode()
    )
    assert saved.status_code == 302, re.findall(r"errorlist[^>]*>(.*?)</ul>", saved.content.decode(), re.S)
    assert sorted(ShippingZone.objects.filter(product=product).values_list("name", "fee_basis")) == [
        ("DACH", "unit"),
        ("Germany", "order"),
    ]


def test_the_hold_page_says_the_fee_in_german(settings) -> None:
    settings.PRICES_INCLUDE_TAX = True
    _, hold, client = held(zoned("gebuehr"), quantity=1)
    before = client.get(f"/holds/{hold.pk}/", headers={"Accept-Language": "de"}).content.decode()
    put(client, hold.pk, {**HOME, "country": "DE"})

    after = client.get(f"/holds/{hold.pk}/", headers={"Accept-Language": "de"}).content.decode()

    assert "+ Versand ab 4,90" in before, before
    assert "<dt>Versand</dt>" in after and "14,89" in after  # 9.99 + 4.90


def test_the_drop_page_of_a_shipped_product_reads_its_zones_in_one_query(django_assert_num_queries) -> None:
    zoned("counted-zones")
    make_drop(slug="counted-digital", quantity=6)
    visitor = Client()
    visitor.get("/drops/counted-digital/")  # warm: content types

    with django_assert_num_queries(3):  # the drop with its product, the stock, its variants
        visitor.get("/drops/counted-digital/")
    with django_assert_num_queries(4):  # and the zones' lowest fee, once
        page = visitor.get("/drops/counted-zones/").content.decode()
    assert 'id="shipping-from"' in page


def test_the_database_keeps_the_fee_inside_what_is_charged(provider: str) -> None:
    from django.db import IntegrityError, transaction

    buyer, hold, client = held(zoned("fee-inside"), quantity=1)
    put(client, hold.pk, {**HOME, "country": "DE"})
    order = checkout.start_payment(hold_id=hold.pk, buyer_id=buyer.pk).order

    for bad in (
        {"shipping_minor": order.amount_minor + 1},  # more fee than charged
        {"shipping_tax_minor": order.shipping_minor + 1},  # more tax than fee
        {"shipping_tax_minor": order.tax_minor + 1, "shipping_minor": order.amount_minor},
    ):
        with (
            pytest.raises(IntegrityError, match="checkout_order_shipping_within_amount"),
            transaction.atomic(),
        ):
            Order.objects.filter(pk=order.pk).update(**bad)


def test_credit_notes_give_the_goods_back_by_unit_and_the_fee_with_the_last_at_its_own_rate(
    settings, provider: str
) -> None:
    from tests.checkout.helpers import accepted

    settings.PRICES_INCLUDE_TAX = True
    buyer, hold, client = held(zoned("credited", fee_rate=Decimal("7")), quantity=2)
    put(client, hold.pk, {**HOME, "country": "FR"})  # 2 x 9.99 (3.19 of 19%) + 9.90 (0.65 of 7%)
    order = checkout.start_payment(hold_id=hold.pk, buyer_id=buyer.pk).order
    confirm(order)
    order.payments.update(state="captured")

    for _unit in range(2):
        accepted(refunds.request_refund(order_id=order.pk, quantity=1, by=None).refund)

    first, last = Invoice.objects.filter(order=order, kind="credit_note").order_by("number")
    invoice = Invoice.objects.get(order=order, kind="invoice")
    assert (first.gross_minor, first.tax_minor, first.shipping_gross_minor) == (-999, -160, 0)
    assert (last.gross_minor, last.tax_minor) == (-(999 + 990), -(159 + 65))
    assert (last.shipping_gross_minor, last.shipping_tax_minor, last.shipping_tax_rate) == (
        -990,
        -65,
        Decimal("7"),
    )
    assert first.tax_minor + last.tax_minor == -invoice.tax_minor
    text = " ".join(pdf_text(last).split())
    for words in ["Shipping", "-€9.90", "-€0.65", "Tax 7%", "-€1.59", "Tax 19%", "-€19.89"]:
        assert words in text, (words, text)


@pytest.mark.parametrize("guarded", [True, False])
def test_an_address_given_while_payment_starts_does_not_slip_under_the_fixed_price(
    monkeypatch, provider: str, guarded: bool
) -> None:
    """Payment starts (on its own connection) after give_address found no order and before it
    writes: the price was fixed with the first address. The control drops the guard (the UPDATE's
    extended = false) and the second address, in another zone, lands under the fixed price."""
    import threading

    from django.db import connection
    from django.db.models import QuerySet

    buyer, hold, client = held(zoned(f"interleaved-{int(guarded)}"), quantity=1)
    assert put(client, hold.pk, {**HOME, "country": "DE"})[0] == 200
    real_create = Address.objects.create

    def create_after_payment_started(**fields: object) -> Address:
        def pay() -> None:
            checkout.start_payment(hold_id=hold.pk, buyer_id=buyer.pk)
            connection.close()

        thread = threading.Thread(target=pay)
        thread.start()
        thread.join()
        return real_create(**fields)

    monkeypatch.setattr(Address.objects, "create", create_after_payment_started)
    if not guarded:
        real_filter = QuerySet.filter

        def without_guard(self: QuerySet, *args: object, **kwargs: object) -> QuerySet:
            kwargs.pop("extended", None)
            return real_filter(self, *args, **kwargs)

        monkeypatch.setattr(QuerySet, "filter", without_guard)

    status, body = put(client, hold.pk, {**HOME, "country": "FR"})

    order = Order.objects.get(hold=hold)
    hold.refresh_from_db()
    if guarded:
        assert (status, body["error"]) == (409, "address_changes_price")
        assert hold.shipping_address.country == "DE" == order.shipping_address.country  # type: ignore[union-attr]
    else:  # the race happens: the hold now says FR while the order was priced for DE
        assert status == 200 and hold.shipping_address.country == "FR"  # type: ignore[union-attr]
        assert order.shipping_minor == 490
