"""Stock rows follow the merchant's quantity and layout; held and sold units are never taken."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, connections
from django.db.backends.postgresql.base import DatabaseWrapper as PostgresConnection
from django.test import Client
from django.utils import timezone

from core.errors import InvalidInput
from holds import services as holds
from holds.counts import invariant
from inventory import services, sql
from inventory.models import StockBucket, Unit
from shop.models import Drop
from tests.concurrency import run_concurrently
from tests.factories import inline_rows, make_buyer, make_drop

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
        "refunded": 0,
        "exchange": 0,
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


def admin_change(drop: Drop, **changes: str) -> tuple[Client, str, dict[str, object]]:
    client = Client()
    client.force_login(get_user_model().objects.create_superuser(f"root{drop.pk}", password="pw-pw-pw-pw"))
    url = f"/admin/shop/drop/{drop.pk}/change/"
    page = client.get(url)
    form = page.context["adminform"].form
    data = {name: field.widget.format_value(form.initial.get(name)) for name, field in form.fields.items()}
    data |= inline_rows(page) | {
        "product": drop.product_id,
        "starts_at_0": drop.starts_at.strftime("%Y-%m-%d"),
        "starts_at_1": drop.starts_at.strftime("%H:%M:%S"),
        "ends_at_0": drop.ends_at.strftime("%Y-%m-%d"),
        "ends_at_1": drop.ends_at.strftime("%H:%M:%S"),
        **changes,
    }
    data = {k: v for k, v in data.items() if v is not None and v is not False}
    return client, url, data


def test_admin_change_of_quantity_moves_stock_with_it() -> None:
    drop = make_drop(slug="admin-edit", quantity=10, buckets=2, starts_at=timezone.now() + timedelta(hours=1))
    client, url, data = admin_change(drop, quantity="14", bucket_count="2")

    answer = client.post(url, data)

    assert answer.status_code == 302, answer.context["adminform"].form.errors if answer.context else answer
    assert levels(drop) == [7, 7]
    assert invariant(drop_id=drop.pk).as_json()["quantity"] == 14


def test_admin_edit_of_a_live_drop_keeps_a_pause_made_meanwhile() -> None:
    from ops import switch

    drop = make_drop(slug="live-edit", quantity=10, buckets=2)
    client, url, data = admin_change(drop, title="New title", quantity="12")
    switch.pause_drop(drop=drop, actor_id=None, reason="while the merchant was typing")

    answer = client.post(url, data)

    assert answer.status_code == 302
    saved = Drop.objects.get(pk=drop.pk)
    assert (saved.title, saved.paused, saved.quantity) == ("New title", True, 12)
    assert invariant(drop_id=drop.pk).drift == 0


def close_pool() -> None:
    """The psycopg pool emptied: the next connections are new ones."""
    pooled = connections["default"]
    assert isinstance(pooled, PostgresConnection)
    pooled.close_pool()


def race_reserves_against_quantity_changes(make_buyers) -> tuple[Drop, list[object]]:
    """300 buyers reserve on 24 threads while the merchant sets the quantity 40 times (400-406)."""
    drop = make_drop(quantity=400, buckets=8, per_buyer_limit=1)
    buyers = make_buyers(300, prefix="mid")
    jobs: list[Callable[..., object]] = [
        lambda b=b: holds.reserve(drop=drop, buyer_id=b, quantity=1, idempotency_key=uuid.uuid4().hex)
        for b in buyers
    ]
    jobs += [lambda n=n: services.change_quantity(drop=drop, quantity=400 + n % 7) for n in range(40)]
    jobs.sort(key=lambda job: hash(job) % 11)
    return drop, run_concurrently(jobs, threads=24)


def test_quantity_changes_mid_sale_race_reserves_without_deadlock(make_buyers) -> None:
    # given a live drop and a crowd, while the merchant changes the quantity again and again
    drop, results = race_reserves_against_quantity_changes(make_buyers)

    # then nothing deadlocked or failed, and the stock matches the final quantity
    assert not [r for r in results if isinstance(r, BaseException)]
    assert invariant(drop_id=drop.pk).drift == 0
    assert invariant(drop_id=drop.pk).held == 300


def test_control_a_resize_without_for_update_loses_claims(make_buyers, monkeypatch) -> None:
    """Breaks RESIZE_BUCKETS: its buckets are read without FOR UPDATE, and a 50 ms pg_sleep lies
    between its snapshot and its writes. Claims that commit meanwhile are overwritten by levels
    computed from the stale read, so units held by buyers go back on sale: available + held >
    quantity, the drift the race test asserts is 0. So that race test can fail; the bucket lock
    is what passes it.
    """
    statement = sql.RESIZE_BUCKETS
    assert " ORDER BY index FOR UPDATE\n" in statement and " AS n FROM locked\n" in statement
    broken = statement.replace(" ORDER BY index FOR UPDATE\n", " ORDER BY index\n").replace(
        " AS n FROM locked\n", " AS n FROM locked CROSS JOIN pg_sleep(0.05)\n"
    )
    monkeypatch.setattr(sql, "RESIZE_BUCKETS", broken)

    drop, results = race_reserves_against_quantity_changes(make_buyers)

    assert not [r for r in results if isinstance(r, BaseException)]
    assert invariant(drop_id=drop.pk).held == 300
    assert invariant(drop_id=drop.pk).drift < 0  # more units on sale than the drop has: oversell


@pytest.mark.slow
def test_control_a_quantity_change_locking_the_drop_for_update_deadlocks(make_buyers, monkeypatch) -> None:
    """Breaks LOCK_DROP_QUANTITY: FOR UPDATE instead of FOR NO KEY UPDATE, then a 50 ms pg_sleep
    with the lock held. A reserve that has claimed a bucket waits at commit for KEY SHARE on the
    drop (its deferred foreign key) while the resize waits for that bucket: PostgreSQL reports a
    deadlock, which the race test's "nothing failed" assertion catches. So that race test can
    fail; the weaker NO KEY UPDATE lock is what passes it.
    """
    statement = sql.LOCK_DROP_QUANTITY
    assert statement.endswith(" FOR NO KEY UPDATE")
    locked = statement.replace(" FOR NO KEY UPDATE", " FOR UPDATE")
    broken = (
        f"WITH locked AS MATERIALIZED ({locked}) "
        "SELECT quantity FROM locked CROSS JOIN LATERAL pg_sleep(0.05 + 0 * locked.quantity)"
    )
    monkeypatch.setattr(sql, "LOCK_DROP_QUANTITY", broken)
    # each deadlock is found after deadlock_timeout (1 s by default): the race's new connections
    # look sooner (the pool's open ones would not: it is emptied), so the control costs seconds
    name = connection.settings_dict["NAME"]
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER DATABASE \"{name}\" SET deadlock_timeout = '100ms'")
    close_pool()
    try:
        _drop, results = race_reserves_against_quantity_changes(make_buyers)
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f'ALTER DATABASE "{name}" RESET deadlock_timeout')
        close_pool()  # no later test inherits the short timeout

    failures = [r for r in results if isinstance(r, BaseException)]
    assert any("deadlock detected" in str(r) for r in failures), failures
