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


def test_on_call_records_a_refused_capture_settled_by_hand_and_the_count_clears(roles: None) -> None:
    from checkout.models import Payment, PaymentState
    from checkout.selectors import payments_needing_attention

    drop = make_drop(slug="refused", quantity=5)
    payments = []
    for name, state in (
        ("cap", PaymentState.CAPTURE_FAILED),
        ("vo", PaymentState.VOID_FAILED),
        ("ok", "captured"),
    ):
        buyer = make_buyer(name)
        hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=1, idempotency_key="k").hold
        order = Order.objects.create(
            hold=hold, buyer=buyer, drop=drop, quantity=1, amount_minor=100, currency="EUR"
        )
        payments.append(
            Payment.objects.create(
                order=order, provider="simulated", amount_minor=100, currency="EUR", state=state
            )
        )
    on_call = get_user_model().objects.create_superuser("oc", password="pw-pw-pw-pw")
    client = Client()
    client.force_login(on_call)
    assert sum(payments_needing_attention().values()) == 2

    answer = client.post(
        "/admin/checkout/payment/",
        {"action": "settled_at_the_provider", "_selected_action": [p.pk for p in payments]},
        follow=True,
    )

    states = dict(Payment.objects.values_list("pk", "state"))
    assert [states[p.pk] for p in payments] == ["captured", "voided", "captured"]
    assert sum(payments_needing_attention().values()) == 0
    text = answer.content.decode()
    assert "2 payments marked settled." in text and "1 skipped" in text
    from django.contrib.admin.models import LogEntry

    assert (
        LogEntry.objects.filter(user=on_call, change_message__contains="settled at the provider").count() == 2
    )
