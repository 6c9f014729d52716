"""The claim lane: the reserve API answered without Django's request path, claims batched.

Driven through the real `config.asgi.application` in-process (as tests/admission/test_edge.py
does), and once through a real web process killed mid-batch.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore
from django.db import connection
from django.test import Client, override_settings

from admission import state
from catalogue.services import create_buyers
from config.asgi import application
from core.api import MAX_BODY
from devtools.ports import free_port
from holds import services as holds
from holds.counts import invariant
from holds.models import Hold, HoldState
from sale.lane import Lane
from shop.models import Drop
from tests.conftest import app_env, start_process, wait_for_port
from tests.factories import make_buyer, make_drop
from tests.harness import (
    BODY,
    EDGE,
    Reply,
    bearer,
    call,
    in_thread,
    lock_stock,
    lock_waits,
    reserve_headers,
    run,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_edge")]

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
        entry = EDGE.snapshots.entry(slug)
        known = entry.known if entry is not None else None
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
    blocker = lock_stock(drop.pk)  # the first batch waits at the stock row

    async def scenario() -> tuple[list[Reply], list[Reply]]:
        # Tokens resolved first, as a warm process has them: on a loaded machine 60 cold lookups
        # can outlast the deadline themselves, and the last of "the first" would arrive late.
        await asyncio.gather(*(LANE.buyer_of(token) for token in tokens))
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
    blocker = lock_stock(drop.pk)
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
        "refunded": 0,
        "exchange": 0,
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


@override_settings(IP_RATE_LIMIT_BURST=100_000)
def test_a_crowd_of_new_tokens_is_resolved_in_a_few_queries_not_one_each(work) -> None:
    drop = make_drop(slug="cold", quantity=10, per_buyer_limit=1)
    state.refresh([drop.pk])
    tokens = [buyer.token for buyer in create_buyers(count=300, prefix="cold")]
    forged = [f"forged-{i}" for i in range(20)]
    work.reset()

    replies = crowd(drop.slug, forged + tokens, in_flight=128)  # forged first: before "sold out"

    lookups = [q for q in work.queries if "shop_apitoken" in q]
    assert len(lookups) < 30, len(lookups)  # one query for each group that arrived together
    assert {r.status for r in replies[:20]} == {401}
    assert [r.status for r in replies[20:]].count(201) == 10
    assert work.requests == 0


def session_headers(username: str, *, csrf: bool = True) -> dict[str, str]:
    """A logged-in browser's request: its session cookie, the CSRF cookie and (csrf) the header."""
    client = Client()
    client.force_login(make_buyer(username))
    secret = "s3cr3t" * 5 + "ab"  # a CSRF secret is any 32 letters and digits
    headers = {
        "cookie": f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}; "
        f"{settings.CSRF_COOKIE_NAME}={secret}",
        "idempotency-key": f"page-{username}",
        "content-type": "application/json",
    }
    if csrf:
        headers["x-csrftoken"] = secret
    return headers


def test_the_drop_pages_buy_button_a_session_with_its_csrf_token_is_sold_by_the_lane(work) -> None:
    drop = make_drop(slug="page", quantity=5)
    headers = session_headers("pam")
    work.reset()

    reply = run(lambda: call("POST", "/api/drops/page/holds", headers=headers, body=BODY))
    requests = work.requests
    again = run(lambda: call("POST", "/api/drops/page/holds", headers=headers, body=BODY))

    assert reply.status == 201 and lane_answered(reply) and requests == 0, reply.body
    assert again.status == 200 and again.json()["id"] == reply.json()["id"]
    assert Hold.objects.get(drop=drop).buyer.username == "pam"


@pytest.mark.parametrize(
    ("case", "headers", "status", "error"),
    [
        ("no CSRF token", lambda: session_headers("sid", csrf=False), 403, "csrf_failed"),
        (
            "a wrong CSRF token",
            lambda: {**session_headers("sid"), "x-csrftoken": "x" * 32},
            403,
            "csrf_failed",
        ),
        (
            "an unknown session",
            lambda: {**session_headers("sid"), "cookie": f"{settings.SESSION_COOKIE_NAME}=nosuchsession"},
            401,
            "unauthenticated",
        ),
    ],
)
def test_a_session_that_may_not_claim_gets_djangos_answer_from_the_lane(
    case: str, headers: Callable[[], dict[str, str]], status: int, error: str
) -> None:
    drop = make_drop(slug="page", quantity=5)
    sent = headers()

    lane, django = both_paths("/api/drops/page/holds", sent, BODY)

    assert lane_answered(lane), case
    assert (lane.status, lane.json()["error"]) == (status, error), case
    assert (lane.status, lane.json()) == (django.status, django.json()), case
    assert not Hold.objects.exists() and invariant(drop_id=drop.pk).available == 5


def test_a_session_logged_out_elsewhere_stops_claiming_once_its_cache_entry_is_gone() -> None:
    make_drop(slug="page", quantity=5)
    headers = session_headers("out")
    key = headers["cookie"].split(";")[0].split("=", 1)[1]
    first = run(lambda: call("POST", "/api/drops/page/holds", headers=headers, body=BODY))
    SessionStore(key).delete()  # logged out in another tab
    LANE.forget()  # SESSION_SECONDS later

    later = run(
        lambda: call("POST", "/api/drops/page/holds", headers={**headers, "idempotency-key": "k2"}, body=BODY)
    )

    assert first.status == 201
    assert (later.status, later.json()["error"]) == (401, "unauthenticated") and lane_answered(later)


def test_the_servers_start_warms_the_lanes_threads_and_connections_before_any_request() -> None:
    LANE.settle()  # as a fresh process: no worker threads yet
    told = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    said: list[dict] = []

    async def receive() -> dict:
        return told.pop(0)

    async def send(message: dict) -> None:
        said.append(message)

    run(lambda: application({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, receive, send))
    deadline = time.monotonic() + 10
    while len([t for t in threading.enumerate() if t.name.startswith("claim-lane")]) < 4:
        assert time.monotonic() < deadline, "the lane's threads did not start"
        time.sleep(0.05)
    LANE.settle()  # the warm-up jobs finished: each thread reached the database

    assert [m["type"] for m in said] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


@override_settings(IP_RATE_LIMIT_BURST=100_000)
def test_an_account_or_drop_deleted_while_cached_gets_djangos_answer_and_spoils_no_batch() -> None:
    drop = make_drop(slug="stale", quantity=50, per_buyer_limit=1)
    empty = make_drop(slug="stale-empty", quantity=5, per_buyer_limit=1)
    state.refresh([drop.pk, empty.pk])
    gone = bearer("gone")
    # Claims refused before any hold: the token and both drop rows are now in the lane's caches.
    over = b'{"quantity": 9}'
    warm = [
        run(partial(call, "POST", f"/api/drops/{slug}/holds", headers=reserve_headers(gone), body=over))
        for slug in ("stale", "stale-empty")
    ]
    get_user_model().objects.filter(username="gone").delete()
    others = [buyer.token for buyer in create_buyers(count=20, prefix="stay")]

    async def crowd() -> list[Reply]:
        return await asyncio.gather(
            call("POST", "/api/drops/stale/holds", headers=reserve_headers(gone, "again"), body=BODY),
            *(call("POST", "/api/drops/stale/holds", headers=headers_of(t), body=BODY) for t in others),
        )

    replies = run(crowd)
    Drop.objects.filter(pk=empty.pk).delete()
    after = run(
        lambda: call("POST", "/api/drops/stale-empty/holds", headers=headers_of(others[0]), body=BODY)
    )

    assert [w.status for w in warm] == [422, 422]
    assert (replies[0].status, replies[0].json()["error"]) == (401, "unauthenticated")
    assert [r.status for r in replies[1:]] == [201] * 20  # the batch they shared was not spoiled
    assert (after.status, after.json()["error"]) == (404, "not_found")


@override_settings(IP_RATE_LIMIT_BURST=100_000)
def test_claims_queued_when_a_batch_learns_nothing_is_left_hear_it_without_another_batch(monkeypatch) -> None:
    from sale import batcher

    # The subject is the fan-out, not the deadline: on a loaded machine a claim queued behind a
    # batch held at the row would otherwise be told "busy" before the row is let go.
    monkeypatch.setattr(batcher, "DEADLINE", 30.0)
    drop = make_drop(slug="last", quantity=1, per_buyer_limit=1)
    holds.reserve(drop=drop, buyer_id=make_buyer("first").pk, quantity=1, idempotency_key="k")  # none left
    tokens = [buyer.token for buyer in create_buyers(count=40, prefix="late")]
    run(lambda: asyncio.gather(*(LANE.buyer_of(token) for token in tokens)))  # warm: no token waits
    before = LANE.stats["batches"]
    blocker = lock_stock(drop.pk)  # the first batch waits at the stock row; the rest queue
    stock = drop.variants.get().pk  # the batcher queues per variant

    async def scenario() -> list[Reply]:
        first = asyncio.ensure_future(
            call("POST", "/api/drops/last/holds", headers=headers_of(tokens[0]), body=BODY)
        )
        deadline = time.monotonic() + 30
        while await in_thread(lock_waits) < 1:  # its batch is waiting at the row
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        queued = [
            asyncio.ensure_future(call("POST", "/api/drops/last/holds", headers=headers_of(t), body=BODY))
            for t in tokens[1:]
        ]
        deadline = time.monotonic() + 30
        while LANE.batcher.queued(stock) < len(queued) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)  # every one queued behind the batch held at the row
        await asyncio.to_thread(blocker.rollback)
        return [await first, *await asyncio.gather(*queued)]

    try:
        replies = run(scenario)
    finally:
        blocker.close()

    assert {(r.status, r.json()["error"]) for r in replies} == {(409, "sold_out")}
    assert LANE.stats["batches"] - before == 1  # the 39 queued behind it needed no batch of their own
    assert Hold.objects.filter(drop=drop).count() == 1


@pytest.mark.parametrize("path", ["/api/drops/hosted/holds", "/api/drops/hosted/queue"])
def test_a_claim_or_join_for_a_host_django_refuses_gets_djangos_400_not_the_lane(work, path: str) -> None:
    drop = make_drop(slug="hosted", quantity=5, waiting_room=path.endswith("queue"))
    auth = bearer("hal")

    with override_settings(ALLOWED_HOSTS=["shop.example"]):
        refused = run(
            lambda: call(
                "POST", path, headers={**reserve_headers(auth), "host": "attacker.invalid"}, body=BODY
            )
        )
        served = run(
            lambda: call("POST", path, headers={**reserve_headers(auth), "host": "shop.example"}, body=BODY)
        )

    assert refused.status == 400 and not lane_answered(refused)
    assert served.status in (200, 201) and lane_answered(served)
    assert Hold.objects.filter(drop=drop).count() == (0 if path.endswith("queue") else 1)


def test_a_real_server_redirects_plain_http_as_django_does_and_its_secure_answers_carry_hsts(
    payment_provider: str,
) -> None:
    """Django reads SECURE_SSL_REDIRECT when its middleware is built: a server of its own, with the
    production profile's redirect, proxy header and HSTS."""
    state.refresh([make_drop(slug="secure", quantity=5).pk])
    token = create_buyers(count=1, prefix="sue")[0].token
    port = free_port()
    env = {
        **app_env(payment_provider, f"http://127.0.0.1:{port}"),
        "SECURE_SSL_REDIRECT": "1",
        "TRUST_X_FORWARDED_FOR": "1",
        "SECURE_HSTS_SECONDS": "31536000",
        "ALLOWED_HOSTS": "shop.example",
        "DB_POOL_MAX_SIZE": "4",
    }
    daphne = str(Path(sys.executable).parent / "daphne")
    process, log = start_process(
        f"lane-tls-{port}", [daphne, "-b", "127.0.0.1", "-p", str(port), "config.asgi:application"], env
    )
    claim = {"Authorization": f"Bearer {token}", "Idempotency-Key": "k1", "Host": "shop.example"}
    https = {"X-Forwarded-Proto": "https"}
    try:
        wait_for_port(port, process, log)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            plain = client.post("/api/drops/secure/holds", json={"quantity": 1}, headers=claim)
            foreign = client.post(
                "/api/drops/secure/holds",
                json={"quantity": 1},
                headers={**claim, **https, "Host": "bad.invalid"},
            )
            made = Hold.objects.filter(drop__slug="secure").count()
            secure = client.post("/api/drops/secure/holds", json={"quantity": 1}, headers={**claim, **https})
    finally:
        process.kill()
        process.wait(10)

    assert (
        plain.status_code == 301
        and plain.headers["location"] == "https://shop.example/api/drops/secure/holds"
    )
    assert foreign.status_code == 400 and "x-floodgate-lane" not in foreign.headers
    assert made == 0  # neither made a hold
    assert secure.status_code == 201 and secure.headers["x-floodgate-lane"] == "hit"
    assert secure.headers["strict-transport-security"] == "max-age=31536000"


@override_settings(SECURE_HSTS_SECONDS=600, SECURE_HSTS_INCLUDE_SUBDOMAINS=True, SECURE_HSTS_PRELOAD=False)
def test_the_edges_own_answers_carry_the_hsts_django_would_send(work) -> None:
    state.refresh([make_drop(slug="strict", quantity=5).pk])

    answer = run(lambda: call("GET", "/api/drops/strict"))

    assert answer.edge and answer.headers["strict-transport-security"] == "max-age=600; includeSubDomains"


@pytest.mark.parametrize(
    ("case", "content_type", "body"),
    [
        ("a malformed multipart body", "multipart/form-data; boundary=zzz", b"--zzz\r\nno headers here"),
        ("a multipart body without its boundary", "multipart/form-data", b"quantity=1"),
        (
            "more form fields than Django reads",
            "application/x-www-form-urlencoded",
            b"&".join(b"f%d=1" % n for n in range(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 5)),
        ),
    ],
)
def test_a_session_claim_with_a_form_body_django_cannot_read_gets_djangos_answer_not_a_500(
    case: str, content_type: str, body: bytes
) -> None:
    drop = make_drop(slug="formed", quantity=5)
    sent = {**session_headers("fay"), "content-type": content_type}

    lane, django = both_paths("/api/drops/formed/holds", sent, body)

    assert 400 <= lane.status < 500, (case, lane.status, lane.body[:200])
    assert (lane.status, lane.body) == (django.status, django.body), case
    assert not Hold.objects.exists() and invariant(drop_id=drop.pk).available == 5


def test_a_deactivated_buyer_with_a_cached_token_cannot_pin_a_chosen_seat() -> None:
    """The lane caches who a token is; the chosen-seat claim (`reserve`, INSERT_HOLD) checks the
    account itself, as the batch claim does, so a ban holds at once in every process."""
    make_drop(slug="warm", quantity=4)
    drop = make_drop(slug="seats", quantity=4, mode="units")
    auth = bearer("ban")
    seat = b'{"quantity": 1, "unit": "2"}'
    warm = run(lambda: call("POST", "/api/drops/warm/holds", headers=reserve_headers(auth), body=BODY))
    get_user_model().objects.filter(username="ban").update(is_active=False)  # banned meanwhile

    pinned = run(lambda: call("POST", "/api/drops/seats/holds", headers=reserve_headers(auth), body=seat))

    assert warm.status == 201 and lane_answered(warm)  # the token is in this process's cache now
    assert pinned.status == 401 and pinned.json()["error"] == "unauthenticated", pinned.body
    assert not Hold.objects.filter(drop=drop).exists()


def test_a_buyer_in_line_who_reserves_before_the_start_hears_when_it_opens_on_both_paths() -> None:
    from datetime import timedelta

    from django.utils import timezone

    from admission.models import Ticket

    drop = make_drop(slug="line-later", waiting_room=True, starts_at=timezone.now() + timedelta(hours=1))
    auth = bearer("early-bird")
    joined = run(lambda: call("POST", "/api/drops/line-later/queue", headers=auth))
    assert joined.status == 200 and Ticket.objects.filter(drop=drop).count() == 1, joined.body

    lane, django = both_paths("/api/drops/line-later/holds", reserve_headers(auth), BODY)

    assert (lane.status, lane.json()["error"]) == (425, "not_started"), lane.body
    assert (lane.status, lane.body) == (django.status, django.body)
    assert lane_answered(lane) and "starts_at" in lane.json()


def test_a_token_looked_up_while_its_buyer_is_revoked_is_not_kept(monkeypatch) -> None:
    """The lookup read the database before the revocation's commit; caching its answer would trust
    the revoked token for AUTH_SECONDS. Only this token's answer is dropped, not the whole cache."""
    from sale import lane as lane_module
    from sale import workers

    lane = Lane(threads=1)
    looking, revoked = threading.Event(), threading.Event()

    def slow_lookup(tokens: list[str]) -> dict[str, int]:
        if tokens == ["other"]:
            return {"other": 8}
        looking.set()
        revoked.wait(10)  # the database was read; the revocation lands before the answer is kept
        return dict.fromkeys(tokens, 7)

    async def scene() -> tuple[int | None, int | None]:
        monkeypatch.setattr(workers, "users_of_tokens", slow_lookup)
        await lane.buyer_of("other")  # another buyer's, cached before
        lookup = asyncio.ensure_future(lane.buyer_of("revoked"))
        await asyncio.get_running_loop().run_in_executor(None, looking.wait)
        lane_module.forget_buyer(7)
        revoked.set()
        return await lookup, lane.credentials.tokens.kept("other")

    try:
        answered, other = asyncio.run(scene())
    finally:
        lane.settle()

    assert answered == 7  # this request was authenticated before the ban: the claim SQL decides it
    assert lane.credentials.tokens.kept("revoked") is None  # but the next one looks it up again
    assert other == 8
