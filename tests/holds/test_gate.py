"""The Redis gate in front of the claim: refuses from its count, gives back what the claim did not take,
rebuilds and reconciles from the database, fails closed; and where merchants and on-call meet it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from io import StringIO

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.test import Client, override_settings

from admission import services as admission
from admission.models import Ticket
from core import metrics
from core.errors import Busy, FloodgateError, HoldExists, SoldOut
from devtools.ports import free_port
from holds import gate, services
from holds.counts import invariant
from holds.models import Hold
from ops.drop_admin import DropAdmin
from ops.metrics import drop_slugs
from shop.models import Drop
from tests.factories import expire_in, make_drop

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_gates(redis) -> Iterator[None]:
    """Gate keys are per drop id; a test's drop ids may repeat an earlier test's in the shared Redis."""
    keys = [*redis.scan_iter("fg:gate:*", count=1000), metrics.GATE_REFUSALS_KEY]
    redis.delete(*keys)
    yield
    metrics._health.skip_until = 0.0  # a test with Redis out pauses metric writes; not for the next


def count(redis, drop: Drop) -> int | None:
    raw = redis.get(gate.COUNT.format(drop=drop.pk))
    return None if raw is None else int(raw)


def reserve(drop: Drop, buyer_id: int, key: str, quantity: int = 1) -> services.Reservation:
    return services.reserve(drop=drop, buyer_id=buyer_id, quantity=quantity, idempotency_key=key)


def test_a_short_count_answers_sold_out_without_a_query(
    redis, make_buyers, django_assert_num_queries
) -> None:
    drop = make_drop(quantity=2, redis_gate=True, per_buyer_limit=1)
    first, second, late = make_buyers(3, prefix="gate")
    reserve(drop, first, "a")
    reserve(drop, second, "b")
    assert count(redis, drop) == 0

    with django_assert_num_queries(0), pytest.raises(gate.GateSoldOut) as refused:
        reserve(drop, late, "c")

    assert refused.value.code == "sold_out" and refused.value.status == 409
    assert metrics.gate_refusals(drop_id=drop.pk) == 1
    assert "floodgate_gate_refusals_total" in metrics.render_prometheus(drop_slugs=drop_slugs)
    assert invariant(drop_id=drop.pk).held == 2


def test_a_missing_count_is_rebuilt_from_the_database_counting_expired_holds(redis, make_buyers) -> None:
    drop = make_drop(quantity=5, buckets=2, redis_gate=True, per_buyer_limit=2)
    early, late = make_buyers(2, prefix="rebuild")
    overdue = reserve(drop, early, "a", quantity=2)
    expire_in([overdue.hold.pk], -5)
    redis.delete(gate.COUNT.format(drop=drop.pk))  # expired, flushed or never set

    reserve(drop, late, "b", quantity=1)

    # 3 available + 2 in an expired hold a claim reclaims, less the unit just taken
    assert count(redis, drop) == 4
    assert redis.ttl(gate.COUNT.format(drop=drop.pk)) > 0


def test_a_claim_that_takes_nothing_gives_its_units_back(redis, make_buyers) -> None:
    drop = make_drop(quantity=3, redis_gate=True, per_buyer_limit=2)
    (buyer,) = make_buyers(1, prefix="giveback")
    reserve(drop, buyer, "first")
    assert count(redis, drop) == 2

    with pytest.raises(HoldExists):  # refused by the database after the gate let it through
        reserve(drop, buyer, "second", quantity=2)
    again = reserve(drop, buyer, "first")  # a retried click: no new unit

    assert again.created is False
    assert count(redis, drop) == 2
    assert int(redis.get(gate.FLIGHT.format(drop=drop.pk)) or 0) == 0


def test_a_winner_retrying_after_the_sell_out_gets_the_same_hold(redis, make_buyers) -> None:
    drop = make_drop(quantity=1, redis_gate=True, per_buyer_limit=1)
    winner, loser = make_buyers(2, prefix="retry")
    won = reserve(drop, winner, "click")
    with pytest.raises(SoldOut):
        reserve(drop, loser, "click")

    again = reserve(drop, winner, "click")

    assert again.created is False and again.hold.pk == won.hold.pk
    assert count(redis, drop) == 0


def test_a_bad_quantity_is_the_claims_answer_and_takes_nothing(redis, make_buyers) -> None:
    drop = make_drop(quantity=3, redis_gate=True, per_buyer_limit=2)
    (buyer,) = make_buyers(1, prefix="bad")
    gate.reconcile([drop])

    for quantity, code in [(3, "limit_reached"), (0, "invalid_quantity"), ("2", "invalid_quantity")]:
        with pytest.raises(FloodgateError) as refused:
            reserve(drop, buyer, f"q{quantity}", quantity=quantity)  # type: ignore[arg-type]
        assert refused.value.code == code

    assert count(redis, drop) == 3


def test_redis_down_is_busy_and_sells_nothing(make_buyers) -> None:
    drop = make_drop(quantity=3, redis_gate=True)
    (buyer,) = make_buyers(1, prefix="down")
    nowhere = f"redis://127.0.0.1:{free_port()}/0"
    caches = {"default": {**settings.CACHES["default"], "LOCATION": nowhere}}

    with override_settings(CACHES=caches, REDIS_URL=nowhere), pytest.raises(Busy) as refused:
        reserve(drop, buyer, "k")

    assert refused.value.status == 503 and refused.value.retry_after == 1
    assert not Hold.objects.filter(drop=drop).exists()


def test_the_tick_reconciles_gated_drops_from_the_database(redis, make_buyers) -> None:
    gated = make_drop(quantity=4, redis_gate=True)
    plain = make_drop(quantity=4)
    (buyer,) = make_buyers(1, prefix="tick")
    held = reserve(gated, buyer, "k")
    services.release(hold_id=held.hold.pk, buyer_id=buyer)  # a unit back: the count lags behind
    assert count(redis, gated) == 3

    admission.tick()

    assert count(redis, gated) == 4
    assert count(redis, plain) is None
    assert redis.ttl(gate.COUNT.format(drop=gated.pk)) > 0


def test_create_drop_takes_the_waiting_room_and_gate_options() -> None:
    out = StringIO()
    call_command(
        "create_drop",
        *("--slug", "gated", "--quantity", "10", "--waiting-room", "--admission-percent", "200"),
        *("--wave-seconds", "3", "--redis-gate"),
        stdout=out,
    )
    plain = StringIO()
    call_command("create_drop", "--slug", "plain", "--quantity", "10", stdout=plain)

    drop = Drop.objects.get(slug="gated")
    assert (drop.waiting_room, drop.admission_percent, drop.admission_wave_seconds, drop.redis_gate) == (
        True,
        200,
        3,
        True,
    )
    assert json.loads(out.getvalue())["redis_gate"] is True
    default = Drop.objects.get(slug="plain")
    assert (default.admission_percent, default.admission_wave_seconds, default.redis_gate) == (150, 5, False)


def test_merchants_set_the_admission_pace_and_gate_in_the_admin(roles: None) -> None:
    advanced = dict(DropAdmin.fieldsets)["Advanced"]  # tuning a merchant rarely needs: folded
    assert {"admission_percent", "redis_gate"} <= set(advanced["fields"]) and "collapse" in advanced[
        "classes"
    ]
    drop = make_drop(slug="edit-me", quantity=5)
    client = Client()
    client.force_login(staff("mara", "Merchants"))

    page = client.get(f"/admin/shop/drop/{drop.pk}/change/").content.decode()

    assert 'name="admission_percent"' in page and 'name="redis_gate"' in page


def staff(name: str, group: str) -> User:
    user = get_user_model().objects.create_user(name, password="pw-pw-pw-pw", is_staff=True)
    user.groups.add(Group.objects.get(name=group))
    return user


def test_the_dashboard_shows_the_line_and_the_gate_next_to_the_database(
    redis, make_buyers, roles: None
) -> None:
    drop = make_drop(slug="watched", quantity=10, redis_gate=True, waiting_room=True, admission_percent=100)
    admission.run_wave(drop)  # the draw
    buyers = make_buyers(4, prefix="line")
    for buyer in buyers:
        admission.join(drop=drop, buyer_id=buyer)
    admission.run_wave(drop, force=True)  # 10 units: all four in
    admission.join(drop=drop, buyer_id=make_buyers(1, prefix="late")[0])  # one still waiting
    assert Ticket.objects.filter(drop=drop).count() == 5
    reserve(drop, buyers[0], "k")
    client = Client()
    client.force_login(staff("nia", "On-call"))

    panel = {d["slug"]: d for d in client.get("/admin/shop/drop/dashboard/data/").json()["drops"]}["watched"]
    assert (panel["queue_length"], panel["admitted_through"], panel["returning"]) == (1, 4, 0)
    assert (panel["gate"], panel["gate_database"], panel["gate_mismatch"]) == (9, 9, False)

    redis.set(gate.COUNT.format(drop=drop.pk), 2)  # far below the database: flagged, not drift
    panel = {d["slug"]: d for d in client.get("/admin/shop/drop/dashboard/data/").json()["drops"]}["watched"]
    assert panel["gate_mismatch"] is True and panel["drift"] == 0
    assert b"gate / database" in client.get("/admin/shop/drop/dashboard/").content
