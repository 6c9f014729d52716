"""`floodgate.py run` seeds on every start: one demo drop, and the admin password stays."""

from __future__ import annotations

import stat
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from devtools.devstack import admin_password
from holds import services as holds
from shop.models import Drop
from tests.factories import make_buyer

pytestmark = pytest.mark.django_db


def seed(*args: str) -> str:
    out = StringIO()
    call_command("seed_demo", *args, stdout=out)
    return out.getvalue()


def test_restarts_add_no_second_demo_drop_and_keep_the_admin_password() -> None:
    seed("--admin-password", "first-pw-123")

    seed("--admin-password", "second-pw-456", "--keep-admin-password")
    seed("--admin-password", "third-pw-789", "--keep-admin-password")

    assert list(Drop.objects.values_list("slug", flat=True)) == ["demo-sneaker"]
    admin = get_user_model().objects.get(username="admin")
    assert admin.check_password("first-pw-123") and admin.is_superuser


def test_the_demo_is_a_sneaker_drop_as_they_are_sold_in_sizes_taxed_and_shipped() -> None:
    seed("--admin-password", "pw-pw-pw-pw")
    drop = Drop.objects.get()
    sizes = {v.name: (v.quantity, v.price_minor) for v in drop.variants.all()}
    assert list(sizes) == ["40", "41", "42", "43", "44"] and sum(q for q, _ in sizes.values()) == 100
    assert sizes["44"][1] == 13900 and sizes["40"][1] is None  # the largest costs more, the rest the base
    assert drop.product.ships and drop.product.tax_rate == 19
    zones = {zone.name: zone.countries for zone in drop.product.shipping_zones.all()}
    assert zones["Germany"] == ["DE"] and "FR" in zones["EU"]


def test_a_demo_drop_with_buyers_is_kept_as_it_is_and_not_repeated() -> None:
    seed("--admin-password", "pw-pw-pw-pw", "--starts-in", "-10")  # live already
    drop = Drop.objects.get()
    size = drop.variants.get(name="42")
    holds.reserve(drop=drop, buyer_id=make_buyer("early").pk, quantity=1, idempotency_key="k", variant=size)
    starts_at = Drop.objects.get().starts_at

    said = seed("--admin-password", "pw-pw-pw-pw", "--keep-admin-password")

    assert Drop.objects.count() == 1 and Drop.objects.get().starts_at == starts_at
    assert "kept as it is" in said
    seed("--admin-password", "pw-pw-pw-pw", "--keep-admin-password", "--new")  # asked for: another
    assert Drop.objects.count() == 2


def test_the_admin_password_is_made_once_and_readable_by_its_owner_only(tmp_path: Path) -> None:
    path = tmp_path / ".data" / "admin-password"

    first, kept_first = admin_password(path)
    again, kept_again = admin_password(path)

    assert (kept_first, kept_again) == (False, True) and first == again and len(first) >= 12
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_demo_sets_a_sample_shop_identity_and_keeps_a_merchants_own() -> None:
    from django.test import TestCase

    from shop import identity
    from shop.models import ShopSettings

    with TestCase.captureOnCommitCallbacks(execute=True):
        seed("--admin-password", "pw-pw-pw-pw")
    assert identity.current().name == "Harbour Lane Sneakers" and identity.current().is_set

    ShopSettings.objects.filter(pk=1).update(name="The Merchant's Own")
    identity.forget()
    seed("--admin-password", "pw-pw-pw-pw", "--keep-admin-password")

    assert identity.current().name == "The Merchant's Own"
