"""The storefront's pages through Django: what a buyer is shown, and what they are not."""

from __future__ import annotations

import re

import pytest
from django.core import mail
from django.test import Client

from catalogue.services import NewVariant
from checkout import outbox
from checkout.models import Order, OrderState
from holds import services as holds
from holds.models import Hold
from inventory import services as stock
from shop.models import Drop
from tests.factories import confirmed_order, expire_in, make_buyer, make_drop, size_of

pytestmark = pytest.mark.django_db


def logged_in(name: str) -> Client:
    client = Client()
    client.force_login(make_buyer(name))
    return client


def test_the_drop_page_reads_like_a_product_page() -> None:
    make_drop(slug="pp", quantity=100, price_minor=12900, hold_seconds=480, product_sku="DEMO-SNEAKER")

    page = Client().get("/drops/pp/", HTTP_ACCEPT_LANGUAGE="en-GB").content.decode()

    assert '<p class="price" id="price">€129.00</p>' in page
    assert "/static/img/products/demo-sneaker.svg" in page  # the picture drawn for the demo SKU
    assert "8 minutes once reserved" in page and " s to pay" not in page
    assert "100 of 100 units" in page and "2 units per buyer" in page
    assert re.search(r'<time datetime="[^"]+" data-local="date">', page)
    assert page.count("Sold out") + page.count("sold out") == 0


def test_a_product_without_a_picture_gets_the_placeholder_and_a_german_buyer_their_format() -> None:
    make_drop(slug="plain", price_minor=4900)

    page = Client().get("/drops/plain/", HTTP_ACCEPT_LANGUAGE="de-DE,de;q=0.9").content.decode()

    assert "/static/img/product.svg" in page
    assert "49,00\xa0€" in page


def test_sold_out_is_said_once() -> None:
    drop = make_drop(slug="gone", quantity=1)
    holds.reserve(drop=drop, buyer_id=make_buyer("early").pk, quantity=1, idempotency_key="k")

    page = Client().get("/drops/gone/").content.decode()

    assert page.lower().count("sold out") == 1  # the badge; the notice says what it means


def test_a_buyer_holding_units_sees_the_hold_not_reserve() -> None:
    make_drop(slug="mine", quantity=5)
    client = logged_in("holder")
    client.post("/drops/mine/buy", {"quantity": "2", "idempotency_key": "k"})
    hold = Hold.objects.get()

    page = client.get("/drops/mine/").content.decode()

    assert 'id="buy"' not in page
    assert "You hold 2 units" in page and f'href="/holds/{hold.pk}/"' in page


def test_a_seated_drop_offers_its_free_seats_and_the_choice_is_held() -> None:
    drop = make_drop(slug="seated", quantity=4, mode="units", unit_labels=["A1", "A2", "B1", "B2"])
    holds.reserve(drop=drop, buyer_id=make_buyer("first").pk, quantity=1, idempotency_key="k", unit="A1")
    client = logged_in("second")

    page = client.get("/drops/seated/").content.decode()
    assert re.search(r'value="A1" disabled', page) and 'value="B2">' in page

    # a seat with quantity 2 on the form: choosing a seat reserves that one seat
    answer = client.post("/drops/seated/buy", {"quantity": "2", "unit": "B2", "idempotency_key": "k2"})
    hold = Hold.objects.get(buyer__username="second")
    assert answer["Location"] == f"/holds/{hold.pk}/"
    assert list(hold.units.values_list("label", flat=True)) == ["B2"]
    hold_page = client.get(answer["Location"]).content.decode()
    assert '<span id="hold-seats">seat B2</span>' in hold_page
    assert "1 unit ·" in hold_page


def test_a_seated_drop_in_sizes_shows_each_size_s_seats_price_and_a_seat_picks_its_size() -> None:
    sizes = [NewVariant("S", 1, 4000), NewVariant("M", 2, 5500), NewVariant("L", 1)]
    make_drop(slug="sized-seats", quantity=4, mode="units", variants=sizes, price_minor=4900)
    drop = Drop.objects.get(slug="sized-seats")
    small = drop.variants.get(name="S")
    first = make_buyer("first").pk
    holds.reserve(drop=drop, buyer_id=first, quantity=1, idempotency_key="k", unit="S-1", variant=small)
    client = logged_in("second")

    page = client.get("/drops/sized-seats/").content.decode()
    group = r'<div class="seat-group( sold-out)?" data-variant="(\w)">\s*<p class="seat-size">(.*?)</p>'
    groups = re.findall(group, page)
    assert [(name, bool(gone)) for gone, name, _ in groups] == [("S", True), ("M", False), ("L", False)]
    heading = {name: re.sub(r"<[^>]+>", "", text) for _, name, text in groups}
    assert heading["S"] == "S · €40.00 · sold out" and heading["M"] == "M · €55.00 · 2 left"
    assert heading["L"] == "L · €49.00 · 1 left"
    assert re.search(r'value="S-1" disabled', page) and 'value="M-2">' in page

    # a seat sent without its size (the API, or a form whose script did not run) is of the seat's size
    answer = client.post("/drops/sized-seats/buy", {"quantity": "1", "unit": "M-2", "idempotency_key": "k2"})
    hold = Hold.objects.get(buyer__username="second")
    assert answer["Location"] == f"/holds/{hold.pk}/"
    assert size_of(hold) == "M" and list(hold.units.values_list("label", flat=True)) == ["M-2"]


def test_a_seat_named_with_another_size_is_refused_and_nothing_is_held() -> None:
    make_drop(slug="two-sizes", quantity=2, mode="units", variants=[NewVariant("S", 1), NewVariant("M", 1)])
    client = logged_in("ann")

    answer = client.post(
        "/api/drops/two-sizes/holds",
        {"quantity": 1, "unit": "M-1", "variant": "S"},
        content_type="application/json",
        headers={"Idempotency-Key": "k"},
    )

    assert answer.status_code == 422 and "no unit 'M-1' in S" in answer.json()["detail"]
    assert not Hold.objects.exists()


@pytest.mark.parametrize(
    ("label", "names", "size"),
    [
        ("M-3", ["S", "M"], "M"),
        ("A-1-2", ["A", "A-1"], "A-1"),
        ("A-12", ["A", "A-1"], "A"),
        ("M-", ["M"], None),
        ("M-x", ["M"], None),
        ("3", [""], None),
        ("XL-1", ["S", "M"], None),
    ],
)
def test_a_numbered_unit_names_its_size(label: str, names: list[str], size: str | None) -> None:
    assert stock.numbered_variant(label, names) == size
    if size is not None:
        assert stock.numbered(size, int(label.rsplit("-", 1)[1])) == label


def test_the_hold_page_says_the_total_and_an_ended_hold_offers_to_reserve_again() -> None:
    drop = make_drop(slug="again", quantity=5, price_minor=12900, hold_seconds=480)
    client = logged_in("ann")
    client.post("/drops/again/buy", {"quantity": "2", "idempotency_key": "k"})
    hold = Hold.objects.get()

    held = client.get(f"/holds/{hold.pk}/").content.decode()
    assert ">Order with obligation to pay · €258.00</button>" in held
    assert "\N{MULTIPLICATION SIGN}" not in held
    assert "resets your time to 8 minutes from then, once" in held  # not "8 minutes more"

    expire_in([hold.pk], -1)
    ended = client.get(f"/holds/{hold.pk}/").content.decode()
    assert "<h1>Expired</h1>" in ended and 'id="reserve-again"' in ended
    assert drop.get_absolute_url() in ended


def test_orders_show_amounts_and_seats_and_a_declined_order_offers_another_card() -> None:
    drop = make_drop(slug="ord", quantity=3, mode="units", unit_labels=["C1", "C2", "C3"], price_minor=5000)
    buyer = make_buyer("olga")
    hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=1, idempotency_key="k", unit="C2").hold
    order = Order.objects.create(
        hold=hold,
        buyer=buyer,
        drop=drop,
        quantity=1,
        amount_minor=5000,
        currency="EUR",
        state=OrderState.FAILED,
        failure_reason="The payment was declined (card declined).",
    )
    client = Client()
    client.force_login(buyer)

    listing = client.get("/orders/").content.decode()
    assert "€50.00" in listing and "Seat C2" in listing

    page = client.get(f"/orders/{order.pk}/").content.decode()
    assert '<span id="order-seats">seat C2</span>' in page
    assert 'id="try-again"' in page and "still held" in page

    expire_in([hold.pk], -1)
    page = client.get(f"/orders/{order.pk}/").content.decode()
    assert 'id="try-again"' not in page and 'id="reserve-again"' in page


def test_the_confirmation_email_names_the_seats_and_the_total(settings) -> None:
    settings.PUBLIC_BASE_URL = "https://shop.example"
    drop = make_drop(slug="mail", quantity=2, mode="units", unit_labels=["D1", "D2"], price_minor=4500)
    buyer = make_buyer("meg")
    buyer.email = "meg@example.test"
    buyer.save()
    order = confirmed_order(drop, buyer, key="k", amount_minor=4500, unit="D2")

    outbox.relay_outbox()

    body = mail.outbox[0].body
    assert "1 unit of" in body and "seat D2" in body and "€45.00" in body
    assert f"https://shop.example/orders/{order.pk}/" in body


def test_terms_the_icon_and_the_shops_own_404(settings) -> None:
    settings.DEBUG = False
    client = Client()

    assert client.get("/terms/").status_code == 200
    icon = client.get("/favicon.ico")
    assert icon.status_code == 301 and icon["Location"].endswith("img/favicon.svg")
    missing = client.get("/nowhere/")
    assert missing.status_code == 404
    assert b"Not here" in missing.content and b"Terms of sale" in missing.content


def test_the_drop_page_costs_a_fixed_number_of_queries_whatever_the_seats(django_assert_num_queries) -> None:
    # the drop page is what the crowd loads at the start: a buyer adds their session, account and
    # running hold; a seated drop one query for its map, however many seats it has
    make_drop(slug="q-buckets", quantity=100, buckets=4)
    labels = [f"{row}{n}" for row in "ABCDEFGHIJKLMNO" for n in range(1, 21)]
    make_drop(slug="q-seats", quantity=300, mode="units", unit_labels=labels)
    visitor, buyer = Client(), logged_in("counted")
    for client in (visitor, buyer):
        client.get("/drops/q-buckets/")  # warm: content types, the session's first write

    with django_assert_num_queries(3):  # the drop with its product, the stock, its variants with theirs
        visitor.get("/drops/q-seats/")
    with django_assert_num_queries(6):
        buyer.get("/drops/q-buckets/")
    with django_assert_num_queries(7):
        page = buyer.get("/drops/q-seats/").content.decode()
    assert page.count('name="unit"') == 301  # best available and every seat
