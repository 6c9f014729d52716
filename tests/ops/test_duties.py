"""A waiting-room sale with beat down, the worker down, or both: the web processes run its duties.

Each run starts the production server (`floodgate-web`, two worker processes) on the test database
with only some of Celery: the worker alone (beat down), beat alone (the worker down), or neither.
The drop is drawn at its start, admitted in waves, held to the last unit (the snapshot says so), a
hold runs out and is reclaimed, its unit is offered to the next ticket in line, and the drop sells
out. The controls run the same sale with the takeover turned off, and nothing moves.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
import redis as redis_lib
from django.conf import settings
from django.db import connection, connections
from django.test import Client
from django.utils import timezone

from admission import services as admission
from admission import state
from admission.models import Queue, Ticket
from devtools.ports import free_port
from holds import services as holds
from holds.counts import invariant
from holds.models import Hold
from ops import duties, schedule, switch
from ops.models import Duty
from tests.conftest import (
    CELERY,
    TEST_DATA,
    WEB,
    app_env,
    purge_queue,
    start_group,
    stop_group,
    wait_for_port,
)
from tests.factories import expire_in, make_drop, staff

pytestmark = pytest.mark.django_db(transaction=True)

QUICK = {"RECLAIM_EVERY_SECONDS": "1", "WATCHDOG_EVERY_SECONDS": "1"}  # late after 3 s, not 11
# The duties a sale of this test needs, each late within seconds (the payment nets are in
# test_authorised_hold.py: they wait 21 and 61 s before anyone is late).
SALE_DUTIES = [
    "admission.tick",
    "sale.offer_returns",
    "holds.reclaim_expired_holds",
    "ops.watch_invariants",
    "checkout.relay_outbox",
]


@dataclass
class Shop:
    env: dict[str, str]
    web_log: Path
    processes: list[subprocess.Popen]

    def start_celery(self, *role: str) -> None:
        schedule = TEST_DATA / f"beat-duties-{free_port()}"
        command = {
            "worker": [CELERY, "-A", "config.celery:app", "worker", "--concurrency", "1"],
            "beat": [CELERY, "-A", "config.celery:app", "beat", "-s", str(schedule)],
            "both": [
                CELERY,
                "-A",
                "config.celery:app",
                "worker",
                "-B",
                "-s",
                str(schedule),
                "--concurrency",
                "1",
            ],
        }[role[0]]
        quiet = ["--without-heartbeat", "--without-gossip", "--without-mingle"] if role[0] != "beat" else []
        process, _ = start_group(
            f"duties-{role[0]}-{free_port()}", [*command, "-l", "info", *quiet], self.env
        )
        self.processes.append(process)

    def alive(self) -> None:
        for process in self.processes:
            assert process.poll() is None, f"{process.args!r} died"


@contextlib.contextmanager
def shop(celery: str | None, *, takeover: bool) -> Iterator[Shop]:
    port = free_port()
    env = {
        **app_env("http://127.0.0.1:9", f"http://127.0.0.1:{port}"),
        **QUICK,
        "DB_POOL_MAX_SIZE": "4",
        "DB_POOL_MIN_SIZE": "1",
        "DUTY_TAKEOVER": "1" if takeover else "0",
    }
    purge_queue()
    web, log = start_group(
        f"duties-web-{port}", [WEB, "--host", "127.0.0.1", "--port", str(port), "--workers", "2"], env
    )
    found = Shop(env, log, [web])
    try:
        wait_for_port(port, web, log)
        if celery:
            found.start_celery(celery)
        yield found
    finally:
        for process in reversed(found.processes):
            stop_group(process)
        purge_queue()


def wait_for(what: str, check: Callable[[], bool], where: Shop, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        where.alive()
        assert time.monotonic() < deadline, (
            f"timed out waiting for {what}; web log:\n{where.web_log.read_text()[-3000:]}"
        )
        time.sleep(0.2)


def published(slug: str) -> dict:
    raw = redis_lib.Redis.from_url(settings.REDIS_URL).get(state.KEY.format(slug=slug))
    return json.loads(raw)["queue"] if raw else {}


# Celery's last runs came this long before the web processes do: the outage began a little
# earlier. Each duty still turns late by its own measure in the lease's statement (the tick 3 s
# after its last run, the outbox's relay 11 s), the relay no longer 8 s after the rest of the sale.
CELERY_LAST_RAN_SECONDS = 8


def sale(make_buyers, *, slug: str, starts_in: float = 4):
    duties.ensure()
    Duty.objects.update(scheduled_ran_at=timezone.now() - timedelta(seconds=CELERY_LAST_RAN_SECONDS))
    drop = make_drop(
        slug=slug,
        quantity=4,
        waiting_room=True,
        admission_wave_seconds=1,
        offer_seconds=15,
        starts_at=timezone.now() + timedelta(seconds=starts_in),
    )
    for buyer in make_buyers(12, prefix=f"{slug}-"):
        admission.join(drop=drop, buyer_id=buyer)
    return drop


# beat down (the worker up), the worker down (beat up), both down
CELERY_LEFT = {"beat down": "worker", "worker down": "beat", "both down": None}


@pytest.mark.servers
@pytest.mark.parametrize("fault", list(CELERY_LEFT))
def test_a_waiting_room_sale_runs_to_the_end_with_celery_partly_or_wholly_down(
    fault: str, make_buyers
) -> None:
    slug = "duty-" + fault.replace(" ", "-")
    drop = sale(make_buyers, slug=slug)
    with shop(CELERY_LEFT[fault], takeover=True) as running:
        # The draw at the start and the first wave (150% of 4 units).
        wait_for(
            "the draw and the first wave",
            lambda: Queue.objects.get(pk=drop.pk).admitted_through >= 6,
            running,
        )
        queue = Queue.objects.get(pk=drop.pk)
        assert queue.drawn_at is not None and queue.drawn_entries == 12
        by_number = {t.number: t.buyer_id for t in Ticket.objects.filter(drop=drop)}
        held = []
        for number in range(1, 5):
            place = admission.place(drop=drop, buyer_id=by_number[number])
            admission.check_admitted(drop=drop, buyer_id=by_number[number], token=place.token)
            held.append(
                holds.reserve(drop=drop, buyer_id=by_number[number], quantity=1, idempotency_key="k").hold
            )
        # Every unit held: the snapshot says so to the line (the tick publishes it).
        wait_for("all_held published", lambda: published(slug).get("state") == "all_held", running)

        # Three pay; the fourth runs out. Reclaiming gives its unit back to the line, and the
        # offer goes to the next ticket that never had a unit (5: admitted, too late to click).
        for hold in held[:3]:
            assert holds.confirm(hold_id=hold.pk)
        if fault == "both down":
            # The web process covering the reclaim dies (SIGKILL; granian starts another): when its
            # lease runs out, another process takes the duty, and the sale goes on.
            killed = Duty.objects.get(name="holds.reclaim_expired_holds").leased_by
            os.kill(int(killed.rsplit(":", 1)[1]), signal.SIGKILL)
        expire_in([held[3].pk], -1)
        wait_for("the expiry reclaimed", lambda: Hold.objects.get(pk=held[3].pk).state == "expired", running)
        wait_for(
            "the offer to ticket 5",
            lambda: admission.place(drop=drop, buyer_id=by_number[5]).offer is not None,
            running,
        )
        offer = admission.place(drop=drop, buyer_id=by_number[5]).offer
        if fault == "both down":
            # The living process's offers reclaim a waiting room's expired holds first, so the
            # offer can come before the dead lease runs out; the duty still moves when it does.
            wait_for(
                "the reclaim duty taken from the killed process",
                lambda: Duty.objects.get(name="holds.reclaim_expired_holds").leased_by not in ("", killed),
                running,
            )
        assert offer is not None and Hold.objects.get(pk=offer.hold).buyer_id == by_number[5]
        assert holds.confirm(hold_id=offer.hold)
        wait_for("sold_out published", lambda: published(slug).get("state") == "sold_out", running)
        numbers = invariant(drop_id=drop.pk)
        assert (numbers.sold, numbers.held, numbers.available, numbers.drift) == (4, 0, 0, 0)

        # Every duty of the sale ran in a web process, each taken by one process of the two.
        wait_for(
            "every sale duty covered",
            lambda: (
                Duty.objects.filter(name__in=SALE_DUTIES, ran_by__startswith="web ").count()
                == len(SALE_DUTIES)
            ),
            running,
        )
        log = running.web_log.read_text()
        for name in SALE_DUTIES:
            takers = re.findall(rf"duty {re.escape(name)}: Celery is late with it; (web \S+) runs it", log)
            # One taker per duty; after the kill, another process for what the killed one held.
            if fault == "both down":
                assert 1 <= len(takers) <= 2 and len(set(takers)) == len(takers), (name, takers)
            else:
                assert len(takers) == 1, (name, takers)

        if fault == "both down":
            # Celery comes back: it stamps its runs and the web processes hand every duty back.
            running.start_celery("both")
            wait_for(
                "the duties handed back",
                lambda: (
                    Duty.objects.filter(name__in=SALE_DUTIES[:2], ran_by="celery", leased_by="").count() == 2
                ),
                running,
            )
            covered = {d.name: d.covered_runs for d in Duty.objects.filter(name__in=SALE_DUTIES[:2])}
            time.sleep(3)
            assert {d.name: d.covered_runs for d in Duty.objects.filter(name__in=SALE_DUTIES[:2])} == covered
            assert "admission.tick: handed back" in running.web_log.read_text()


@pytest.mark.servers
@pytest.mark.parametrize("fault", list(CELERY_LEFT))
def test_control_without_the_takeover_the_same_sale_stalls(fault: str, make_buyers) -> None:
    drop = sale(make_buyers, slug="stall-" + fault.replace(" ", "-"), starts_in=2)
    with shop(CELERY_LEFT[fault], takeover=False) as running:
        time.sleep(6)  # the start, and more than the tick's takeover delay (3 s late + a 1 s poll)
        running.alive()
        queue = Queue.objects.get(pk=drop.pk)
        assert (queue.drawn_at, queue.admitted_through) == (None, 0)
        assert not Duty.objects.filter(ran_by__startswith="web ").exists()


def test_one_process_of_many_takes_a_late_duty_and_a_celery_run_takes_it_back() -> None:
    duties.ensure()
    Duty.objects.update(scheduled_ran_at=timezone.now() - timedelta(minutes=5))
    names = list(duties.duties())
    barrier = threading.Barrier(8)
    taken: dict[str, list[str]] = {}

    def take(me: str) -> None:
        try:
            barrier.wait()
            taken[me] = duties.take_late(names, me=me)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=take, args=(f"web {i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    handed = sorted(name for got in taken.values() for name in got)
    assert handed == sorted(names)  # each once, across all eight
    owner = next(me for me, got in taken.items() if "admission.tick" in got)
    assert duties.renew("admission.tick", me=owner)
    assert not duties.renew("admission.tick", me="web stranger")
    assert duties.run_covered("admission.tick", me=owner)
    duties.record_scheduled_run("admission.tick")  # beat is back
    assert not duties.renew("admission.tick", me=owner)
    assert "admission.tick" not in duties.take_late(names, me=owner)
    tick = Duty.objects.get(name="admission.tick")
    assert (tick.ran_by, tick.leased_by, tick.covered_runs) == ("celery", "", 1)


def test_a_duty_that_fails_in_a_web_process_is_recorded_and_stays_late(monkeypatch) -> None:
    duties.ensure()
    Duty.objects.update(scheduled_ran_at=timezone.now() - timedelta(minutes=5), ran_at=None)
    assert "ops.watch_invariants" in duties.take_late(["ops.watch_invariants"], me="web a")

    def broken() -> int:
        raise RuntimeError("the watchdog tripped")

    monkeypatch.setattr(switch, "watch_invariants", broken)
    assert not duties.run_covered("ops.watch_invariants", me="web a")
    (found,) = [d for d in duties.states() if d.name == "ops.watch_invariants"]
    assert found.covered and found.last_error == "RuntimeError: the watchdog tripped"
    with connection.cursor() as cursor:  # never ran: it stays late for the alert
        cursor.execute("SELECT ran_at FROM ops_duty WHERE name = 'ops.watch_invariants'")
        assert cursor.fetchone()[0] is None


def test_the_dashboard_and_metrics_show_a_covered_duty_and_a_late_one(roles: None) -> None:
    duties.ensure()
    Duty.objects.update(scheduled_ran_at=timezone.now())  # Celery on time with everything ...
    Duty.objects.filter(name="admission.tick").update(  # ... but the tick: a web process covers it
        scheduled_ran_at=timezone.now() - timedelta(minutes=5), ran_at=timezone.now(), ran_by="web a:1"
    )
    Duty.objects.filter(name="sale.offer_returns").update(  # and nobody has run the offers for 5 min
        scheduled_ran_at=timezone.now() - timedelta(minutes=5), ran_at=timezone.now() - timedelta(minutes=5)
    )
    on_call = Client()
    on_call.force_login(staff("ola", "On-call"))

    rows = {d["name"]: d for d in on_call.get("/admin/shop/drop/dashboard/data/").json()["duties"]}
    scrape = on_call.get("/metrics").content.decode()

    assert set(rows) == set(schedule.DUTIES)
    assert (rows["admission.tick"]["covered"], rows["admission.tick"]["late"]) == (True, False)
    assert rows["admission.tick"]["ran_by"] == "web a:1"
    assert (rows["sale.offer_returns"]["covered"], rows["sale.offer_returns"]["late"]) == (True, True)
    assert rows["sale.offer_returns"]["age"] >= 299
    assert not any(rows[name]["covered"] for name in set(rows) - {"admission.tick", "sale.offer_returns"})
    assert 'floodgate_duty_covered{duty="admission.tick"} 1.0' in scrape
    assert 'floodgate_duty_covered{duty="ops.watch_invariants"} 0.0' in scrape
    late = re.search(r'floodgate_duty_seconds_since_run\{duty="sale.offer_returns"\} ([0-9.]+)', scrape)
    assert late and float(late.group(1)) >= 299
    page = on_call.get("/admin/shop/drop/dashboard/").content.decode()
    assert 'id="fg-duties"' in page


@pytest.mark.parametrize("keeps_the_lease", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_a_run_longer_than_its_lease_keeps_other_processes_off_it(monkeypatch, keeps_the_lease: bool) -> None:
    """The tick's lease is 4 s (two periods and two seconds); a run of 6 s renews it meanwhile, so
    no other process starts the same duty beside it. The control runs it without the renewal."""
    duties.ensure()
    Duty.objects.update(scheduled_ran_at=timezone.now() - timedelta(minutes=5), ran_at=None)
    keeper = duties.Keeper()
    assert duties.take_late(["admission.tick"], me=keeper.me) == ["admission.tick"]
    monkeypatch.setattr(admission, "tick", lambda: time.sleep(6))
    run = (
        (lambda: keeper._run_keeping_the_lease("admission.tick", 1.0))
        if keeps_the_lease
        else (lambda: duties.run_covered("admission.tick", me=keeper.me))
    )

    def run_then_close() -> None:
        run()
        connections.close_all()

    running = threading.Thread(target=run_then_close)
    running.start()
    time.sleep(5)
    taken = duties.take_late(["admission.tick"], me="web elsewhere:1")
    running.join()

    assert taken == ([] if keeps_the_lease else ["admission.tick"])
