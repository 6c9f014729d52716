"""The waiting room's line: tickets, FIFO, the verifiable draw, waves bounded by stock."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connections
from django.test import Client
from django.utils import timezone

from admission import services, sql
from admission.models import Queue, Ticket
from core import locks
from core.errors import Unauthenticated
from holds.services import reserve
from shop.models import ApiToken, Drop
from tests.concurrency import run_concurrently
from tests.factories import make_buyer, make_drop

pytestmark = pytest.mark.django_db


def bearer(username: str) -> dict[str, Any]:  # the test client's WSGI extras (typed Any)
    user = make_buyer(username)
    ApiToken.objects.create(user=user, digest=ApiToken.digest_of(f"token-{username}"))
    return {"HTTP_AUTHORIZATION": f"Bearer token-{username}"}


def join(slug: str, auth: dict[str, Any]):
    return Client().post(f"/api/drops/{slug}/queue", **auth)


def test_joining_twice_keeps_the_ticket_and_position_counts_down(django_capture_on_commit_callbacks) -> None:
    drop = make_drop(slug="line", quantity=2, waiting_room=True, admission_percent=100)
    services.run_wave(drop)  # the start: an empty draw
    auths = [bearer(f"q{i}") for i in range(4)]
    tickets = [join("line", auth).json()["ticket"] for auth in auths]
    again = join("line", auths[2]).json()
    looked = Client().get("/api/drops/line/queue", **auths[2]).json()

    assert tickets == [1, 2, 3, 4]
    assert again["ticket"] == looked["ticket"] == 3
    assert looked["position"] == 3 and looked["admitted"] is False and looked["admission_token"] is None
    assert Ticket.objects.filter(drop=drop).count() == 4

    # 2 units, 100%: tickets 1 and 2. Its commit publishes the new mark (a poll that found no
    # snapshot published one: what the line is shown comes from there).
    with django_capture_on_commit_callbacks(execute=True):
        services.run_wave(drop, force=True)
    first, third = (Client().get("/api/drops/line/queue", **auths[i]).json() for i in (0, 2))
    assert first["admitted"] is True and first["position"] == 0 and first["admission_token"]
    assert third["position"] == 1 and third["admitted_through"] == 2 and third["waiting"] == 2


@pytest.mark.slow
def test_thousand_buyers_are_admitted_in_the_order_they_joined(make_buyers) -> None:
    drop = make_drop(slug="fifo", quantity=100, waiting_room=True, admission_percent=100)
    start = timezone.now()
    services.run_wave(drop, now=start)  # the draw (nobody early)
    buyers = make_buyers(1000, prefix="fifo")
    joined = [services.join(drop=drop, buyer_id=b).number for b in buyers]
    assert joined == list(range(1, 1001))

    # Nobody buys, so each wave waits a token lifetime before admitting the next hundred.
    admitted_order: list[int] = []
    now = start
    for _ in range(10):
        now += timedelta(seconds=200)
        before = Queue.objects.get(pk=drop.pk).admitted_through
        wave = services.run_wave(drop, now=now)
        assert wave is not None and wave.admitted == 100
        admitted_order += list(
            Ticket.objects.filter(drop=drop, number__gt=before, number__lte=wave.admitted_through)
            .order_by("number")
            .values_list("buyer_id", flat=True)
        )
    assert admitted_order == buyers


def test_early_joiners_are_shuffled_by_a_seed_anyone_can_check(make_buyers) -> None:
    drop = make_drop(
        slug="draw", quantity=50, waiting_room=True, starts_at=timezone.now() + timedelta(minutes=5)
    )
    buyers = make_buyers(300, prefix="early")
    for b in buyers:
        place = services.join(drop=drop, buyer_id=b)
        assert place.number is None and place.as_json()["position"] is None
    shown_before = Client().get("/api/drops/draw/queue/draw").json()
    assert shown_before["drawn"] is False and "seed" not in shown_before

    services.run_wave(drop, now=drop.starts_at + timedelta(seconds=1))
    after = Client().get("/api/drops/draw/queue/draw").json()
    order = list(Ticket.objects.filter(drop=drop).order_by("number").values_list("buyer_id", flat=True))
    entries_in_ticket_order = list(
        Ticket.objects.filter(drop=drop).order_by("number").values_list("id", flat=True)
    )

    assert hashlib.sha256(after["seed"].encode()).hexdigest() == shown_before["seed_sha256"]
    listed = hashlib.sha256(",".join(str(e) for e in sorted(after["entries"])).encode()).hexdigest()
    assert listed == after["entries_sha256"]
    recomputed = sorted(
        after["entries"],
        key=lambda e: hashlib.sha256(f"{after['seed']}:{listed}:{after['beacon']}:{e}".encode()).digest(),
    )
    assert recomputed == entries_in_ticket_order == after["order"]
    numbers = Ticket.objects.filter(drop=drop).values_list("number", flat=True)
    assert sorted(n for n in numbers if n is not None) == list(range(1, 301))  # a None would be missing
    assert order != buyers  # not the join order
    # A later joiner comes after everyone drawn.
    late = make_buyers(1, prefix="late")[0]
    assert services.join(drop=drop, buyer_id=late).number == 301


def race_joins_against_the_draw(
    make_buyers, batch: int = 1
) -> tuple[Drop, list[int | None], list[BaseException]]:
    """200 buyers join an undrawn queue on 12 threads while the start's draw runs among them, one
    at a time (`join`) or `batch` together (`join_many`, as the lane batches them).
    Returns the drop, every ticket's number and what the joins and the draw raised."""
    drop = make_drop(
        slug="race-draw", quantity=10, waiting_room=True, starts_at=timezone.now() + timedelta(minutes=5)
    )
    buyers = make_buyers(200, prefix="racer")

    def joiner(group: list[int]):
        def job() -> None:
            try:
                fresh = Drop.objects.get(pk=drop.pk)
                answers = services.join_many(drop=fresh, asks=[services.JoinAsk(b) for b in group])
                assert not [a for a in answers if isinstance(a, Exception)], answers
            finally:
                connections.close_all()

        return job

    def drawer() -> None:
        try:
            for _ in range(40):
                if Ticket.objects.filter(drop=drop).count() >= 60:
                    break
            services.run_wave(Drop.objects.get(pk=drop.pk), now=drop.starts_at + timedelta(seconds=1))
        finally:
            connections.close_all()

    groups = [buyers[i : i + batch] for i in range(0, len(buyers), batch)]
    half = len(groups) // 2
    jobs = [joiner(g) for g in groups[:half]] + [drawer] + [joiner(g) for g in groups[half:]]
    results = run_concurrently(jobs, threads=12)
    errors = [r for r in results if isinstance(r, BaseException)]
    return drop, list(Ticket.objects.filter(drop=drop).values_list("number", flat=True)), errors


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("batch", [1, 10])
def test_joins_racing_the_draw_each_get_exactly_one_place(make_buyers, batch: int) -> None:
    drop, numbers, errors = race_joins_against_the_draw(make_buyers, batch)

    assert not errors
    queue = Queue.objects.get(pk=drop.pk)
    assert queue.drawn_at is not None and 0 < queue.drawn_entries < 200
    assert None not in numbers, "an early joiner was left out of the draw"
    assert sorted(n for n in numbers if n is not None) == list(
        range(1, 201)
    )  # everyone placed, once, no gaps


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("batch", [1, 10])
def test_control_a_join_without_for_share_is_left_out_of_the_draw(
    make_buyers, monkeypatch, batch: int
) -> None:
    """Breaks JOIN_BEFORE_DRAW: no FOR SHARE on the queue row, and a 0.1 s pg_sleep after its
    snapshot. A join that read "not drawn" no longer waits for the draw (FOR UPDATE) and inserts
    its ticket after the list closed: either the draw's own check refuses the changed list, or the
    ticket lands after the draw numbered the others and stays unnumbered. The race test catches both
    (no errors, everyone placed), so it can fail; the FOR SHARE is what passes it.
    """
    statement = sql.JOIN_BEFORE_DRAW
    assert "   FOR SHARE OF q\n" in statement and "FROM admission_queue q\n" in statement
    broken = statement.replace("   FOR SHARE OF q\n", "").replace(
        "FROM admission_queue q\n", "FROM admission_queue q CROSS JOIN pg_sleep(0.1)\n"
    )
    monkeypatch.setattr(sql, "JOIN_BEFORE_DRAW", broken)

    drop, numbers, errors = race_joins_against_the_draw(make_buyers, batch)

    refused = [e for e in errors if "changed after their list closed" in str(e)]
    assert refused == errors, errors  # nothing else went wrong
    if refused:  # the draw saw a ticket slip into its closed list and drew nobody
        assert Queue.objects.get(pk=drop.pk).drawn_at is None
    else:  # the draw ran first and the late ticket was left out of it
        assert Queue.objects.get(pk=drop.pk).drawn_at is not None
        assert None in numbers  # a buyer in line with no place: the race test would fail


def test_joins_asked_together_answer_each_as_one_alone(make_buyers) -> None:
    """join_many (the lane's batches): an existing place, new ones, an inactive account and the
    same buyer twice in one batch each get what `join` alone gives them, in the asks' order."""
    drop = make_drop(
        slug="many", quantity=5, waiting_room=True, starts_at=timezone.now() + timedelta(hours=1)
    )
    had, new, gone, other = make_buyers(4, prefix="many")
    earlier = services.join(drop=drop, buyer_id=had).ticket.pk
    get_user_model().objects.filter(pk=gone).update(is_active=False)
    asks = [services.JoinAsk(b) for b in (had, new, gone, new, other)]

    answers = services.join_many(drop=drop, asks=asks)

    assert isinstance(answers[2], Unauthenticated)
    places = [a for a in answers if isinstance(a, services.Standing)]
    assert [p.ticket.buyer_id for p in places] == [had, new, new, other]
    assert places[0].ticket.pk == earlier and places[1].ticket.pk == places[2].ticket.pk
    assert Ticket.objects.filter(drop=drop).count() == 3
    for place in places:  # the same answer as the buyer joining again alone
        assert place.as_json() == services.join(drop=drop, buyer_id=place.ticket.buyer_id).as_json()
    with pytest.raises(Unauthenticated):
        services.join(drop=drop, buyer_id=gone)


def test_waves_follow_the_stock_and_stop_when_it_is_gone(make_buyers) -> None:
    drop = make_drop(slug="stock", quantity=4, waiting_room=True, admission_percent=150)
    now = timezone.now()
    services.run_wave(drop, now=now)
    for buyer in make_buyers(20, prefix="stock"):
        services.join(drop=drop, buyer_id=buyer)
    first = services.run_wave(drop, now=now + timedelta(seconds=10))
    assert first is not None and first.admitted == 6  # 1.5 x 4 available
    for ticket in Ticket.objects.filter(drop=drop, number__lte=4):
        reserve(drop=drop, buyer_id=ticket.buyer_id, quantity=1, idempotency_key="k")
    later = services.run_wave(drop, now=now + timedelta(seconds=500))
    assert later is not None and (later.admitted, later.available, later.held) == (0, 0, 4)
    snap = services.place(drop=drop, buyer_id=Ticket.objects.get(drop=drop, number=10).buyer_id).as_json()
    assert snap["state"] == "all_held" and snap["position"] == 4


def test_units_of_expired_unreclaimed_holds_go_to_the_line_not_to_waves_or_the_edge() -> None:
    from admission import state
    from tests.factories import expire_in

    drop = make_drop(slug="lapsed", quantity=1, waiting_room=True)
    hold = reserve(drop=drop, buyer_id=make_buyer().pk, quantity=1, idempotency_key="k").hold
    assert state.compute([drop])[0].queue_state == "all_held"

    expire_in([hold.pk], -1)  # over, and no sweeper has run

    # A waiting room gives it to the next ticket (sale/offers.py): no wave admits for it, and a
    # claim at the edge is told there is nothing to take, while the line is told it may come.
    snap = state.compute([drop])[0]
    assert (snap.available, snap.returning, snap.held, snap.queue_state) == (0, 1, 0, "all_held")
    other = make_drop(slug="lapsed-open", quantity=1)
    expire_in([reserve(drop=other, buyer_id=make_buyer().pk, quantity=1, idempotency_key="k").hold.pk], -1)
    snap = state.compute([other])[0]  # without a room, a claim reclaims it inline: available
    assert (snap.available, snap.returning, snap.held) == (1, 0, 0)


def test_a_rebuilt_counter_never_hands_out_a_number_inside_the_admitted_range(redis) -> None:
    drop = make_drop(slug="floor", quantity=10, waiting_room=True, admission_percent=100)
    services.run_wave(drop)
    buyers = [make_buyer() for _ in range(10)]
    for buyer in buyers:
        services.join(drop=drop, buyer_id=buyer.pk)
    services.run_wave(drop, force=True)
    assert Queue.objects.get(pk=drop.pk).admitted_through == 10
    for buyer in buyers[-2:]:  # accounts deleted: their tickets 9 and 10 go with them
        buyer.delete()
    redis.delete(services.COUNTER.format(drop=drop.pk))  # and Redis lost the counter

    late = services.join(drop=drop, buyer_id=make_buyer().pk)

    assert late.number == 11 and late.as_json()["admitted"] is False and late.token is None


@pytest.mark.django_db(transaction=True)
def test_a_wave_runs_while_a_buyer_collapses_the_drops_buckets() -> None:
    drop = make_drop(slug="locks", quantity=10, waiting_room=True)
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s, %s)", [int(locks.Namespace.COLLAPSE), drop.pk])
        assert services.run_wave(drop) is not None  # a different lock: not skipped
    finally:
        other.close()


@pytest.mark.parametrize(("grace", "admitted_later"), [(30, 15), (120, 0)], ids=["grace", "control"])
def test_admitted_no_shows_hold_the_line_back_for_the_grace_period_only(
    make_buyers, settings, grace: int, admitted_later: int
) -> None:
    # given 10 units and 40 in line, the first 15 admitted never come (a farm of sign-ups)
    settings.ADMISSION_TOKEN_SECONDS, settings.ADMISSION_GRACE_SECONDS = 120, grace
    drop = make_drop(slug="no-shows", quantity=10, waiting_room=True, admission_percent=150)
    now = timezone.now()
    services.run_wave(drop, now=now)  # the draw: nobody yet
    for buyer in make_buyers(40, prefix="ns"):
        services.join(drop=drop, buyer_id=buyer)
    forced = services.run_wave(drop, now=now + timedelta(seconds=1), force=True)
    assert forced is not None and forced.admitted == 15

    # when waves run while they have not come, within and after the grace period
    within = services.run_wave(drop, now=now + timedelta(seconds=10), force=True)
    after = services.run_wave(drop, now=now + timedelta(seconds=45), force=True)

    # then they hold the line back only within it (the control: a token's lifetime, the old stall)
    assert within is not None and within.admitted == 0
    assert after is not None and after.admitted == admitted_later
