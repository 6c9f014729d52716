from __future__ import annotations

import re

import pytest
from django.test import Client

from holds.counts import invariant
from holds.models import Hold
from tests.factories import make_buyer, make_drop

pytestmark = pytest.mark.django_db


def logged_in(name: str) -> Client:
    client = Client()
    client.force_login(make_buyer(name))
    return client


def test_buy_from_the_drop_page_then_release() -> None:
    drop = make_drop(slug="page-buy", quantity=5, per_buyer_limit=2)
    client = logged_in("pat")
    page = client.get("/drops/page-buy/").content.decode()
    matched = re.search(r'name="idempotency_key" value="(\w+)"', page)
    assert matched
    key = matched.group(1)

    bought = client.post("/drops/page-buy/buy", {"quantity": "2", "idempotency_key": key})
    double_click = client.post("/drops/page-buy/buy", {"quantity": "2", "idempotency_key": key})
    hold = Hold.objects.get()
    hold_page = client.get(bought["Location"]).content.decode()

    assert bought["Location"] == double_click["Location"] == f"/holds/{hold.pk}/"
    assert "It's yours for" in hold_page and 'id="hold-countdown"' in hold_page
    client.post(f"/holds/{hold.pk}/release")
    assert Hold.objects.get().state == "released"
    assert invariant(drop_id=drop.pk).available == 5


@pytest.mark.parametrize("quantity", ["0", "-1", "abc", "1000000000", ""])
def test_bad_quantity_from_the_page_says_why_and_holds_nothing(quantity: str) -> None:
    make_drop(slug="page-bad", quantity=5, per_buyer_limit=2)
    client = logged_in("quinn")

    answer = client.post("/drops/page-bad/buy", {"quantity": quantity, "idempotency_key": "k"}, follow=True)

    assert answer.redirect_chain[-1][0] == "/drops/page-bad/"
    assert b'class="notice error"' in answer.content
    assert not Hold.objects.exists()


def test_another_buyers_hold_page_is_404() -> None:
    make_drop(slug="page-own", quantity=5)
    owner = logged_in("rita")
    owner.post("/drops/page-own/buy", {"quantity": "1", "idempotency_key": "k"})
    hold = Hold.objects.get()

    assert logged_in("sam").get(f"/holds/{hold.pk}/").status_code == 404
    assert logged_in("tom").post(f"/holds/{hold.pk}/release").status_code == 404
    assert Hold.objects.get().state == "held"


def test_buying_needs_a_login() -> None:
    make_drop(slug="page-anon", quantity=5)

    answer = Client().post("/drops/page-anon/buy", {"quantity": "1", "idempotency_key": "k"})

    assert answer.status_code == 302 and "/accounts/login/" in answer["Location"]
    assert b"Log in to buy" in Client().get("/drops/page-anon/").content


@pytest.mark.parametrize("unit", ["A%00", "A%ED%A0%80"], ids=["NUL", "an encoded lone surrogate"])
def test_a_unit_label_with_nul_from_the_form_says_why_and_holds_nothing(unit: str) -> None:
    drop = make_drop(slug="page-seat", quantity=3, mode="units", unit_labels=["A1", "A2", "A3"])
    client = logged_in("nul")

    answer = client.post(
        "/drops/page-seat/buy",
        f"quantity=1&idempotency_key=k&unit={unit}",
        content_type="application/x-www-form-urlencoded",
        follow=True,
    )

    assert answer.redirect_chain[-1][0] == "/drops/page-seat/"
    assert b'class="notice error"' in answer.content
    assert not Hold.objects.exists()
    assert invariant(drop_id=drop.pk).available == 3
