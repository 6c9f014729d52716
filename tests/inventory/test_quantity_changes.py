"""Stock rows follow the merchant's quantity and layout; held and sold units are never taken."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from holds import services as holds
from inventory import services
from inventory.models import StockBucket, Unit
from inventory.selectors import invariant
from shop.errors import InvalidInput
from shop.models import Drop
from tests.factories import make_buyer, make_drop

pytestmark = pytest.mark.django_db(transaction=True)


def levels(drop: Drop) -> list[int]:
    return list(StockBucket.objects.filter(drop=drop).order_by("index").values_list("available", flat=True))


def test_raising_quantity_respreads_the_buckets() -> None:
    drop = make_drop(quantity=10, buckets=4, starts_at=timezone.now() + timedelta(hours=1))

    services.change_quantity(drop=drop, quantity=23)

    assert levels(drop) == [6, 6, 6, 5]
    assert Drop.objects.get(pk=drop.pk).quantity == 23
    assert invariant(drop_id=drop.pk).drift == 0


def test_lowering_below_held_plus_sold_is_refused_and_changes_nothing() -> None:
    drop = make_drop(quantity=6, buckets=2, per_buyer_limit=3)
    holds.reserve(drop=drop, buyer_id=make_buyer().pk, quantity=3, idempotency_key=uuid.uuid4().hex)
    holds.reserve(drop=drop, buyer_id=make_buyer().pk, quantity=2, idempotency_key=uuid.uuid4().hex)
    before = levels(drop)

    with pytest.raises(InvalidInput, match="nobody holds"):
        services.change_quantity(drop=drop, quantity=4)

    assert levels(drop) == before
    assert Drop.objects.get(pk=drop.pk).quantity == 6
    services.change_quantity(drop=drop, quantity=5)  # exactly held: allowed
    assert invariant(drop_id=drop.pk).as_json() == {
        "quantity": 5,
        "available": 0,
        "held": 5,
        "sold": 0,
        "expired_unreclaimed": 0,
        "expired_holds": 0,
        "drift": 0,
    }


def test_units_mode_adds_labels_and_removes_only_free_units() -> None:
    drop = make_drop(quantity=3, mode="units", unit_labels=["A1", "A2", "A3"], per_buyer_limit=1)
    holds.reserve(drop=drop, buyer_id=make_buyer().pk, quantity=1, idempotency_key="k")  # takes A1

    services.change_quantity(drop=drop, quantity=5, new_labels=["B1", "B2"])
    services.change_quantity(drop=drop, quantity=2)

    assert sorted(Unit.objects.filter(drop=drop).values_list("label", flat=True)) == ["A1", "A2"]
    holds.reserve(drop=drop, buyer_id=make_buyer().pk, quantity=1, idempotency_key="k")  # takes A2
    with pytest.raises(InvalidInput, match="nobody holds"):
        services.change_quantity(drop=drop, quantity=1)
    with pytest.raises(InvalidInput, match="at least 1"):
        services.change_quantity(drop=drop, quantity=0)
    assert invariant(drop_id=drop.pk).as_json()["held"] == 2
    assert invariant(drop_id=drop.pk).drift == 0


def test_layout_changes_before_the_start_and_is_fixed_after() -> None:
    later = make_drop(quantity=8, buckets=2, starts_at=timezone.now() + timedelta(hours=1))
    live = make_drop(quantity=8, buckets=2)

    services.relayout_stock(drop=later, inventory_mode="units", bucket_count=1)
    with pytest.raises(InvalidInput, match="fixed"):
        services.relayout_stock(drop=live, inventory_mode="buckets", bucket_count=4)

    assert (
        Unit.objects.filter(drop=later).count() == 8 and not StockBucket.objects.filter(drop=later).exists()
    )
    assert levels(live) == [4, 4]


def test_admin_change_of_quantity_moves_stock_with_it() -> None:
    drop = make_drop(slug="admin-edit", quantity=10, buckets=2, starts_at=timezone.now() + timedelta(hours=1))
    client = Client()
    client.force_login(make_buyer("boss").__class__.objects.create_superuser("root", password="pw-pw-pw-pw"))
    url = f"/admin/shop/drop/{drop.pk}/change/"
    form = client.get(url).context["adminform"].form
    data = {name: field.widget.format_value(form.initial.get(name)) for name, field in form.fields.items()}
    data |= {
        "product": drop.product_id,
        "starts_at_0": drop.starts_at.strftime("%Y-%m-%d"),
        "starts_at_1": drop.starts_at.strftime("%H:%M:%S"),
        "ends_at_0": drop.ends_at.strftime("%Y-%m-%d"),
        "ends_at_1": drop.ends_at.strftime("%H:%M:%S"),
        "quantity": "14",
        "bucket_count": "2",
    }
    data = {k: v for k, v in data.items() if v is not None and v is not False}

    answer = client.post(url, data)

    assert answer.status_code == 302, answer.context["adminform"].form.errors if answer.context else answer
    assert levels(drop) == [7, 7]
    assert invariant(drop_id=drop.pk).as_json()["quantity"] == 14
