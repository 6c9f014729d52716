"""A SKU names a file (the product's drawing) and a CSV cell: only a safe alphabet is accepted,
in the admin, in scripts and by the database, and the migration renames what came before."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.db import IntegrityError, connection, transaction
from django.test import Client

from catalogue.services import create_drop
from core.errors import InvalidInput
from shop.models import SKU_MESSAGE, Product
from tests.factories import make_drop, merchant

pytestmark = pytest.mark.django_db

TRAVERSAL = "../../etc/passwd"


def product_form(sku: str) -> dict[str, str]:
    return {"sku": sku, "name": "Tee", "description": "", "currency": "EUR", "image_url": "", "price": "25"}


@pytest.mark.parametrize("sku", [TRAVERSAL, "a/b", ".hidden", "-x", "TEE BLK", "tée", "x\\y", ""])
def test_the_admin_refuses_a_sku_outside_the_safe_alphabet_and_saves_nothing(roles: None, sku: str) -> None:
    answer = merchant().post("/admin/shop/product/add/", product_form(sku))

    assert answer.status_code == 200
    errors = answer.context["adminform"].form.errors["sku"]
    assert errors == [SKU_MESSAGE] or (sku == "" and errors == ["This field is required."])
    assert not Product.objects.exists()


@pytest.mark.parametrize("sku", ["TEE-BLK-42", "shoe_42.5", "A1"])
def test_the_admin_takes_an_ordinary_sku(roles: None, sku: str) -> None:
    assert merchant().post("/admin/shop/product/add/", product_form(sku)).status_code == 302
    assert Product.objects.get().sku == sku


def test_scripts_are_refused_with_the_same_message() -> None:
    drop = make_drop(slug="ok")

    with pytest.raises(InvalidInput, match="A SKU may use letters"):
        create_drop(
            slug="bad", quantity=1, starts_at=drop.starts_at, ends_at=drop.ends_at,
            product_sku=TRAVERSAL, product_name="Bad", price_minor=100,
        )  # fmt: skip
    assert not Product.objects.filter(sku=TRAVERSAL).exists()


def test_the_database_refuses_one_written_around_the_model() -> None:
    make_drop(slug="raw")

    with pytest.raises(IntegrityError, match="shop_product_sku_safe"), transaction.atomic():
        Product.objects.update(sku=TRAVERSAL)


def test_the_migration_renames_unsafe_skus_uniquely_and_the_storefront_lists_them() -> None:
    make_drop(slug="tees", product_sku="TEE")
    with connection.cursor() as cursor:  # as before the migration (rolled back with the test)
        cursor.execute("ALTER TABLE shop_product DROP CONSTRAINT shop_product_sku_safe")
        for sku in (TRAVERSAL, "etc-passwd", "../etc/passwd"):
            cursor.execute(
                "INSERT INTO shop_product (sku, name, description, price_minor, currency, image, image_url)"
                " VALUES (%s, 'Old', '', 100, 'EUR', '', '')",
                [sku],
            )
    migration = importlib.import_module("shop.migrations.0009_product_sku_safe")

    migration.clean_skus(apps, None)

    assert sorted(Product.objects.values_list("sku", flat=True)) == [
        "TEE", "etc-passwd", "etc-passwd-2", "etc-passwd-3",
    ]  # fmt: skip
    assert Client().get("/").status_code == 200
