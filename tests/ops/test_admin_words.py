"""The admin's words (issue 25 §6): names a person reads, columns that fit a 1280 px screen, the
dashboard's terms explained beside their numbers and what a drop has taken."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from checkout.models import Order
from tests.checkout.helpers import confirmed_order
from tests.factories import make_drop

pytestmark = pytest.mark.django_db


def owner() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("owner", "o@example.com", "pw-pw-pw-pw"))
    return client


def headers(page: str) -> list[str]:
    """The column headers of the admin list's table (not the sidebar's)."""
    table = page[page.index('<table id="result_list"') :]
    cells = re.findall(r'<th scope="col"[^>]*>(.*?)</th>', table[: table.index("</thead>")], re.S)
    return [re.sub(r"<[^>]+>", "", cell).strip() for cell in cells]


def test_the_admin_says_api_tokens_amount_and_what_refunded_means() -> None:
    drop = make_drop(slug="worded", quantity=5)
    order = confirmed_order(drop, quantity=2)
    client = owner()

    index = client.get("/admin/").content.decode()
    assert "API tokens" in index and "Api tokens" not in index
    orders = client.get("/admin/checkout/order/").content.decode()
    shown = [h.lower() for h in headers(orders) if h]
    assert shown == ["id", "drop", "buyer", "bought", "state", "refunded", "dispute", "made (utc)"], shown
    assert "2 units, €20.00" in orders and "Amount display" not in orders
    refunds = client.get(f"/admin/checkout/order/{order.pk}/change/").content.decode()
    assert "Amount display" not in refunds
    page = client.get(f"/admin/checkout/order/{order.pk}/change/").content.decode()
    assert "Payment voided" in page and "An authorisation that came too late was voided." not in page
    assert Order._meta.get_field("refunded").help_text.startswith("Yes when")


def test_the_drop_list_has_six_narrow_columns_with_the_sale_and_what_is_left_in_words() -> None:
    make_drop(slug="listed", quantity=400, buckets=4)
    page = owner().get("/admin/shop/drop/").content.decode()

    shown = [h.lower() for h in headers(page) if h]
    assert shown == ["drop", "state", "sale (utc)", "left", "room", "sales"], shown
    assert "400 of 400 left" in page and "400 units in 4 buckets" not in page


def test_the_dashboard_explains_drift_and_stranded_and_shows_what_was_taken() -> None:
    drop = make_drop(slug="taken", quantity=5)
    confirmed_order(drop, quantity=2)
    client = owner()

    page = client.get("/admin/shop/drop/dashboard/").content.decode()
    assert "<b>Drift</b> is how far" in page and "<b>Stranded</b> units" in page
    panel = {d["slug"]: d for d in client.get("/admin/shop/drop/dashboard/data/").json()["drops"]}["taken"]
    assert panel["sold_value"] == "€20.00"
    assert "taken, net of refunds" in page and "DRIFT of" not in page


def test_pausing_says_which_sale_in_a_sentence() -> None:
    drop = make_drop(slug="demo-sneaker", title="Demo sneaker", quantity=5)
    client = owner()

    done = client.post(f"/admin/shop/drop/{drop.pk}/pause/", {"reason": "price typo"}, follow=True)
    said = done.content.decode()
    assert (
        "The sale of Demo sneaker (demo-sneaker) is paused: nobody can reserve until it is resumed." in said
    )
    again = client.post(f"/admin/shop/drop/{drop.pk}/pause/", {"reason": "again"}, follow=True)
    assert "The sale of Demo sneaker (demo-sneaker) was paused already." in again.content.decode()
    resumed = client.post(f"/admin/shop/drop/{drop.pk}/resume/", follow=True).content.decode()
    assert "The sale of Demo sneaker (demo-sneaker) is on again: buyers can reserve." in resumed


def test_no_admin_list_shows_a_property_s_name_as_its_header() -> None:
    make_drop(slug="priced", quantity=1, price_minor=12900)
    page = owner().get("/admin/shop/product/").content.decode()

    assert "price" in [h.lower() for h in headers(page)] and "€129.00" in page
    assert "display" not in " ".join(headers(page)).lower()
