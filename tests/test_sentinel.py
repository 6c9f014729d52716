"""The Redis master SIGKILLed mid-sale under Sentinel: the store follows the promoted replica.

Debian's redis-server (a master and its replica) and redis-sentinel (three) run on this machine
(devtools/sentinel.py); the production server (two workers) and a Celery worker with beat are
started with REDIS_SENTINELS, so the cache, the gate, the rate limits, the snapshots, Celery's
broker, the Channels layer and the edge's and lane's own clients all ask the sentinels for the
master. A crowd joins a waiting-room drop over HTTP, polls its place and buys with its admission
token; when half the units are held the master is killed. Then:

- the sale goes on once the replica is promoted, and every unit is held;
- every hold a buyer was told about exists, with that buyer; the invariant is exact;
- every ticket a buyer was given exists with the same number (the line keeps its order), and
  only admitted numbers hold a unit;
- no buyer got a 500; what Redis alone held (rate-limit counters, snapshots, the gate) is
  rebuilt or starts afresh on the new master.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis as redis_lib
from django.utils import timezone
from websockets.sync.client import connect
from websockets.typing import Origin

from admission import state
from admission.models import Queue, Ticket
from catalogue import services as shop
from devtools import sentinel
from devtools.ports import free_port
from holds.counts import invariant
from holds.models import Hold
from ops.models import Duty
from tests.conftest import CELERY, TEST_DATA, WEB, app_env, start_group, stop_group, wait_for_port
from tests.factories import make_drop

# servers: Redis under Sentinel, the store and Celery
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.servers]
logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request of the crowd otherwise

UNITS = 30
BUYERS = 90


@dataclass
class Crowd:
    base: str
    slug: str
    tokens: dict[int, str]  # buyer -> bearer token
    statuses: Counter[int] = field(default_factory=Counter)
    tickets: dict[int, int] = field(default_factory=dict)  # buyer -> ticket number told
    holds: dict[int, int] = field(default_factory=dict)  # buyer -> hold id told (201/200)
    held_at: list[float] = field(default_factory=list)
    quit: dict[int, str] = field(default_factory=dict)  # buyer -> why it stopped trying
    stop: threading.Event = field(default_factory=threading.Event)
    pause: random.Random = field(default_factory=lambda: random.Random(7))

    def ask(self, client: httpx.Client, method: str, path: str, **kwargs: Any) -> httpx.Response | None:
        """One request until a final answer: 503/429 and a lost connection retried, as a client does."""
        while not self.stop.is_set():
            try:
                answer = client.request(method, path, **kwargs)
            except httpx.HTTPError:
                time.sleep(0.2)
                continue
            self.statuses[answer.status_code] += 1
            if answer.status_code in {429, 503}:
                time.sleep(min(float(answer.headers.get("Retry-After") or 0.5), 1.0))
                continue
            return answer
        return None

    def buyer(self, buyer: int) -> None:
        auth = {"Authorization": f"Bearer {self.tokens[buyer]}"}
        with httpx.Client(base_url=self.base, timeout=10, trust_env=False, headers=auth) as client:
            joined = self.ask(client, "POST", f"/api/drops/{self.slug}/queue")
            if joined is None or joined.status_code not in {200, 201}:
                return
            place = joined.json()
            key = uuid.uuid4().hex
            while not self.stop.is_set():
                if place.get("ticket"):
                    self.tickets[buyer] = place["ticket"]
                if place.get("admission_token"):
                    time.sleep(
                        self.pause.uniform(0, 5)
                    )  # a person's click, not a script's: the sale spans the kill
                    held = self.ask(
                        client,
                        "POST",
                        f"/api/drops/{self.slug}/holds",
                        json={"quantity": 1},
                        headers={"Idempotency-Key": key, "X-Admission-Token": place["admission_token"]},
                    )
                    if held is not None and held.status_code in {200, 201}:
                        self.holds[buyer] = held.json()["id"]
                        self.held_at.append(time.monotonic())
                    if held is None or held.status_code != 403:  # 403: the token lapsed; ask again
                        self.quit[buyer] = f"hold answered {held and held.status_code}"
                        return
                if place.get("state") == "sold_out":
                    self.quit[buyer] = f"told sold out at ticket {place.get('ticket')}"
                    return
                # told it is unlikely, a person mostly stays on the page (it keeps asking): a quitter
                # here would make an estimate the store may revise after a failover a sale's end
                time.sleep(1.0 if place.get("unlikely") else 0.3)
                polled = self.ask(
                    client,
                    "GET",
                    f"/api/drops/{self.slug}/queue",
                    headers={"X-Queue-Ticket": str(place.get("queue_ticket") or "")},
                )
                if polled is None or polled.status_code != 200:
                    self.quit[buyer] = f"poll answered {polled and polled.status_code}"
                    return
                place = polled.json()


@contextlib.contextmanager
def store(env: dict[str, str]) -> Iterator[tuple[Path, Path]]:
    port = int(env["PORT"])
    web, log = start_group(
        f"sentinel-web-{port}", [WEB, "--host", "127.0.0.1", "--port", str(port), "--workers", "2"], env
    )
    schedule = TEST_DATA / f"beat-sentinel-{port}"
    celery, celery_log = start_group(
        f"sentinel-celery-{port}",
        [CELERY, "-A", "config.celery:app", "worker", "-B", "-s", str(schedule), "--concurrency", "2",
         "-l", "info", "--without-heartbeat", "--without-gossip", "--without-mingle"],
        env,
    )  # fmt: skip
    try:
        wait_for_port(port, web, log)
        yield log, celery_log
    finally:
        stop_group(celery)
        stop_group(web)


def test_the_redis_master_killed_mid_sale_the_store_follows_the_promoted_replica(make_buyers) -> None:
    drop = make_drop(
        slug="sentinel-run",
        quantity=UNITS,
        waiting_room=True,
        admission_wave_seconds=1,
        per_buyer_limit=1,
        starts_at=timezone.now() + timedelta(seconds=6),
    )
    buyers = make_buyers(BUYERS, prefix="sentinel-")
    tokens = {buyer: shop.issue_api_token(user_id=buyer) for buyer in buyers}
    folder = TEST_DATA / f"sentinel-{free_port()}"
    with sentinel.running(folder) as redis_servers:
        port = free_port()
        env = {
            **app_env("http://127.0.0.1:9", f"http://127.0.0.1:{port}"),
            **redis_servers.env,
            "PORT": str(port),
            "DB_POOL_MAX_SIZE": "6",
            "DB_POOL_MIN_SIZE": "1",
            "DUTY_TAKEOVER": "1",
            "RATE_LIMIT_BURST": "1000",
        }
        with store(env) as (web_log, celery_log):
            crowd = Crowd(f"http://127.0.0.1:{port}", drop.slug, tokens)
            threads = [threading.Thread(target=crowd.buyer, args=(b,)) for b in buyers]
            for thread in threads:
                thread.start()
            deadline = time.monotonic() + 60
            while len(crowd.holds) < UNITS // 3:
                assert time.monotonic() < deadline, (
                    f"half the units never sold:\n{web_log.read_text()[-3000:]}"
                )
                time.sleep(0.05)

            # A waiting page's socket, open across the failover.
            page = f"ws://127.0.0.1:{port}/ws/drops/{drop.slug}/queue/"
            with connect(page, origin=Origin(f"http://127.0.0.1:{port}"), open_timeout=10) as socket:
                socket.recv(timeout=5)
                killed_at, killed_wall = time.monotonic(), timezone.now()
                old = redis_servers.kill_master()
                promoted = redis_servers.wait_for_promotion(old)
                while Hold.objects.filter(drop=drop).count() < UNITS:
                    assert time.monotonic() - killed_at < 60, (
                        f"the sale stopped: {sum(t.is_alive() for t in threads)} buyers still trying,"
                        f" answers {dict(crowd.statuses)}, quit {Counter(crowd.quit.values())},"
                        f" the sentinels name {redis_servers.master()}"
                        f" (killed {old}):\n{web_log.read_text()[-4000:]}\n{redis_servers.logs()}"
                    )
                    time.sleep(0.1)
                crowd.stop.set()
                for thread in threads:
                    thread.join(30)
                # Celery's broker followed too: beat's tick ran in the worker after the kill. Its
                # reconnection can take a minute beside the suite's other session (docker, netns).
                while not Duty.objects.filter(
                    name="admission.tick", scheduled_ran_at__gt=killed_wall
                ).exists():
                    assert time.monotonic() - killed_at < 120, (
                        f"Celery never ran the tick again:\n{celery_log.read_text()[-4000:]}"
                    )
                    time.sleep(0.2)
                # The socket hears the line's last state through the Channels layer on the new master.
                heard: list[dict[str, Any]] = []
                with contextlib.suppress(TimeoutError):
                    while not heard or heard[-1].get("state") != "all_held":
                        heard.append(json.loads(socket.recv(timeout=state.REBROADCAST_SECONDS + 5)))
            # the new master carries the published snapshot again (rebuilt by the tick or a web process)
            new_master = redis_lib.Redis(port=redis_servers.master() or 0, socket_timeout=1)
            snapshot_rebuilt = bool(new_master.exists(f"fg:drop:{drop.slug}"))

    after = [t - killed_at for t in crowd.held_at if t - killed_at > promoted]
    print(  # noqa: T201 (the run's figures, as the README reports them)
        f"\nsentinel run: {len(crowd.holds) - len(after)} holds before the promotion, {len(after)} after;"
        f" promoted {promoted:.1f} s after the kill, the first hold after it {min(after) - promoted:.2f} s"
        f" later; answers {dict(sorted(crowd.statuses.items()))}"
    )
    assert after  # the sale went on after the promotion (the wait above bounds how long it may take)
    assert crowd.statuses[500] == 0 and not [s for s in crowd.statuses if s >= 500 and s != 503]
    # every hold told exists with its buyer; exactly the stock is held
    rows = {h.buyer_id: h for h in Hold.objects.filter(drop=drop)}
    assert {buyer: rows[buyer].pk for buyer in crowd.holds} == crowd.holds
    numbers = invariant(drop_id=drop.pk)
    assert (numbers.held, numbers.available, numbers.drift) == (UNITS, 0, 0)
    # every ticket told is in the table with its number; only admitted numbers hold a unit
    stored = {t.buyer_id: t.number for t in Ticket.objects.filter(drop=drop)}
    assert {buyer: stored[buyer] for buyer in crowd.tickets} == crowd.tickets
    assert len(set(stored.values())) == len(stored)
    admitted = Queue.objects.get(pk=drop.pk).admitted_through
    assert all((number := stored[buyer]) is not None and number <= admitted for buyer in rows)
    assert snapshot_rebuilt
    assert heard and heard[-1]["state"] == "all_held", heard
