"""Discount codes at both doors (the API through the real ASGI application, the hold page), in the
payment's amount, and from the discount_codes command; every refusal a clear 4xx that changes nothing."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from checkout import services as checkout
from checkout.models import Order
from holds import discounts, services
from holds.counts import invariant
from holds.models import DiscountCode, Hold
from shop import pricing
from shop.models import Drop
from tests.conftest import PROVIDER_SECRET, WEBHOOK_SECRET
from tests.factories import make_buyer, make_drop
from tests.harness import Reply, bearer, call, reserve_headers, run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_edge")]


def taxed(slug: str = "deal", **options: Any) -> Drop:
    return make_drop(
        slug=slug, quantity=5, price_minor=999, tax_rate=Decimal("19"), per_buyer_limit=3, **options
    )


def codes(drop: Drop | None, count: int = 1, **terms: object) -> list[DiscountCode]:
    terms.setdefault("percent", 10)
    return discounts.generate_codes(drop=drop, count=count, terms=discounts.Terms(**terms))  # type: ignore[arg-type]


def claim(slug: str, auth: dict[str, str], body: dict[str, object], key: str = "k1") -> Reply:
    raw = json.dumps(body).encode()
    return run(lambda: call("POST", f"/api/drops/{slug}/holds", headers=reserve_headers(auth, key), body=raw))


def test_a_code_sent_with_the_reserve_is_spent_and_the_answer_says_the_price_after_it(settings) -> None:
    settings.PRICES_INCLUDE_TAX = False
    drop = taxed()
    (code,) = codes(drop)
    auth = bearer("saver")

    reply = claim("deal", auth, {"quantity": 3, "discount_code": code.code.lower()})
    again = claim("deal", auth, {"quantity": 3, "discount_code": code.code})
    other = claim("deal", auth, {"quantity": 3}, key="k1")

    # 3 x 9.99 = 29.97, 10% off = 3.00 (half-up of 2.997), 26.97 net + 19% tax 5.12 = 32.09
    assert reply.status == 201, reply.body
    assert reply.headers.get("x-floodgate-lane") == "hit"  # the lane's single claim, not Django's path
    assert reply.json()["discount"] == {
        "code": code.code,
        "off_minor": 300,
        "gross_minor": 3209,
        "currency": "EUR",
    }
    assert again.status == 200 and again.json()["id"] == reply.json()["id"]
    assert again.json()["discount"]["off_minor"] == 300
    assert (other.status, other.json()["error"]) == (422, "idempotency_key_reused")  # not a silent swap
    assert DiscountCode.objects.get(pk=code.pk).uses == 1
    assert Hold.objects.get(drop=drop).discount_code_id == code.pk


def test_a_reserve_without_a_code_answers_as_before_and_asks_nothing_about_codes(make_buyers) -> None:
    drop = make_drop(quantity=10, per_buyer_limit=1)
    one, two = make_buyers(2, prefix="plain")

    with CaptureQueriesContext(connection) as single:
        made = services.reserve(drop=drop, buyer_id=one, quantity=1, idempotency_key="a")
    assert made.hold.variant is not None  # a drop has its one variant at least
    ask = services.ask(drop=drop, variant=made.hold.variant, buyer_id=two, quantity=1, idempotency_key="b")
    with CaptureQueriesContext(connection) as batch:
        (batched,) = services.reserve_batch(drop=drop, asks=[ask])

    assert isinstance(batched, services.Reservation)
    seen = [q["sql"] for q in [*single.captured_queries, *batch.captured_queries]]
    assert not [sql for sql in seen if "discount" in sql.lower()]
    from holds.selectors import hold_json

    assert "discount" not in hold_json(made.hold, units=made.units, new=True)


def refusal_cases() -> list[tuple[str, object, int, str]]:
    return [
        ("unknown", "NOSUCHCODE", 422, "invalid_discount_code"),
        ("used", "USED", 409, "discount_code_used"),
        ("expired", "OVER", 410, "discount_code_expired"),
        ("not yet", "LATER", 425, "discount_code_not_started"),
        ("another drop's", "ELSEWHERE", 422, "discount_code_not_for_drop"),
        ("an amount in another currency", "DOLLARS", 422, "discount_code_not_for_drop"),
        ("a number", 12345, 422, "invalid_discount_code"),
        ("a list", ["A"], 422, "invalid_discount_code"),
        ("an object", {"code": "A"}, 422, "invalid_discount_code"),
        ("true", True, 422, "invalid_discount_code"),
        ("too long", "A" * 500, 422, "invalid_discount_code"),
        ("unicode", "CAF\u00c9", 422, "invalid_discount_code"),
        ("NUL", "AB\u0000", 422, "invalid_discount_code"),
        ("a lone surrogate", "AB\ud800", 422, "invalid_discount_code"),
        ("SQL", "A' OR '1'='1", 422, "invalid_discount_code"),
    ]


def named_codes(drop: Drop) -> None:
    """Codes in every state the refusals need, under fixed names."""
    now = timezone.now()
    elsewhere = make_drop(slug="elsewhere", quantity=1)
    rows = [
        DiscountCode(code="USED", drop=drop, percent=10, max_uses=1, uses=1),
        DiscountCode(code="OVER", drop=drop, percent=10, ends_at=now - timedelta(minutes=1)),
        DiscountCode(code="LATER", drop=None, percent=10, starts_at=now + timedelta(hours=1)),
        DiscountCode(code="ELSEWHERE", drop=elsewhere, percent=10),
        DiscountCode(code="DOLLARS", drop=None, amount_minor=500, currency="USD"),
    ]
    DiscountCode.objects.bulk_create(rows)


@pytest.mark.parametrize(
    ("case", "value", "status", "code"), refusal_cases(), ids=[c[0] for c in refusal_cases()]
)
def test_a_code_the_api_cannot_use_is_refused_clearly_and_nothing_is_held(
    case: str, value: object, status: int, code: str
) -> None:
    drop = taxed()
    named_codes(drop)
    before = dict(DiscountCode.objects.values_list("code", "uses"))

    reply = claim("deal", bearer("hopeful"), {"quantity": 1, "discount_code": value})

    assert (reply.status, reply.json()["error"]) == (status, code), (case, reply.body)
    assert reply.json()["detail"]
    assert not Hold.objects.exists() and invariant(drop_id=drop.pk).available == 5
    assert dict(DiscountCode.objects.values_list("code", "uses")) == before


def test_a_shop_wide_code_works_in_any_drop_and_an_amount_comes_off_the_line(settings) -> None:
    settings.PRICES_INCLUDE_TAX = True
    taxed("one")
    taxed("two")
    (shared,) = codes(None, max_uses=2)
    (amount,) = discounts.generate_codes(
        drop=None, count=1, terms=discounts.Terms(amount_minor=500), currency="EUR"
    )

    first = claim("one", bearer("a"), {"quantity": 1, "discount_code": shared.code})
    second = claim("two", bearer("b"), {"quantity": 1, "discount_code": shared.code})
    third = claim("two", bearer("c"), {"quantity": 1, "discount_code": amount.code})

    assert (first.status, second.status, third.status) == (201, 201, 201)
    assert first.json()["discount"]["gross_minor"] == 899  # 9.99 - 1.00, tax inside
    assert third.json()["discount"] == {
        "code": amount.code,
        "off_minor": 500,
        "gross_minor": 499,
        "currency": "EUR",
    }


@pytest.fixture
def provider(settings, payment_provider: str) -> Iterator[str]:
    settings.PAYMENT_PROVIDER_URL = payment_provider
    settings.PAYMENT_PROVIDER_SECRET = PROVIDER_SECRET
    settings.PAYMENT_WEBHOOK_SECRET = WEBHOOK_SECRET
    yield payment_provider


def page_hold(drop: Drop) -> tuple[User, Hold, Client]:
    buyer = make_buyer()
    hold = services.reserve(drop=drop, buyer_id=buyer.pk, quantity=3, idempotency_key="k").hold
    client = Client()
    client.force_login(buyer)
    return buyer, hold, client


@pytest.mark.parametrize(
    ("included", "net", "tax", "gross"), [(False, 2697, 512, 3209), (True, 2266, 431, 2697)]
)
def test_a_code_on_the_hold_page_lowers_the_payment_with_tax_on_the_discounted_price(
    settings, provider: str, included: bool, net: int, tax: int, gross: int
) -> None:
    settings.PRICES_INCLUDE_TAX = included
    drop = taxed()
    (code,) = codes(drop)
    buyer, hold, client = page_hold(drop)
    assert 'id="discount-form"' in client.get(f"/holds/{hold.pk}/").content.decode()

    applied = client.post(f"/holds/{hold.pk}/discount", {"discount_code": code.code})
    page = client.get(f"/holds/{hold.pk}/").content.decode()
    started = checkout.start_payment(hold_id=hold.pk, buyer_id=buyer.pk)

    assert applied.status_code == 302
    assert 'id="discount"' in page and code.code in page and 'id="discount-form"' not in page
    order = Order.objects.get(pk=started.order.pk)
    assert (order.net_minor, order.tax_minor, order.amount_minor) == (net, tax, gross)
    assert started.payment.amount_minor == gross
    api = client.get(f"/api/holds/{hold.pk}").json()
    assert api["discount"] == {"code": code.code, "off_minor": 300, "gross_minor": gross, "currency": "EUR"}


def test_no_code_is_taken_once_payment_started_and_the_code_stays_unspent(settings, provider: str) -> None:
    drop = taxed()
    (code,) = codes(drop)
    buyer, hold, client = page_hold(drop)
    checkout.start_payment(hold_id=hold.pk, buyer_id=buyer.pk)

    refused = client.post(f"/holds/{hold.pk}/discount", {"discount_code": code.code}, follow=True)

    assert "cannot take a discount code now" in refused.content.decode()
    assert DiscountCode.objects.get(pk=code.pk).uses == 0
    assert Hold.objects.get(pk=hold.pk).discount_code_id is None


@pytest.mark.parametrize("value", ["NOSUCHCODE", "", "AB\x00", "A" * 500, "USED", "ELSEWHERE"])
def test_a_code_the_hold_page_cannot_use_leaves_the_hold_as_it_was(value: str) -> None:
    drop = taxed()
    named_codes(drop)
    _, hold, client = page_hold(drop)
    before = dict(DiscountCode.objects.values_list("code", "uses"))

    answer = client.post(f"/holds/{hold.pk}/discount", {"discount_code": value}, follow=True)

    assert answer.status_code == 200 and 'class="notice error"' in answer.content.decode()
    assert Hold.objects.get(pk=hold.pk).discount_code_id is None
    assert dict(DiscountCode.objects.values_list("code", "uses")) == before


def test_another_buyers_hold_is_not_found_and_a_code_is_not_spent() -> None:
    drop = taxed()
    (code,) = codes(drop)
    _, hold, _ = page_hold(drop)
    stranger = Client()
    stranger.force_login(make_buyer())

    assert stranger.post(f"/holds/{hold.pk}/discount", {"discount_code": code.code}).status_code == 404
    assert stranger.get(f"/holds/{hold.pk}/discount").status_code == 405
    assert DiscountCode.objects.get(pk=code.pk).uses == 0


def test_a_discount_never_makes_a_line_free() -> None:
    assert pricing.discount(999, pricing.Off(amount_minor=5000)) == 998
    assert pricing.discount(1, pricing.Off(percent=99)) == 0
    assert pricing.discount(1000, pricing.Off(percent=15)) == 150


def test_the_command_prints_one_code_a_line_for_a_drop_or_every_drop() -> None:
    drop = taxed()
    out = io.StringIO()
    call_command("discount_codes", "deal", "--count", "3", "--percent", "20", "--uses", "2", stdout=out)
    shop_wide = io.StringIO()
    call_command(
        "discount_codes",
        "--all-drops",
        "--count",
        "2",
        "--amount-minor",
        "300",
        "--currency",
        "eur",
        stdout=shop_wide,
    )

    printed = out.getvalue().split()
    assert len(printed) == 3 and len(set(printed)) == 3
    made = DiscountCode.objects.filter(code__in=printed)
    assert {(c.drop_id, c.percent, c.max_uses, c.uses) for c in made} == {(drop.pk, 20, 2, 0)}
    assert {
        (c.drop_id, c.amount_minor, c.currency)
        for c in DiscountCode.objects.filter(code__in=shop_wide.getvalue().split())
    } == {(None, 300, "EUR")}


@pytest.mark.parametrize(
    "args",
    [
        ["--count", "1", "--percent", "10"],  # neither a drop nor --all-drops
        ["deal", "--all-drops", "--count", "1", "--percent", "10"],
        ["nosuch", "--count", "1", "--percent", "10"],
        ["deal", "--count", "0", "--percent", "10"],
        ["deal", "--count", "1", "--percent", "100"],
        ["deal", "--count", "1", "--percent", "0"],
        ["deal", "--count", "1", "--amount-minor", "-5"],
        ["deal", "--count", "1", "--percent", "10", "--uses", "0"],
        ["--all-drops", "--count", "1", "--amount-minor", "100"],  # no currency
        ["--all-drops", "--count", "1", "--amount-minor", "100", "--currency", "E1"],
        ["deal", "--count", "1", "--percent", "10", "--starts", "yesterday"],
        [
            "deal",
            "--count",
            "1",
            "--percent",
            "10",
            "--starts",
            "2026-01-02T00:00:00+00:00",
            "--ends",
            "2026-01-01T00:00:00+00:00",
        ],
    ],
)
def test_the_command_refuses_bad_arguments_and_makes_nothing(args: list[str]) -> None:
    taxed()

    with pytest.raises(CommandError):
        call_command("discount_codes", *args, stdout=io.StringIO())

    assert not DiscountCode.objects.exists()
