"""Admission driven by the real Celery beat: the draw at the start, waves that follow the stock."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from datetime import timedelta

import pytest
import redis as redis_lib
from django.conf import settings
from django.utils import timezone

from admission import services, state
from admission.models import Queue, Ticket
from core.errors import NotAdmitted, SoldOut
from holds import services as holds
from holds.models import Hold
from tests.factories import make_drop

pytestmark = pytest.mark.django_db(transaction=True)


def wait_for(what: str, check: Callable[[], bool], worker: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert worker.poll() is None, "the celery worker died"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def published(slug: str) -> dict:
    raw = redis_lib.Redis.from_url(settings.REDIS_URL).get(state.KEY.format(slug=slug))
    return json.loads(raw) if raw else {}


def test_beat_draws_at_the_start_then_admits_for_the_stock_and_stops_when_it_is_held(
    celery_with_beat: subprocess.Popen, make_buyers
) -> None:
    drop = make_drop(
        slug="beat-room",
        quantity=10,
        waiting_room=True,
        admission_wave_seconds=1,
        starts_at=timezone.now() + timedelta(seconds=4),
    )
    buyers = make_buyers(30, prefix="beat")
    for buyer in buyers:
        services.join(drop=drop, buyer_id=buyer)
    assert published("beat-room").get("queue", {}).get("state") in (None, "scheduled")

    def through() -> int:
        return Queue.objects.get(pk=drop.pk).admitted_through

    wait_for("the first wave", lambda: through() == 15, celery_with_beat)  # 150% of 10 units
    assert Queue.objects.get(pk=drop.pk).drawn_entries == 30
    by_number = {t.number: t.buyer_id for t in Ticket.objects.filter(drop=drop)}

    for number in range(1, 11):  # the first ten admitted buyers take every unit
        holds.reserve(drop=drop, buyer_id=by_number[number], quantity=1, idempotency_key="k")
    wait_for(
        "the published all_held state",
        lambda: published("beat-room")["queue"]["state"] == "all_held",
        celery_with_beat,
    )
    time.sleep(3)  # several more waves: nothing more is admitted while no unit is free
    assert through() == 15

    # A unit comes back: beat offers it to the next in line (ticket 11: admitted, never had a unit),
    # as a hold of its own; ticket 16, not admitted, still cannot claim, and nobody else can.
    first_hold = holds.reserve(drop=drop, buyer_id=by_number[1], quantity=1, idempotency_key="k").hold
    holds.release(hold_id=first_hold.pk, buyer_id=by_number[1])
    wait_for(
        "the offer to ticket 11",
        lambda: services.place(drop=drop, buyer_id=by_number[11]).offer is not None,
        celery_with_beat,
    )
    offer = services.place(drop=drop, buyer_id=by_number[11]).offer
    assert offer is not None and offer.open and Hold.objects.get(pk=offer.hold).buyer_id == by_number[11]
    with pytest.raises(NotAdmitted):
        services.check_admitted(drop=drop, buyer_id=by_number[16], token=None)
    place = services.place(drop=drop, buyer_id=by_number[12])  # admitted, but the unit is 11's
    with pytest.raises(SoldOut):
        holds.reserve(drop=drop, buyer_id=by_number[12], quantity=1, idempotency_key="k")
    assert place.offer is None and through() == 15
    assert Queue.objects.get(pk=drop.pk).offered_through == 11


def test_queue_states_follow_sold_out_and_the_end() -> None:
    drop = make_drop(slug="states", quantity=1, waiting_room=True)
    services.run_wave(drop)
    assert state.compute([drop])[0].queue_state == "admitting"
    hold = holds.reserve(drop=drop, buyer_id=make_buyers_one(), quantity=1, idempotency_key="k").hold
    assert state.compute([drop])[0].queue_state == "all_held"
    holds.confirm(hold_id=hold.pk)
    assert state.compute([drop])[0].queue_state == "sold_out"
    drop.ends_at = timezone.now() - timedelta(seconds=1)
    drop.starts_at = drop.ends_at - timedelta(hours=1)
    drop.save()
    assert state.compute([drop])[0].queue_state == "closed"


def make_buyers_one() -> int:
    from tests.factories import make_buyer

    return make_buyer().pk


def test_the_draw_and_first_wave_run_at_the_start_itself_not_at_the_next_tick(
    celery_worker, make_buyers
) -> None:
    starts_at = timezone.now() + timedelta(seconds=1.5)
    drop = make_drop(slug="on-time", quantity=10, waiting_room=True, starts_at=starts_at)
    for buyer in make_buyers(30, prefix="ontime"):
        services.join(drop=drop, buyer_id=buyer)

    # One tick before the start, as beat would run it; no tick after the start in this test. The
    # line closed 10 s before the start (the default): this tick closes and draws it (no beacon).
    scheduled = services.tick()
    again = services.schedule_start_wave(drop, timezone.now())  # the next tick sends nothing more
    drawn_before = Queue.objects.get(pk=drop.pk)
    assert drawn_before.drawn_at is not None and drawn_before.drawn_at < starts_at
    assert drawn_before.admitted_through == 0  # nobody in before the start

    def admitted() -> bool:
        return Queue.objects.get(pk=drop.pk).admitted_through > 0

    wait_for("the first wave at the start", admitted, celery_worker.process)
    queue = Queue.objects.get(pk=drop.pk)
    assert scheduled["waves"] == 0 and again is False
    assert queue.last_wave_at is not None and queue.last_wave_at >= starts_at  # never before the start
    assert (queue.drawn_entries, queue.admitted_through) == (30, 15)  # the first wave: 150% of 10 units
    # and published right after its commit (the wave's on_commit), with no tick to do it
    wait_for(
        "the draw published",
        lambda: published("on-time").get("queue", {}).get("seed") == queue.seed,
        celery_worker.process,
    )
