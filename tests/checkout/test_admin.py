from __future__ import annotations

import csv
import io

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client

from checkout.models import Order
from holds import services as holds
from tests.factories import make_buyer, make_drop

pytestmark = pytest.mark.django_db


def test_a_merchant_exports_a_drops_orders_as_csv(roles: None) -> None:
    drop = make_drop(
        slug="exported",
        quantity=5,
        mode="units",
        unit_labels=["S1", "S2", "S3", "S4", "S5"],
        price_minor=1999,
    )
    buyer = make_buyer("ann")
    hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=2, idempotency_key="k").hold
    Order.objects.create(hold=hold, buyer=buyer, drop=drop, quantity=2, amount_minor=3998, currency="EUR")
    merchant = get_user_model().objects.create_user("mo", password="pw-pw-pw-pw", is_staff=True)
    merchant.groups.add(Group.objects.get(name="Merchants"))
    client = Client()
    client.force_login(merchant)

    answer = client.post("/admin/shop/drop/", {"action": "export_orders_csv", "_selected_action": [drop.pk]})

    rows = list(csv.reader(io.StringIO(answer.content.decode())))
    assert answer["Content-Type"] == "text/csv"
    assert rows[0][:3] == ["drop", "order", "buyer"]
    assert (
        rows[1][0] == "exported" and rows[1][2] == "ann" and rows[1][5] == "S1 S2" and rows[1][6] == "39.98"
    )
    assert client.get(f"/admin/checkout/order/?drop__id__exact={drop.pk}").status_code == 200


def test_staff_without_add_or_order_rights_can_neither_duplicate_nor_export(roles: None) -> None:
    drop = make_drop(slug="guarded-actions", quantity=2)
    viewer = get_user_model().objects.create_user("viewer", password="pw-pw-pw-pw", is_staff=True)
    viewer.user_permissions.add(*Group.objects.get(name="On-call").permissions.exclude(codename="view_order"))
    client = Client()
    client.force_login(viewer)

    client.post("/admin/shop/drop/", {"action": "duplicate_drops", "_selected_action": [drop.pk]})
    exported = client.post(
        "/admin/shop/drop/", {"action": "export_orders_csv", "_selected_action": [drop.pk]}
    )

    from shop.models import Drop

    assert Drop.objects.count() == 1
    assert exported.get("Content-Type") != "text/csv"


def test_the_dashboards_link_to_payments_needing_attention_works() -> None:
    root = get_user_model().objects.create_superuser("root", password="pw-pw-pw-pw")
    client = Client()
    client.force_login(root)

    answer = client.get("/admin/checkout/payment/?state__in=capture_failed,void_failed")

    assert answer.status_code == 200 and "e=1" not in answer.get("Location", "")
    assert b"Payments needing attention" in client.get("/admin/shop/drop/dashboard/").content
