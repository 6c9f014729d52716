"""A drop's variants in the admin: typed inline on add, their stock laid out per variant; on change
each quantity moves its own stock (never below held and sold), rows added or removed only before
the start; bad rows are form errors that write nothing, and so is a stock change the services
refuse at the save (a buyer came between the form's check and the save)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.db import connection
from django.test import Client
from django.utils import timezone

from catalogue import services as catalogue
from catalogue.services import NewVariant
from holds import presale
from holds import services as holds
from holds.counts import invariant, invariant_by_variant
from inventory.models import StockBucket
from shop.models import Drop, Product, Variant
from tests.factories import inline_rows, make_buyer, make_drop, merchant

pytestmark = pytest.mark.django_db


def rows(*variants: tuple[str, str, str]) -> dict[str, str]:
    """The inline's rows on the add page: (name, quantity, price) each."""
    data = {"variants-TOTAL_FORMS": str(len(variants)), "variants-INITIAL_FORMS": "0"}
    for n, (name, quantity, price) in enumerate(variants):
        data |= {f"variants-{n}-name": name, f"variants-{n}-quantity": quantity, f"variants-{n}-price": price}
    return data


def add_form(*variants: tuple[str, str, str], **changes: str) -> dict[str, str]:
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
        "quantity": "",
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
        **rows(*variants),
        **changes,
    }


def errors(answer: object) -> list[str]:
    """Every error the add or change page shows: the drop's form and the variants' rows."""
    context = answer.context  # type: ignore[attr-defined]
    found = [str(e) for field in context["adminform"].form.errors.values() for e in field]
    for inline in context["inline_admin_formsets"]:
        found += [str(e) for e in inline.formset.non_form_errors()]
        found += [str(e) for form in inline.formset.errors for field in form.values() for e in field]
    return found


def test_a_drop_of_sizes_is_added_with_each_sizes_stock(roles: None) -> None:
    answer = merchant().post(
        "/admin/shop/drop/add/", add_form(("S", "4", ""), ("M", "10", ""), ("L", "6", "29.90"))
    )

    assert answer.status_code == 302, errors(answer) if answer.context else answer
    drop = Drop.objects.get(slug="tees")
    assert drop.quantity == 20  # the quantity left empty: their sum
    sizes = [(v.name, v.quantity, v.price_minor) for v in drop.variants.all()]
    assert sizes == [("S", 4, None), ("M", 10, None), ("L", 6, 2990)]
    levels = {
        v.name: sorted(StockBucket.objects.filter(variant=v).values_list("available", flat=True))
        for v in drop.variants.all()
    }
    assert levels == {"S": [2, 2], "M": [5, 5], "L": [3, 3]}
    assert LogEntry.objects.get(object_id=str(drop.pk)).action_flag == ADDITION
    assert invariant(drop_id=drop.pk).drift == 0


def test_no_rows_is_one_stock_as_before(roles: None) -> None:
    answer = merchant().post("/admin/shop/drop/add/", add_form(quantity="8"))

    assert answer.status_code == 302
    assert [(v.name, v.quantity) for v in Drop.objects.get(slug="tees").variants.all()] == [("", 8)]


@pytest.mark.parametrize(
    ("variants", "changes", "error"),
    [
        ((("M", "4", ""), ("M", "6", "")), {}, "duplicate"),
        ((("S", "0", ""), ("M", "6", "")), {}, "A variant needs at least 1 unit."),
        ((("S", "-3", ""), ("M", "6", "")), {}, "A variant needs at least 1 unit."),
        ((("S\x00", "4", ""), ("M", "6", "")), {}, "Null characters are not allowed."),
        ((("S" * 41, "4", ""), ("M", "6", "")), {}, "at most 40 characters"),
        ((("S", "4", "abc"), ("M", "6", "")), {}, "Enter a number."),
        ((("S", "4", "-1"), ("M", "6", "")), {}, "greater than or equal to 0"),
        ((("S", "4", ""), ("", "6", "")), {}, "Each variant needs a name of its own (e.g. S, M, L)."),
        ((("S", "1", ""), ("M", "6", "")), {}, "Each variant needs at least 2 units, one per bucket."),
        ((("S", "4", ""), ("M", "6", "")), {"quantity": "12"}, "The variants add up to 10 units, not the"),
        ((("S", "4", ""), ("M", "6", "")), {"redis_gate": "on"}, "The Redis gate counts one stock"),
        (
            (("S", "2", ""), ("M", "2", "")),
            {"inventory_mode": "units", "bucket_count": "1", "unit_labels": "A1-A4"},
            "Unit labels can be given for a drop of one variant",
        ),
        ((), {}, "Give the drop's quantity above, or its variants here."),
    ],
)
def test_bad_rows_are_form_errors_and_write_nothing(
    roles: None, variants: tuple[tuple[str, str, str], ...], changes: dict[str, str], error: str
) -> None:
    answer = merchant().post("/admin/shop/drop/add/", add_form(*variants, **changes))

    assert answer.status_code == 200
    assert any(error in shown for shown in errors(answer)), errors(answer)
    assert not Drop.objects.filter(slug="tees").exists() and not Variant.objects.exists()


def sized(*, starts_in: timedelta = timedelta(hours=1), **options: Any) -> Drop:
    starts = timezone.now() + starts_in
    variants = [NewVariant("S", 4), NewVariant("M", 10), NewVariant("L", 6)]
    return make_drop(quantity=20, variants=variants, buckets=2, starts_at=starts, **options)


def change(drop: Drop, **changes: str) -> tuple[Client, str, dict[str, object]]:
    """The change page's form as shown, with changes (field names as posted)."""
    client = merchant()
    url = f"/admin/shop/drop/{drop.pk}/change/"
    page = client.get(url)
    form = page.context["adminform"].form
    data: dict[str, object] = {
        name: field.widget.format_value(form.initial.get(name)) for name, field in form.fields.items()
    }
    data |= inline_rows(page) | {
        "product": drop.product_id,
        "starts_at_0": drop.starts_at.strftime("%Y-%m-%d"),
        "starts_at_1": drop.starts_at.strftime("%H:%M:%S"),
        "ends_at_0": drop.ends_at.strftime("%Y-%m-%d"),
        "ends_at_1": drop.ends_at.strftime("%H:%M:%S"),
        **changes,
    }
    return client, url, {k: v for k, v in data.items() if v is not None and v is not False}


def sizes(drop: Drop) -> list[tuple[str, int]]:
    return [(v.name, v.quantity) for v in Variant.objects.filter(drop=drop)]


def test_a_sizes_quantity_moves_its_own_stock_and_the_drops_total(roles: None) -> None:
    drop = sized(starts_in=-timedelta(minutes=1))  # live: quantities change while it sells
    client, url, data = change(drop, **{"variants-1-quantity": "14"})

    page = client.get(url).content.decode()
    answer = client.post(url, data)

    assert 'name="quantity"' not in page  # the sum, read-only
    assert answer.status_code == 302, errors(answer) if answer.context else answer
    assert sizes(drop) == [("S", 4), ("M", 14), ("L", 6)]
    assert Drop.objects.get(pk=drop.pk).quantity == 24
    assert all(v.drift == 0 for v in invariant_by_variant(drop_id=drop.pk))
    assert invariant(drop_id=drop.pk).drift == 0


def test_a_size_cannot_go_below_what_is_held(roles: None) -> None:
    drop = sized(starts_in=-timedelta(minutes=1), per_buyer_limit=5)
    m = drop.variants.get(name="M")
    holds.reserve(drop=drop, buyer_id=make_buyer().pk, quantity=5, idempotency_key="k", variant=m)
    client, url, data = change(drop, **{"variants-1-quantity": "4"})

    answer = client.post(url, data)

    assert answer.status_code == 200 and "M's quantity cannot go below 5." in errors(answer)
    assert sizes(drop) == [("S", 4), ("M", 10), ("L", 6)]


def test_sizes_are_added_and_removed_before_the_start(roles: None) -> None:
    drop = sized()
    client, url, data = change(
        drop,
        **{
            "variants-0-DELETE": "on",
            "variants-3-name": "XL",
            "variants-3-quantity": "2",
            "variants-3-price": "30",
        },
    )

    answer = client.post(url, data)

    assert answer.status_code == 302, errors(answer) if answer.context else answer
    assert sizes(drop) == [("M", 10), ("L", 6), ("XL", 2)]
    assert Variant.objects.get(drop=drop, name="XL").price_minor == 3000
    assert Drop.objects.get(pk=drop.pk).quantity == 18
    assert all(v.drift == 0 for v in invariant_by_variant(drop_id=drop.pk))


def test_a_drop_of_one_stock_gets_sizes_before_the_start(roles: None) -> None:
    drop = make_drop(quantity=6, starts_at=timezone.now() + timedelta(hours=1))
    client, url, data = change(
        drop,
        **{
            "variants-0-name": "S",
            "variants-0-quantity": "3",
            "variants-1-name": "M",
            "variants-1-quantity": "5",
        },
    )

    answer = client.post(url, data)

    assert answer.status_code == 302, errors(answer) if answer.context else answer
    assert sizes(drop) == [("S", 3), ("M", 5)] and Drop.objects.get(pk=drop.pk).quantity == 8


@pytest.mark.parametrize(
    "changes",
    [
        # the page offers no empty row once the sale started: a forged one is still refused
        {"variants-TOTAL_FORMS": "4", "variants-3-name": "XL", "variants-3-quantity": "2"},
        {"variants-0-name": "XS"},
    ],
    ids=["added", "renamed"],
)
def test_sizes_are_fixed_once_the_sale_started(roles: None, changes: dict[str, str]) -> None:
    drop = sized(starts_in=-timedelta(minutes=1))
    client, url, data = change(drop, **changes)

    answer = client.post(url, data)

    assert answer.status_code == 200
    assert any("only before the sale starts" in e for e in errors(answer)), errors(answer)
    assert sizes(drop) == [("S", 4), ("M", 10), ("L", 6)]


def test_a_started_drop_offers_no_new_rows_and_no_delete(roles: None) -> None:
    drop = sized(starts_in=-timedelta(minutes=1))
    client, url, data = change(drop, **{"variants-0-DELETE": "on"})

    page = client.get(url).content.decode()
    answer = client.post(url, data)  # a forged DELETE is not Django's to act on: nothing removed

    assert 'name="variants-0-DELETE"' not in page and 'name="variants-3-name"' not in page
    assert answer.status_code == 302 and sizes(drop) == [("S", 4), ("M", 10), ("L", 6)]


def test_the_redis_gate_is_refused_on_a_drop_of_sizes(roles: None) -> None:
    drop = sized()
    client, url, data = change(drop, redis_gate="on")

    answer = client.post(url, data)

    assert answer.status_code == 200
    assert any("The Redis gate counts one stock" in e for e in errors(answer)), errors(answer)
    assert Drop.objects.get(pk=drop.pk).redis_gate is False


def meanwhile(
    monkeypatch: pytest.MonkeyPatch, others: Callable[[], object], service: str = "change_drop"
) -> None:
    """The admin's save runs `others` on their own connection (committed) just before its one
    service call: what buyers or other merchants do between the form's check and the save."""
    real = getattr(catalogue, service)

    def on_its_own_connection() -> None:
        try:
            others()
        finally:
            connection.close()

    def late(**kwargs: Any) -> object:
        monkeypatch.setattr(catalogue, service, real)  # once: `others` may call it too
        with ThreadPoolExecutor(1) as pool:
            pool.submit(on_its_own_connection).result()
        return real(**kwargs)

    monkeypatch.setattr(catalogue, service, late)


@pytest.mark.django_db(transaction=True)  # the other merchant's drop is on its own connection
def test_a_drop_refused_at_the_save_is_not_created(roles: None, monkeypatch: pytest.MonkeyPatch) -> None:
    meanwhile(monkeypatch, lambda: make_drop(slug="tees", quantity=3), service="create_drop")

    answer = merchant().post("/admin/shop/drop/add/", add_form(("S", "4", ""), ("M", "6", "")))

    assert answer.status_code == 200
    assert any("slug" in e and "already exists" in e for e in errors(answer)), errors(answer)
    assert Drop.objects.get(slug="tees").quantity == 3  # the other merchant's, alone
    assert not Variant.objects.filter(name__in=["S", "M"]).exists()
    assert not LogEntry.objects.filter(action_flag=ADDITION).exists()


@pytest.mark.django_db(transaction=True)  # the buyers hold units on their own connection
def test_a_stock_change_refused_at_the_save_saves_nothing_and_says_why(
    roles: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    drop = make_drop(quantity=10, per_buyer_limit=2)  # on sale
    first, second = make_buyer(), make_buyer()
    client, url, data = change(drop, quantity="3", title="Renamed")

    def two_buyers_hold_two_each() -> None:
        for buyer in (first, second):
            holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=2, idempotency_key=f"k{buyer.pk}")

    meanwhile(monkeypatch, two_buyers_hold_two_each)
    answer = client.post(url, data)

    assert answer.status_code == 200  # the form again, not a redirect
    assert any(e.startswith("Stock not changed: Cannot remove 7 units") for e in errors(answer)), errors(
        answer
    )
    saved = Drop.objects.get(pk=drop.pk)
    assert (saved.title, saved.quantity) == (drop.title, 10)  # the title did not go in alone
    assert not LogEntry.objects.filter(object_id=str(drop.pk), action_flag=CHANGE).exists()
    numbers = invariant(drop_id=drop.pk)
    assert (numbers.held, numbers.available, numbers.drift) == (4, 6, 0)


@pytest.mark.django_db(transaction=True)  # the buyer holds a size on their own connection
def test_sizes_refused_at_the_save_are_as_they_were(roles: None, monkeypatch: pytest.MonkeyPatch) -> None:
    drop = sized(starts_in=timedelta(hours=1), presale_starts_at=timezone.now() - timedelta(minutes=1))
    client, url, data = change(drop, **{"variants-0-DELETE": "on", "variants-1-quantity": "12"})

    (code,) = presale.generate_codes(drop=drop, count=1)
    small, buyer = Variant.objects.get(drop=drop, name="S"), make_buyer()

    def a_presale_buyer_holds_a_small() -> None:
        holds.reserve(
            drop=drop,
            buyer_id=buyer.pk,
            quantity=1,
            idempotency_key="s",
            variant=small,
            presale_code=code.code,
        )

    meanwhile(monkeypatch, a_presale_buyer_holds_a_small)
    answer = client.post(url, data)

    assert answer.status_code == 200
    assert any(e.startswith("Stock not changed: ") for e in errors(answer)), errors(answer)
    assert sizes(drop) == [("S", 4), ("M", 10), ("L", 6)]
    assert Drop.objects.get(pk=drop.pk).quantity == 20
    assert all(v.drift == 0 for v in invariant_by_variant(drop_id=drop.pk))
