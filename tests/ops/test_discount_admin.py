"""Discount codes in the admin: a merchant makes N at once and sees them to copy; bad input is a
form error that makes nothing; codes are never edited."""

from __future__ import annotations

import pytest
from django.test import Client

from holds.models import DiscountCode
from tests.factories import make_drop, staff

pytestmark = pytest.mark.django_db

ADD = "/admin/holds/discountcode/add/"


def merchant() -> Client:
    client = Client()
    client.force_login(staff("mona", "Merchants"))
    return client


def form(**values: object) -> dict[str, object]:
    return {
        "drop": "",
        "count": "1",
        "percent": "",
        "amount_minor": "",
        "currency": "",
        "max_uses": "1",
        **values,
    }


def test_a_merchant_makes_codes_for_a_drop_and_for_the_whole_shop(roles: None) -> None:
    drop = make_drop(price_minor=2500)
    client = merchant()

    for_drop = client.post(ADD, form(drop=str(drop.pk), count="30", percent="15", max_uses="2"))
    shop_wide = client.post(ADD, form(count="2", amount_minor="500", currency="eur"))

    assert for_drop.status_code == 200 and "30 discount codes made" in for_drop.content.decode()
    shown = for_drop.context["made"].split()
    assert len(shown) == 30 and set(shown) == set(
        DiscountCode.objects.filter(drop=drop).values_list("code", flat=True)
    )
    assert {(c.percent, c.max_uses, c.uses) for c in DiscountCode.objects.filter(drop=drop)} == {(15, 2, 0)}
    assert shop_wide.status_code == 200
    assert {(c.amount_minor, c.currency) for c in DiscountCode.objects.filter(drop=None)} == {(500, "EUR")}
    listed = client.get("/admin/holds/discountcode/")
    assert listed.status_code == 200 and shown[0] in listed.content.decode()


@pytest.mark.parametrize(
    "values",
    [
        {"percent": "15", "amount_minor": "500"},  # both
        {},  # neither
        {"percent": "100"},
        {"percent": "0"},
        {"percent": "ten"},
        {"amount_minor": "-1"},
        {"amount_minor": "500"},  # shop-wide, no currency
        {"amount_minor": "500", "currency": "\x00"},
        {"count": "0", "percent": "10"},
        {"count": "10001", "percent": "10"},
        {"percent": "10", "max_uses": "0"},
        {"percent": "10", "starts_at": "2026-01-02 00:00", "ends_at": "2026-01-01 00:00"},
        {"percent": "10", "starts_at": "not a time"},
        {"percent": "10", "drop": "999999"},
    ],
)
def test_bad_input_is_a_form_error_and_makes_nothing(roles: None, values: dict[str, str]) -> None:
    make_drop()

    answer = merchant().post(ADD, form(**values))

    assert answer.status_code == 200 and "errorlist" in answer.content.decode()
    assert not DiscountCode.objects.exists()


def test_staff_without_the_permission_cannot_make_codes(roles: None) -> None:
    client = Client()
    client.force_login(staff("olaf", "On-call"))

    assert client.post(ADD, form(percent="10")).status_code == 403
    assert client.get("/admin/holds/discountcode/").status_code == 200  # On-call may look
    assert not DiscountCode.objects.exists()
