"""Fulfilment: a confirmed order ships with a carrier and a tracking number, its buyer is told once
in their language, many ship from a CSV with bad lines reported, and the carrier gets a clean list."""

from __future__ import annotations

import csv
import io
import threading

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.db import connection
from django.test import Client

from checkout import fulfilment, outbox
from checkout.models import Order, OrderState
from core.errors import InvalidInput, NotFound
from shop import languages
from shop.models import Address, Drop
from tests.factories import confirmed_order, make_buyer, make_drop, staff

ADDRESS = {
    "name": "Ada Lovelace",
    "line1": "Hafenstraße 1",
    "postal_code": "20457",
    "city": "Hamburg",
    "country": "DE",
}


def paid(slug: str = "ships", *, name: str = "Ada Lovelace", buyer: User | None = None) -> Order:
    """A confirmed order with a shipping address, its confirmation e-mail already sent."""
    drop = Drop.objects.filter(slug=slug).first() or make_drop(slug=slug, quantity=20)
    buyer = buyer or make_buyer()
    order = confirmed_order(drop, buyer, key=f"k-{Order.objects.count()}", amount_minor=12900)
    address = Address.objects.create(user=buyer, **{**ADDRESS, "name": name})
    Order.objects.filter(pk=order.pk).update(shipping_address=address)
    outbox.relay_outbox()
    mail.outbox.clear()
    order.refresh_from_db()
    return order


def sent() -> list[mail.EmailMessage]:
    outbox.relay_outbox()
    return list(mail.outbox)


@pytest.mark.django_db
def test_a_shipped_order_tells_its_buyer_once_in_their_language_and_a_correction_again() -> None:
    order = paid()
    languages.remember(order.buyer_id, "de")

    assert (
        fulfilment.mark_shipped(order_id=order.pk, carrier="DHL", tracking_number="0034 0434 1610")
        == "shipped"
    )
    (told,) = sent()
    assert told.subject.endswith(f"Ihre Bestellung {order.pk} ist unterwegs")
    assert "00340434161" + "0" in told.body and "https://www.dhl.com/" in told.body and "mit DHL" in told.body

    assert (
        fulfilment.mark_shipped(order_id=order.pk, carrier="dhl", tracking_number="003404341610")
        == "unchanged"
    )
    assert len(sent()) == 1  # the same number again is no news

    first_day = Order.objects.get(pk=order.pk).shipped_at
    assert (
        fulfilment.mark_shipped(order_id=order.pk, carrier="dpd", tracking_number="01234567890123")
        == "corrected"
    )
    assert [m.subject.endswith(f"Ihre Bestellung {order.pk} ist unterwegs") for m in sent()] == [True, True]
    now = Order.objects.get(pk=order.pk)
    assert (now.carrier, now.tracking_number, now.shipped_at) == ("dpd", "01234567890123", first_day)


@pytest.mark.django_db
def test_only_a_confirmed_order_with_an_address_ships_and_bad_input_changes_nothing() -> None:
    order = paid()
    for state in (OrderState.PENDING, OrderState.REFUNDED, OrderState.CANCELLED, OrderState.FAILED):
        Order.objects.filter(pk=order.pk).update(state=state, failure_reason="abandoned")
        with pytest.raises(fulfilment.CannotShip, match="only a confirmed order ships"):
            fulfilment.mark_shipped(order_id=order.pk, carrier="dhl", tracking_number="ABCD1234")
    Order.objects.filter(pk=order.pk).update(state=OrderState.CONFIRMED, failure_reason="")

    no_address = paid("digital")
    Order.objects.filter(pk=no_address.pk).update(shipping_address=None)
    with pytest.raises(fulfilment.CannotShip, match="no shipping address"):
        fulfilment.mark_shipped(order_id=no_address.pk, carrier="dhl", tracking_number="ABCD1234")
    with pytest.raises(NotFound):
        fulfilment.mark_shipped(order_id=10**12, carrier="dhl", tracking_number="ABCD1234")
    for carrier, number in [
        ("pigeon", "ABCD1234"),
        ("", "ABCD1234"),
        ("dhl", "12"),
        ("dhl", "x" * 41),
        ("dhl", "ABC\x00123"),
        ("dhl", "=HYPERLINK(1)"),
        ("dhl", "<script>"),
        ("dhl\x00", "ABCD1234"),
    ]:
        with pytest.raises(InvalidInput):
            fulfilment.mark_shipped(order_id=order.pk, carrier=carrier, tracking_number=number)

    untouched = Order.objects.filter(shipped_at__isnull=False).count()
    assert untouched == 0 and sent() == []


@pytest.mark.django_db(transaction=True)
def test_eight_clerks_marking_one_order_at_once_send_one_e_mail() -> None:
    order = paid()
    results: list[str] = []
    start = threading.Barrier(8)

    def clerk() -> None:
        try:
            start.wait()
            results.append(
                fulfilment.mark_shipped(order_id=order.pk, carrier="ups", tracking_number="1Z999AA1")
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=clerk) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(results) == ["shipped"] + ["unchanged"] * 7
    assert len(sent()) == 1


@pytest.mark.django_db
def test_an_upload_applies_its_good_lines_and_reports_each_bad_one_by_number() -> None:
    good, later, refunded = paid(), paid(), paid()
    Order.objects.filter(pk=refunded.pk).update(state=OrderState.REFUNDED)
    text = "\n".join(
        [
            "order,carrier,tracking_number",
            f"{good.pk},dhl,00340434161094042557",  # line 2
            f"{good.pk},pigeon,ABCD1234",  # 3: unknown carrier
            "",  # 4: blank, skipped
            "=1+1,dhl,ABCD1234",  # 5: not an order number
            f"{refunded.pk},dhl,ABCD1234",  # 6: refunded
            f"{later.pk},gls",  # 7: too short
            f"#{later.pk}, GLS ,  zz 99 88 77 ",  # 8: good, tidied
        ]
    )
    done = fulfilment.ship_from_csv(text.encode())

    assert done.shipped == [good.pk, later.pk]
    assert [line for line, _why in done.refused] == [3, 5, 6, 7]
    assert "The carrier is one of" in done.refused[0][1] and "is not an order number" in done.refused[1][1]
    assert Order.objects.get(pk=later.pk).tracking_number == "ZZ998877"
    assert Order.objects.get(pk=refunded.pk).shipped_at is None
    assert len(sent()) == 2


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"\xff\xfeo\x00r\x00", "not UTF-8"),
        (b"id,tracking\n1,ABCD1234\n", "must be the header"),
        (b"", "must be the header"),
        (b"order,carrier,tracking_number\n" + b"1,dhl,ABCD1234\n" * 200_000, "larger than 2 MB"),
    ],
)
def test_a_file_that_is_not_a_tracking_csv_is_refused_whole(data: bytes, says: str) -> None:
    with pytest.raises(InvalidInput, match=says):
        fulfilment.ship_from_csv(data)


@pytest.mark.django_db
def test_the_merchant_ships_in_the_admin_and_other_staff_may_not(roles: None) -> None:
    order = paid()
    on_call = Client()
    on_call.force_login(staff("oncall", "On-call"))
    for url in (f"/admin/checkout/order/{order.pk}/ship/", "/admin/checkout/order/ship/"):
        assert on_call.get(url).status_code == 403
        assert on_call.post(url, {"carrier": "dhl", "tracking_number": "ABCD1234"}).status_code == 403
    assert Order.objects.get(pk=order.pk).shipped_at is None

    merchant = Client()
    merchant.force_login(staff("mira", "Merchants"))
    page = merchant.get(f"/admin/checkout/order/{order.pk}/change/").content.decode()
    assert 'id="ship-order"' in page
    assert 'id="upload-tracking"' in merchant.get("/admin/checkout/order/").content.decode()

    refused = merchant.post(
        f"/admin/checkout/order/{order.pk}/ship/", {"carrier": "dhl", "tracking_number": "1"}
    )
    assert refused.status_code == 200 and "4 to 40 letters" in refused.content.decode()
    done = merchant.post(
        f"/admin/checkout/order/{order.pk}/ship/", {"carrier": "dhl", "tracking_number": "ABCD1234"}
    )
    assert done.status_code == 302 and Order.objects.get(pk=order.pk).tracking_number == "ABCD1234"

    other = paid()
    upload = io.BytesIO(
        f"order,carrier,tracking_number\n{other.pk},dpd,X1\n{other.pk},dpd,DPD12345\n".encode()
    )
    upload.name = "tracking.csv"
    page = merchant.post("/admin/checkout/order/ship/", {"file": upload}).content.decode()
    assert "Line 2:" in page and "1 order marked shipped" in page
    assert Order.objects.get(pk=other.pk).tracking_number == "DPD12345"
    garbage = io.BytesIO(b"\x00\xff garbage")
    garbage.name = "tracking.csv"
    page = merchant.post("/admin/checkout/order/ship/", {"file": garbage}).content.decode()
    assert "not UTF-8" in page


@pytest.mark.django_db
def test_the_carriers_list_has_the_address_in_columns_and_no_cell_a_formula(roles: None) -> None:
    evil = paid(name='=HYPERLINK("http://evil.example","click")')
    shipped = paid()
    fulfilment.mark_shipped(order_id=shipped.pk, carrier="dhl", tracking_number="ABCD1234")
    merchant = Client()
    merchant.force_login(staff("mira", "Merchants"))

    answer = merchant.post(
        "/admin/checkout/order/",
        {"action": "shipping_list_csv", "_selected_action": [evil.pk, shipped.pk]},
    )
    rows = list(csv.DictReader(io.StringIO(answer.content.decode())))

    assert answer["Content-Type"] == "text/csv"
    assert [row["order"] for row in rows] == [str(evil.pk)]  # the shipped one is not listed again
    row = rows[0]
    assert row["name"] == '\'=HYPERLINK("http://evil.example","click")'
    assert (row["address_line1"], row["postal_code"], row["city"], row["country"]) == (
        "Hafenstraße 1",
        "20457",
        "Hamburg",
        "DE",
    )


@pytest.mark.django_db
def test_the_buyer_sees_the_parcel_on_the_order_page_and_in_the_api() -> None:
    order = paid()
    buyer = Client()
    buyer.force_login(order.buyer)
    assert buyer.get(f"/api/orders/{order.pk}").json()["shipment"] is None
    assert 'id="order-shipment"' not in buyer.get(f"/orders/{order.pk}/").content.decode()

    fulfilment.mark_shipped(order_id=order.pk, carrier="hermes", tracking_number="H1000 2000 3000")

    shipment = buyer.get(f"/api/orders/{order.pk}").json()["shipment"]
    assert shipment["carrier"] == "hermes" and shipment["carrier_name"] == "Hermes"
    assert shipment["tracking_number"] == "H100020003000"
    assert shipment["tracking_url"].startswith("https://www.myhermes.de/") and shipment["shipped_at"]
    page = buyer.get(f"/orders/{order.pk}/", HTTP_ACCEPT_LANGUAGE="de").content.decode()
    assert "mit Hermes, Sendungsnummer H100020003000" in page and 'id="track-parcel"' in page
