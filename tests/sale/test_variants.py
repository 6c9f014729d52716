"""A drop of several variants: each variant's stock is its own, claimed by one conditional
statement, and the per-buyer limit counts across them. Races over the lane (the real ASGI
application in this process) and over a real daphne process."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from typing import Any

import pytest
from django.test import Client, override_settings

from admission import state
from catalogue.services import NewVariant, create_buyers
from checkout.models import Order
from core.errors import LimitReached
from holds import services as holds
from holds.counts import invariant, invariant_by_variant
from holds.models import Hold, HoldState
from inventory import sql as stock_sql
from tests.crowd import Answer, Session, crowd
from tests.factories import make_buyer, make_drop
from tests.harness import Reply, bearer, call, reserve_headers, run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_edge")]

SIZES = ("S", "M", "L", "XL")
PER_SIZE = 25
BUYERS = 2000
# Uneven demand, as a real drop's: a claim that ignored its variant would take other sizes' units
# for the buyers of a size whose own ran out, and some size would hold more than it has.
DEMAND = {"S": 300, "M": 900, "L": 500, "XL": 300}


def four_sizes(slug: str, **options: Any):
    variants = [NewVariant(size, PER_SIZE) for size in SIZES]
    return make_drop(
        slug=slug, quantity=PER_SIZE * len(SIZES), variants=variants, per_buyer_limit=1, **options
    )


def wishes() -> list[str]:
    sizes = [size for size, n in DEMAND.items() for _ in range(n)]
    random.Random(7).shuffle(sizes)
    return sizes


def body(size: str | None, quantity: object = 1) -> bytes:
    return json.dumps({"quantity": quantity, **({"variant": size} if size is not None else {})}).encode()


def held_per_size(drop) -> Counter[str]:
    held = Hold.objects.filter(drop=drop, state=HoldState.HELD).values_list("variant__name", flat=True)
    return Counter(held)


def crowd_through_the_lane(slug: str, tokens: list[str], sizes: list[str]) -> list[Reply]:
    async def scenario() -> list[Reply]:
        gate = asyncio.Semaphore(128)

        async def one(token: str, size: str) -> Reply:
            headers = reserve_headers({"authorization": f"Bearer {token}"}, key="k-" + token[:30])
            async with gate:
                return await call("POST", f"/api/drops/{slug}/holds", headers=headers, body=body(size))

        return await asyncio.gather(*(one(t, s) for t, s in zip(tokens, sizes, strict=True)))

    return run(scenario)


# The probes of other buckets, single and batched: with the per-variant condition gone, a claim
# whose own variant's buckets are empty may take another variant's units (the control).
PROBES = {
    "TAKE_FROM_ANY_BUCKET": " AND variant_id = %(variant)s",
    "TAKE_BATCH_FROM_ANY_BUCKET": " AND b.variant_id = %(variant)s",
}


def without_the_variant_condition(name: str) -> str:
    statement, condition = getattr(stock_sql, name), PROBES[name]
    assert condition in statement
    return statement.replace(condition, "")


@override_settings(IP_RATE_LIMIT_BURST=100_000)  # the whole crowd comes from 127.0.0.1 here
@pytest.mark.parametrize("control", [False, True], ids=["exact", "control-without-the-variant-condition"])
def test_two_thousand_buyers_for_four_sizes_hold_exactly_each_sizes_stock(monkeypatch, control: bool) -> None:
    drop = four_sizes(f"sizes-{int(control)}", buckets=4)
    if control:
        for name in PROBES:
            monkeypatch.setattr(stock_sql, name, without_the_variant_condition(name))
    state.refresh([drop.pk])
    tokens = [buyer.token for buyer in create_buyers(count=BUYERS, prefix=f"size{int(control)}")]

    replies = crowd_through_the_lane(drop.slug, tokens, wishes())

    held = held_per_size(drop)
    per_variant = {v.name: v.drift for v in invariant_by_variant(drop_id=drop.pk)}
    if control:  # the harness sees a variant oversold when the condition is gone
        assert max(held.values()) > PER_SIZE and any(per_variant.values()), (held, per_variant)
        return
    assert [r.status for r in replies].count(201) == PER_SIZE * len(SIZES)
    assert held == dict.fromkeys(SIZES, PER_SIZE)
    assert {r.json()["error"] for r in replies if r.status != 201} <= {"variant_sold_out", "sold_out", "busy"}
    assert per_variant == dict.fromkeys(SIZES, 0) and invariant(drop_id=drop.pk).drift == 0
    # Every 201 says which size it holds, and it is the one asked for.
    won = [(size, r.json()["variant"]) for size, r in zip(wishes(), replies, strict=True) if r.status == 201]
    assert all(asked == got for asked, got in won) and {got for _, got in won} == set(SIZES)


def test_two_thousand_buyers_over_a_real_server_hold_exactly_each_sizes_stock(crowd_server: str) -> None:
    drop = four_sizes("sizes-http")
    tokens = [buyer.token for buyer in create_buyers(count=BUYERS, prefix="sizehttp")]

    async def reserve(client: Session, wish: tuple[str, str]) -> tuple[str, Answer]:
        token, size = wish
        headers = reserve_headers({"authorization": f"Bearer {token}"}, key="k-" + token[:30])
        return size, await client.post(f"/api/drops/{drop.slug}/holds", headers=headers, data=body(size))

    replies = crowd(crowd_server, list(zip(tokens, wishes(), strict=True)), reserve)

    won = [(size, r.json()) for size, r in replies if r.status_code == 201]
    assert len(won) == PER_SIZE * len(SIZES)
    assert all(hold["variant"] == size for size, hold in won)  # each holds the size it asked for
    assert {r.json()["error"] for _, r in replies if r.status_code != 201} <= {
        "variant_sold_out",
        "sold_out",
        "busy",
    }
    assert held_per_size(drop) == dict.fromkeys(SIZES, PER_SIZE)
    assert all(v.drift == 0 and v.held == PER_SIZE for v in invariant_by_variant(drop_id=drop.pk))
    assert invariant(drop_id=drop.pk).drift == 0


def test_a_size_gone_names_the_sizes_left_and_the_last_one_is_sold_out() -> None:
    drop = make_drop(
        slug="two-sizes", quantity=3, variants=[NewVariant("M", 1), NewVariant("L", 2)], per_buyer_limit=1
    )
    state.refresh([drop.pk])
    auths = [bearer(name) for name in ("ann", "bob", "cy", "dee", "eve")]

    async def scenario() -> list[Reply]:
        replies = []
        for auth, size in zip(auths, ["M", "M", "L", "L", "L"], strict=True):
            replies.append(
                await call(
                    "POST", "/api/drops/two-sizes/holds", headers=reserve_headers(auth), body=body(size)
                )
            )
        return replies

    m, m_again, l1, l2, l_again = run(scenario)
    page = Client().get("/api/drops/two-sizes")  # Django's answer (the edge's is tested to be the same)

    assert m.status == 201 and m.json()["variant"] == "M"
    assert (m_again.status, m_again.json()["error"], m_again.json()["left"]) == (
        409,
        "variant_sold_out",
        ["L"],
    )
    assert m_again.json()["variant"] == "M" and "still on sale: L" in m_again.json()["detail"]
    assert l1.status == l2.status == 201
    assert (l_again.status, l_again.json()["error"]) == (409, "sold_out")  # every variant is gone
    variants = {v["name"]: v for v in page.json()["variants"]}
    assert variants["M"]["sold_out"] and variants["L"]["remaining"] == 0 and page.json()["sold_out"]


@pytest.mark.parametrize(
    ("variant", "expected"),
    [
        (None, "Choose a variant: one of M, L."),
        ("XXL", "This drop has no variant 'XXL': choose one of M, L."),
        ("m", "This drop has no variant 'm': choose one of M, L."),
        (7, "variant must be the name of one of M, L."),
        (["M"], "variant must be the name of one of M, L."),
        ("M\x00", "variant must be the name of one of M, L."),
        ("M" * 41, "variant must be the name of one of M, L."),
    ],
)
def test_a_variant_that_is_not_one_of_the_drops_is_422_and_holds_nothing(
    variant: object, expected: str
) -> None:
    drop = make_drop(slug="pick", quantity=4, variants=[NewVariant("M", 2), NewVariant("L", 2)])
    state.refresh([drop.pk])
    auth = bearer("picky")
    raw = json.dumps({"quantity": 1, **({"variant": variant} if variant is not None else {})}).encode()

    reply = run(lambda: call("POST", "/api/drops/pick/holds", headers=reserve_headers(auth), body=raw))

    assert (reply.status, reply.json()["error"], reply.json()["detail"]) == (422, "invalid_variant", expected)
    assert reply.json()["variants"] == ["M", "L"]
    assert not Hold.objects.filter(drop=drop).exists()
    assert [v.available for v in invariant_by_variant(drop_id=drop.pk)] == [2, 2]


def test_the_per_buyer_limit_counts_across_variants() -> None:
    drop = make_drop(
        slug="limit-sizes", quantity=6, variants=[NewVariant("M", 3), NewVariant("L", 3)], per_buyer_limit=2
    )
    buyer = make_buyer("twice")
    m, l_variant = drop.variants.all()
    first = holds.reserve(drop=drop, variant=m, buyer_id=buyer.pk, quantity=1, idempotency_key="one")
    assert holds.confirm(hold_id=first.hold.pk)

    with pytest.raises(LimitReached, match="counting what you bought"):
        holds.reserve(drop=drop, variant=l_variant, buyer_id=buyer.pk, quantity=2, idempotency_key="two")
    second = holds.reserve(
        drop=drop, variant=l_variant, buyer_id=buyer.pk, quantity=1, idempotency_key="three"
    )

    assert second.hold.variant == l_variant
    assert [(v.name, v.available, v.held, v.sold) for v in invariant_by_variant(drop_id=drop.pk)] == [
        ("M", 2, 0, 1),
        ("L", 2, 1, 0),
    ]


@pytest.mark.parametrize("mode", ["buckets", "units"])
def test_each_variant_has_its_own_stock_rows_and_a_release_gives_back_to_its_own(mode: str) -> None:
    variants = [NewVariant("38", 4), NewVariant("39", 4, price_minor=5900)]
    drop = make_drop(
        slug=f"shoes-{mode}", quantity=8, mode=mode, buckets=2 if mode == "buckets" else 1, variants=variants
    )
    buyer = make_buyer(f"shoe-{mode}")
    small, big = drop.variants.all()

    made = holds.reserve(drop=drop, variant=big, buyer_id=buyer.pk, quantity=2, idempotency_key="k")
    during = [(v.name, v.available, v.held) for v in invariant_by_variant(drop_id=drop.pk)]
    holds.release(hold_id=made.hold.pk, buyer_id=buyer.pk)
    after = [(v.name, v.available, v.held) for v in invariant_by_variant(drop_id=drop.pk)]

    assert during == [("38", 4, 0), ("39", 2, 2)] and after == [("38", 4, 0), ("39", 4, 0)]
    if mode == "units":
        assert all(label.startswith("39-") for label in made.units or ())
    assert big.unit_price(drop.product) == 5900 and small.unit_price(drop.product) == 4900


def test_an_order_of_a_size_says_which_in_the_orders_api() -> None:
    drop = make_drop(slug="order-size", quantity=4, variants=[NewVariant("M", 2), NewVariant("L", 2)])
    buyer = make_buyer("sized")
    _m, l_size = drop.variants.all()
    hold = holds.reserve(drop=drop, variant=l_size, buyer_id=buyer.pk, quantity=1, idempotency_key="k").hold
    order = Order.objects.create(
        hold=hold, buyer=buyer, drop=drop, quantity=1, amount_minor=4900, currency="EUR"
    )
    client = Client()
    client.force_login(buyer)

    one, listed = client.get(f"/api/orders/{order.pk}").json(), client.get("/api/orders").json()["orders"]

    assert one["variant"] == "L" and [o["variant"] for o in listed] == ["L"]
