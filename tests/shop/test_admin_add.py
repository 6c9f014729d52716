"""Adding a drop in the admin: the form's errors come back as form errors, a valid one gets its stock."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.admin.models import ADDITION, LogEntry
from django.http import StreamingHttpResponse
from django.test import Client
from django.utils import timezone

from inventory.models import StockBucket, Unit
from shop.models import Drop, Product
from tests.factories import merchant

pytestmark = pytest.mark.django_db


def add_form(**changes: str) -> dict[str, str]:
    """What the add page posts for a valid drop of 10 units over 2 buckets, with changes."""
    product = Product.objects.get_or_create(sku="TEE", defaults={"name": "Tee", "price_minor": 2500})[0]
    starts = timezone.now() + timedelta(hours=1)
    ends = starts + timedelta(hours=2)
    return {
        "product": str(product.pk),
        "slug": "tees",
        "title": "Tees",
        "starts_at_0": starts.strftime("%Y-%m-%d"),
        "starts_at_1": starts.strftime("%H:%M:%S"),
        "ends_at_0": ends.strftime("%Y-%m-%d"),
        "ends_at_1": ends.strftime("%H:%M:%S"),
        "quantity": "10",
        "inventory_mode": "buckets",
        "bucket_count": "2",
        "hold_seconds": "300",
        "per_buyer_limit": "1",
        "admission_wave_seconds": "5",
        "admission_percent": "200",
        "join_work_bits": "0",
        "line_close_seconds": "10",
        "draw_round_wait_seconds": "0",
        "offer_seconds": "90",
        "unit_labels": "",
        # the variants inline, no rows: one stock
        "variants-TOTAL_FORMS": "0",
        "variants-INITIAL_FORMS": "0",
        **changes,
    }


def test_a_valid_drop_is_created_with_its_stock_rows(roles: None) -> None:
    answer = merchant().post("/admin/shop/drop/add/", add_form())

    assert answer.status_code == 302, answer.context["adminform"].form.errors if answer.context else answer
    drop = Drop.objects.get(slug="tees")
    assert (drop.title, drop.quantity, drop.hold_seconds, drop.per_buyer_limit) == ("Tees", 10, 300, 1)
    assert (drop.admission_percent, drop.waiting_room, drop.paused) == (200, False, False)
    assert sorted(StockBucket.objects.filter(drop=drop).values_list("available", flat=True)) == [5, 5]
    entry = LogEntry.objects.get(object_id=str(drop.pk))
    assert (entry.action_flag, entry.user.username) == (ADDITION, "mira")


def test_a_seated_drop_gets_its_labelled_units(roles: None) -> None:
    form = add_form(
        slug="seats", quantity="4", inventory_mode="units", bucket_count="1", unit_labels="A1-A3, VIP"
    )

    answer = merchant().post("/admin/shop/drop/add/", form)

    assert answer.status_code == 302
    drop = Drop.objects.get(slug="seats")
    assert list(Unit.objects.filter(drop=drop).order_by("rank").values_list("label", flat=True)) == [
        "A1",
        "A2",
        "A3",
        "VIP",
    ]


@pytest.mark.parametrize(
    ("changes", "field", "error"),
    [
        # rules over two fields: beside the field to change, not only at the top
        ({"bucket_count": "11"}, "bucket_count", "Use at most as many buckets as there are units."),
        ({"ends_at_0": "2000-01-01"}, "ends_at", "The drop must end after it starts."),
        ({"inventory_mode": "units", "unit_labels": "A1-A3"}, "unit_labels", "3 labels for a quantity of 10"),
        ({"unit_labels": "A1-A10"}, "unit_labels", "Labels are for a drop in units mode"),
    ],
)
def test_a_refused_drop_shows_form_errors_and_writes_nothing(
    roles: None, changes: dict[str, str], field: str, error: str
) -> None:
    answer = merchant().post("/admin/shop/drop/add/", add_form(**changes))

    assert answer.status_code == 200
    errors = answer.context["adminform"].form.errors
    assert any(error in message for message in errors.get(field, [])), errors
    assert "__all__" not in errors, errors
    assert 'class="errorlist' in answer.content.decode().split(f'name="{field}')[0].rsplit("form-row", 1)[-1]
    assert not Drop.objects.exists() and not StockBucket.objects.exists() and not Unit.objects.exists()
    assert not LogEntry.objects.exists()


def test_the_add_still_checks_the_csrf_token(roles: None) -> None:
    client = merchant()
    client.handler.enforce_csrf_checks = True

    answer = client.post("/admin/shop/drop/add/", add_form())

    assert answer.status_code == 403
    assert not Drop.objects.exists()


def test_a_product_price_is_typed_and_shown_in_major_units_and_stored_in_minor(roles: None) -> None:
    client = merchant()
    form = {"sku": "HOODIE", "name": "Hoodie", "description": "", "currency": "EUR", "image_url": ""}

    added = client.post("/admin/shop/product/add/", {**form, "price": "129.00"})
    product = Product.objects.get(sku="HOODIE")
    page = client.get(f"/admin/shop/product/{product.pk}/change/").content.decode()
    bad = client.post(f"/admin/shop/product/{product.pk}/change/", {**form, "price": "12.345"})

    assert added.status_code == 302, added.context["adminform"].form.errors if added.context else added
    assert product.price_minor == 12900
    assert 'name="price" value="129.00"' in page and 'value="12900"' not in page
    assert bad.status_code == 200 and "price" in bad.context["adminform"].form.errors
    assert Product.objects.get(pk=product.pk).price_minor == 12900


def test_the_drop_list_says_which_zone_its_times_are_in(roles: None) -> None:
    client = merchant()
    client.post("/admin/shop/drop/add/", add_form())

    listing = client.get("/admin/shop/drop/").content.decode()

    starts = timezone.localtime(Drop.objects.get().starts_at)
    assert "Sale (UTC)" in listing and f"{starts:%Y-%m-%d %H:%M}<br>to " in listing  # the zone named once


def test_a_merchant_uploads_a_product_picture_and_buyers_see_it(roles: None, tmp_path, settings) -> None:
    import io

    from PIL import Image

    from tests.factories import make_drop

    settings.MEDIA_ROOT = tmp_path
    png = io.BytesIO()
    Image.new("RGB", (64, 48), (20, 90, 200)).save(png, format="PNG")
    client = merchant()
    form = {
        "sku": "CAP",
        "name": "Cap",
        "description": "A cap.",
        "currency": "EUR",
        "image_url": "",
        "price": "19.00",
    }

    fake = io.BytesIO(b"not a picture at all")
    fake.name = "cap.png"
    refused = client.post("/admin/shop/product/add/", {**form, "image": fake})
    png.name = "cap.png"
    png.seek(0)
    added = client.post("/admin/shop/product/add/", {**form, "image": png})
    product = Product.objects.get(sku="CAP")
    make_drop(slug="caps", product_sku="CAP", quantity=5)
    page = Client().get("/drops/caps/").content.decode()
    served = Client().get(product.image.url)
    escaped = Client().get("/media/%2E%2E/%2E%2E/config/settings.py")

    assert refused.status_code == 200 and "image" in refused.context["adminform"].form.errors
    assert added.status_code == 302
    assert product.image.name is not None
    assert product.image.name.startswith("products/cap") and (tmp_path / product.image.name).exists()
    assert f'src="{product.image.url}"' in page
    assert served.status_code == 200 and served["Content-Type"] == "image/png"
    assert isinstance(served, StreamingHttpResponse)  # a file, streamed
    assert b"".join(served.streaming_content).startswith(b"\x89PNG")
    assert escaped.status_code in (400, 404)  # nothing outside MEDIA_ROOT is served


def test_a_waiting_room_drop_gets_a_face_value_exchange_and_a_first_come_one_is_told_why_not(
    roles: None,
) -> None:
    form = add_form()
    closes = timezone.now() + timedelta(days=2)
    exchange = {"exchange_closes_at_0": closes.strftime("%Y-%m-%d"), "exchange_closes_at_1": "12:00:00"}

    client = merchant()
    refused = client.post("/admin/shop/drop/add/", {**form, **exchange, "exchange_fee_minor": "150"})

    assert refused.status_code == 200
    errors = refused.context["adminform"].form.errors
    assert "An exchange needs the waiting room" in str(errors["exchange_closes_at"])
    assert not Drop.objects.filter(slug="tees").exists()

    answer = client.post(
        "/admin/shop/drop/add/", {**form, **exchange, "exchange_fee_minor": "150", "format": "waiting_room"}
    )

    assert answer.status_code == 302, answer.context["adminform"].form.errors if answer.context else answer
    drop = Drop.objects.get(slug="tees")
    assert (drop.waiting_room, drop.exchange_fee_minor) == (True, 150)
    assert drop.exchange_closes_at is not None and drop.exchange_closes_at > drop.ends_at
