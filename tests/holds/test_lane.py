"""The claim lane: the reserve API answered without Django's request path, claims batched.

Driven through the real `config.asgi.application` in-process (as tests/admission/test_edge.py
does), and once through a real web process killed mid-batch.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from django.db import connection
from django.test import override_settings

from admission import state
from core.api import MAX_BODY
from holds.lane import Lane
from holds.models import Hold, HoldState
from inventory.selectors import invariant
from shop.models import Drop
from shop.services import create_buyers
from tests.admission.test_edge import (  # noqa: F401 - fixtures: work, fresh_edge
    BODY,
    EDGE,
    Reply,
    _lock_stock,
    bearer,
    call,
    fresh_edge,
    reserve_headers,
    run,
    work,
)
from tests.conftest import app_env, free_port, start_process, wait_for_port
from tests.factories import make_drop

pytestmark = pytest.mark.django_db(transaction=True)

LANE: Lane = EDGE.lane  # type: ignore[assignment]


def lane_answered(reply: Reply) -> bool:
    return reply.headers.get("x-floodgate-lane") == "hit"


def test_a_claim_that_may_succeed_is_sold_by_the_lane_without_django(work) -> None:
    drop = make_drop(slug="lane", quantity=5, mode="units")
    auth = bearer("ann")
    work.reset()

    reply = run(lambda: call("POST", "/api/drops/lane/holds", headers=reserve_headers(auth), body=BODY))
    again = run(lambda: call("POST", "/api/drops/lane/holds", headers=reserve_headers(auth), body=BODY))

    assert reply.status == 201 and lane_answered(reply) and work.requests == 0
    body = reply.json()
    assert (body["drop"], body["state"], body["quantity"], body["units"], body["order"]) == (
        "lane",
        "held",
        1,
        ["1"],
        None,
    )
    assert again.status == 200 and again.json()["id"] == body["id"]  # the same key: the same hold
    assert Hold.objects.get(drop=drop).pk == body["id"]


def both_paths(path: str, headers: dict[str, str], body: bytes) -> tuple[Reply, Reply]:
    """The same request through the lane and through Django's own path."""
    through_lane = run(lambda: call("POST", path, headers=headers, body=body))
    EDGE.lane = None
    try:
        through_django = run(lambda: call("POST", path, headers=headers, body=body))
    finally:
        EDGE.lane = LANE
    return through_lane, through_django


BAD = [
    ("no key", {}, BODY, "/api/drops/{slug}/holds", ("idempotency-key",)),
    ("a bad key", {"idempotency-key": "no spaces please"}, BODY, "/api/drops/{slug}/holds", ()),
    ("garbage JSON", {}, b"{quantity: 1", "/api/drops/{slug}/holds", ()),
    ("a JSON list", {}, b"[1]", "/api/drops/{slug}/holds", ()),
    ("deep nesting", {}, b"[" * 5000 + b"]" * 5000, "/api/drops/{slug}/holds", ()),
    ("a huge body", {}, b'{"quantity": 1, "x": "' + b"x" * MAX_BODY + b'"}', "/api/drops/{slug}/holds", ()),
    ("a string quantity", {}, b'{"quantity": "1"}', "/api/drops/{slug}/holds", ()),
    ("quantity 0", {}, b'{"quantity": 0}', "/api/drops/{slug}/holds", ()),
    ("over the limit", {}, b'{"quantity": 99}', "/api/drops/{slug}/holds", ()),
    ("a unit that is no label", {}, b'{"quantity": 1, "unit": 5}', "/api/drops/{slug}/holds", ()),
    ("a unit in a drop of buckets", {}, b'{"quantity": 1, "unit": "A1"}', "/api/drops/{slug}/holds", ()),
    ("an unknown drop", {}, BODY, "/api/drops/nope/holds", ()),
    ("a bad bearer token", {"authorization": "Bearer forged"}, BODY, "/api/drops/{slug}/holds", ()),
    ("no credentials", {"authorization": ""}, BODY, "/api/drops/{slug}/holds", ()),
]


@pytest.mark.parametrize(("case", "extra", "body", "path", "drop_headers"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_gets_the_same_clear_answer_as_through_django_and_changes_nothing(
    case: str, extra: dict[str, str], body: bytes, path: str, drop_headers: tuple[str, ...]
) -> None:
    drop = make_drop(slug="garbage", quantity=5, per_buyer_limit=2)
    headers = {k: v for k, v in {**reserve_headers(bearer("gus")), **extra}.items() if k not in drop_headers}
    headers = {k: v for k, v in headers.items() if v}

    lane, django = both_paths(path.format(slug=drop.slug), headers, body)

    assert 400 <= lane.status < 500, (case, lane.status, lane.body[:200])
    assert (lane.status, lane.json()) == (django.status, django.json()), case
    assert not Hold.objects.exists()
    assert invariant(drop_id=drop.pk).available == 5


@pytest.mark.parametrize(
    "body",
    [b'{"quantity": 1, "unit": "A\\u0000"}', b'{"quantity": 1, "unit": "A\\ud800"}'],
    ids=["NUL", "lone surrogate"],
)
def test_a_unit_label_postgresql_cannot_take_is_the_same_422_on_both_paths(body: bytes) -> None:
    drop = make_drop(slug="seats", quantity=3, mode="units", unit_labels=["A1", "A2", "A3"])

    lane, django = both_paths("/api/drops/seats/holds", reserve_headers(bearer("nul")), body)

    assert lane.status == 422 and lane.json()["error"] == "invalid", lane.body[:200]
    assert (lane.status, lane.json()) == (django.status, django.json())
    assert not Hold.objects.exists()
    assert invariant(drop_id=drop.pk).available == 3


def test_an_idempotency_key_again_with_another_quantity_is_422_through_the_lane(work) -> None:
    drop = make_drop(slug="lane-reuse", quantity=5, per_buyer_limit=3)
    headers = reserve_headers(bearer("kim"))
    path = "/api/drops/lane-reuse/holds"

    first = run(lambda: call("POST", path, headers=headers, body=b'{"quantity": 1}'))
    other = run(lambda: call("POST", path, headers=headers, body=b'{"quantity": 2}'))
    same = run(lambda: call("POST", path, headers=headers, body=b'{"quantity":1}'))

    assert first.status == 201 and lane_answered(first)
    assert (other.status, other.json()["error"]) == (422, "idempotency_key_reused") and lane_answered(other)
    assert same.status == 200 and same.json()["id"] == first.json()["id"]
    assert Hold.objects.get(drop=drop).quantity == 1


def headers_of(token: str) -> dict[str, str]:
    """A buyer's reserve headers, one Idempotency-Key per buyer."""
    return reserve_headers({"authorization": f"Bearer {token}"}, key="k" + token[:40].replace("_", "-"))


def crowd(slug: str, tokens: list[str], in_flight: int) -> list[Reply]:
    async def scenario() -> list[Reply]:
        gate = asyncio.Semaphore(in_flight)

        async def one(token: str) -> Reply:
            async with gate:
                return await call("POST", f"/api/drops/{slug}/holds", headers=headers_of(token), body=BODY)

        return await asyncio.gather(*(one(token) for token in tokens))

    return run(scenario)


@override_settings(IP_RATE_LIMIT_BURST=100_000)  # the whole crowd comes from 127.0.0.1 here
@pytest.mark.parametrize(("mode", "buckets"), [("buckets", 1), ("buckets", 16), ("units", 1)])
def test_two_thousand_buyers_through_the_lane_hold_exactly_a_hundred(work, mode: str, buckets: int) -> None:
    slug = f"crowd-{mode}-{buckets}"
    drop = make_drop(slug=slug, quantity=100, mode=mode, buckets=buckets, per_buyer_limit=1)
    state.refresh([drop.pk])
    tokens = [buyer.token for buyer in create_buyers(count=2000, prefix=f"c{buckets}")]
    before = dict(LANE.stats)
    work.reset()

    replies = crowd(drop.slug, tokens, in_flight=128)

    statuses = sorted({r.status for r in replies})
    assert [r.status for r in replies].count(201) == 100, statuses
    # "busy" (503 + Retry-After) only where a batch could not be reached within 200 ms
    assert {r.json()["error"] for r in replies if r.status != 201} <= {"sold_out", "busy"}
    assert work.requests == 0  # none of them needed Django's request path
    assert Hold.objects.filter(drop=drop, state=HoldState.HELD).count() == 100
    assert invariant(drop_id=drop.pk).drift == 0
    batches = LANE.stats["batches"] - before.get("batches", 0)
    batched = LANE.stats["batched"] - before.get("batched", 0)
    assert batched > batches  # claims shared batches: fewer transactions than claims


def test_the_first_sold_out_flips_this_processs_edge_at_once(work, monkeypatch) -> None:
    drop = make_drop(slug="last-one", quantity=1)
    state.refresh([drop.pk])
    buyers = [bearer(name) for name in ("ann", "bob", "cy")]
    flipped: list[tuple[str, bool]] = []

    def note(slug: str) -> None:  # what the edge knew when the lane told it
        known = EDGE._cache[slug].known
        flipped.append((slug, known is not None and known.drop.get("sold_out") is True))
        EDGE.note_sold_out(slug)

    monkeypatch.setattr(LANE, "on_sold_out", note)

    async def scenario() -> list[Reply]:
        assert (await call("GET", "/api/drops/last-one")).status == 200  # the edge has the snapshot
        replies = []
        for auth in buyers:
            work.reset()
            path, headers = "/api/drops/last-one/holds", reserve_headers(auth)
            replies.append(await call("POST", path, headers=headers, body=BODY))
        return replies

    won, told, third = run(scenario)

    assert won.status == 201 and lane_answered(won)
    assert (told.status, told.json()["error"]) == (409, "sold_out") and lane_answered(told)
    assert flipped == [("last-one", False)]  # told by the lane, before any publish reached it
    assert (third.status, third.json()["error"]) == (409, "sold_out")
    assert third.headers["x-floodgate-edge"] == "hit" and work.requests == 0


@override_settings(IP_RATE_LIMIT_BURST=100_000)
def test_claims_wait_for_their_batch_and_busy_comes_only_past_the_deadline() -> None:
    drop = make_drop(slug="slow", quantity=50, per_buyer_limit=1)
    state.refresh([drop.pk])
    tokens = [buyer.token for buyer in create_buyers(count=120, prefix="slow")]
    blocker = _lock_stock(drop.pk)  # the first batch waits at the stock row

    async def scenario() -> tuple[list[Reply], list[Reply]]:
        first = [asyncio.ensure_future(one(token)) for token in tokens[:60]]
        await asyncio.sleep(0.6)  # that batch has now run longer than the deadline
        late = await asyncio.gather(*(one(token) for token in tokens[60:]))
        await asyncio.to_thread(blocker.rollback)
        return list(await asyncio.gather(*first)), late

    async def one(token: str) -> Reply:
        return await call("POST", "/api/drops/slow/holds", headers=headers_of(token), body=BODY)

    try:
        waited, late = run(scenario)
    finally:
        blocker.close()

    assert {r.status for r in waited} <= {201, 409}  # they waited, and were answered
    assert [r.status for r in waited].count(201) == 50
    assert {(r.status, r.headers.get("retry-after")) for r in late} == {(503, "1")}
    assert invariant(drop_id=drop.pk).drift == 0


def test_a_web_process_killed_mid_batch_leaves_no_half_made_hold(payment_provider: str) -> None:
    drop = make_drop(slug="killed", quantity=20, per_buyer_limit=1)
    tokens = [buyer.token for buyer in create_buyers(count=10, prefix="kill")]
    port = free_port()
    env = {**app_env(payment_provider, f"http://127.0.0.1:{port}"), "DB_POOL_MAX_SIZE": "4"}
    daphne = str(Path(sys.executable).parent / "daphne")
    process, log = start_process(
        f"lane-{port}", [daphne, "-b", "127.0.0.1", "-p", str(port), "config.asgi:application"], env
    )
    blocker = _lock_stock(drop.pk)
    try:
        wait_for_port(port, process, log)

        async def send_all() -> None:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
                calls = [
                    client.post(
                        "/api/drops/killed/holds",
                        json={"quantity": 1},
                        headers={"Authorization": f"Bearer {t}", "Idempotency-Key": f"k{n}"},
                    )
                    for n, t in enumerate(tokens)
                ]
                await asyncio.gather(*calls, return_exceptions=True)

        with ThreadPoolExecutor(1) as thread:  # the buyers, on a loop of their own
            sent = thread.submit(asyncio.run, send_all())
            deadline = time.monotonic() + 20
            while not waiting_on_stock():  # the batch has its holds inserted and waits at the stock row
                time.sleep(0.05)
                assert time.monotonic() < deadline, "no batch reached the stock row"
            os.kill(process.pid, signal.SIGKILL)
            process.wait(10)
            sent.result(timeout=30)
    finally:
        blocker.rollback()
        blocker.close()
        if process.poll() is None:
            process.kill()

    deadline = time.monotonic() + 10
    while waiting_on_stock() and time.monotonic() < deadline:  # its backend ends once it sees the client gone
        time.sleep(0.05)
    assert not Hold.objects.filter(drop=drop).exists()  # nothing half-made: the batch rolled back whole
    assert invariant(drop_id=drop.pk).as_json() | {"expired_holds": 0} == {
        "quantity": 20,
        "available": 20,
        "held": 0,
        "sold": 0,
        "expired_unreclaimed": 0,
        "expired_holds": 0,
        "drift": 0,
    }
    assert Drop.objects.get(pk=drop.pk).quantity == 20


def waiting_on_stock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND query LIKE '%%inventory_stockbucket%%'"
        )
        return bool(cursor.fetchone()[0])
