"""The line closes and is drawn before the start, and the first wave goes in at the start, whichever
of beat, the worker or the web processes is alive (ops/duties.py covers a late Celery).

Each run starts real processes on the test database: the web server with the worker (beat down), with
beat (the worker down), or Celery's worker and beat without any web process. The drop names a real
quicknet round that no relay here can give (as on a machine whose way out is blocked): the close must
come before that round is due, and the draw, having asked again, falls back before the start.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.utils import timezone

from admission import beacon, drawing
from admission import services as admission
from admission.models import Queue, Ticket, Wave
from devtools.ports import free_port
from ops import duties
from ops.models import Duty
from tests.conftest import TEST_DATA, WEB, app_env, purge_queue, start_group, stop_group, wait_for_port
from tests.factories import make_drop
from tests.ops.test_duties import CELERY_LAST_RAN_SECONDS, QUICK, Shop, wait_for

# servers: the store and Celery, each down in turn
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.servers]
log = logging.getLogger(__name__)

STARTS_IN = 22  # seconds: the processes start and take over their duties well before the close
CLOSE = 10  # the default line_close_seconds


@contextlib.contextmanager
def running(alive: str) -> Iterator[Shop]:
    port = free_port()
    env = {
        **app_env("http://127.0.0.1:9", f"http://127.0.0.1:{port}"),
        **QUICK,
        "DB_POOL_MAX_SIZE": "4",
        "DB_POOL_MIN_SIZE": "1",
        "DUTY_TAKEOVER": "0" if alive == "nothing" else "1",
        "DRAW_BEACON": "quicknet",
        "DRAW_BEACON_URLS": "http://127.0.0.1:9",  # nothing listens
    }
    purge_queue()
    found = Shop(env, web_log=TEST_DATA / "no-web.log", processes=[])
    try:
        if alive != "celery":  # the web tier (two worker processes), with its duty keeper
            web, log = start_group(
                f"close-web-{port}", [WEB, "--host", "127.0.0.1", "--port", str(port), "--workers", "2"], env
            )
            found.processes.append(web)
            found.web_log = log
            wait_for_port(port, web, log)
        if alive in ("web and worker", "web and beat", "celery"):
            found.start_celery({"web and worker": "worker", "web and beat": "beat", "celery": "both"}[alive])
        yield found
    finally:
        for process in reversed(found.processes):
            stop_group(process)
        purge_queue()


def sale(make_buyers, settings, *, slug: str):
    settings.DRAW_BEACON = "quicknet"
    settings.DRAW_BEACON_URLS = ["http://127.0.0.1:9"]
    duties.ensure()
    Duty.objects.update(scheduled_ran_at=timezone.now() - timedelta(seconds=CELERY_LAST_RAN_SECONDS))
    drop = make_drop(
        slug=slug, quantity=4, waiting_room=True, starts_at=timezone.now() + timedelta(seconds=STARTS_IN)
    )
    for buyer in make_buyers(12, prefix=f"{slug}-"):
        admission.join(drop=drop, buyer_id=buyer)
    return drop


@pytest.mark.parametrize("alive", ["web and worker", "web and beat", "celery"])
def test_the_line_closes_and_is_drawn_before_the_start_whoever_is_alive(
    alive: str, make_buyers, settings
) -> None:
    slug = "close-" + alive.replace(" ", "-")
    drop = sale(make_buyers, settings, slug=slug)
    closes = drawing.closes_at(drop)
    named = Queue.objects.get(pk=drop.pk).beacon_round
    assert named is not None and beacon.QUICKNET.time_of(named) < drop.starts_at - timedelta(seconds=5)
    with running(alive) as shop:
        wait_for("the close", lambda: Queue.objects.get(pk=drop.pk).entries_closed_at is not None, shop, 40)
        # joins after the close: behind the whole closed list, in the order they come
        late = [
            admission.join(drop=drop, buyer_id=b).ticket.number
            for b in make_buyers(2, prefix=f"{slug}-late-")
        ]
        wait_for("the first wave", lambda: Wave.objects.filter(drop=drop).exists(), shop, 40)
        queue = Queue.objects.get(pk=drop.pk)
        first_wave = Wave.objects.filter(drop=drop).order_by("at").first()

    assert queue.entries_closed_at is not None and queue.drawn_at is not None and first_wave is not None
    log.warning(
        "%s",
        f"{alive}: closed {(queue.entries_closed_at - closes).total_seconds():+.2f} s after its time, drawn "
        f"{(queue.drawn_at - drop.starts_at).total_seconds():+.2f} s, first wave "
        f"{(first_wave.at - drop.starts_at).total_seconds():+.2f} s from the start; round due "
        f"{(beacon.QUICKNET.time_of(named) - drop.starts_at).total_seconds():+.2f} s",
    )
    # the close on time (a tick's second and a loaded machine), before the named round is due
    assert closes <= queue.entries_closed_at < closes + timedelta(seconds=3)
    assert queue.beacon_round == named and queue.entries_closed_at < beacon.QUICKNET.time_of(named)
    # the draw by the start: the round asked for again, then the seed alone, said so
    assert queue.drawn_at < drop.starts_at and queue.drawn_entries == 12
    assert queue.beacon_status == "unreachable" and queue.beacon_note
    # the first wave at the start, not before
    assert drop.starts_at <= first_wave.at < drop.starts_at + timedelta(seconds=2)
    assert late == [13, 14]
    assert Ticket.objects.filter(drop=drop, number__lte=12).count() == 12


def test_control_with_nothing_running_the_duties_the_line_does_not_close(make_buyers, settings) -> None:
    drop = sale(make_buyers, settings, slug="close-nothing")
    with running("nothing") as shop:
        wait_for(
            "the close time and three seconds",
            lambda: timezone.now() > drawing.closes_at(drop) + timedelta(seconds=3),
            shop,
            40,
        )
        shop.alive()
        assert Queue.objects.get(pk=drop.pk).entries_closed_at is None
