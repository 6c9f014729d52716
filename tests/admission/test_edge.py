"""The admission edge: the cheap "no" from process-local snapshots, before Django and PostgreSQL.

These drive the real `config.asgi.application` in-process with raw ASGI messages. Django runs
views in threads of its own, so queries are counted on every connection any thread opens,
and "entered Django" is counted by Django's request_started signal.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import redis as redis_lib
from django.test import override_settings
from django.utils import timezone

from admission import published, state, tokens
from admission.edge import Edge
from devtools.embedded import start_redis
from holds.counts import invariant
from holds.models import Hold
from holds.services import reserve
from ops import switch
from shop.models import ApiToken
from tests.factories import make_buyer, make_drop
from tests.harness import (
    BODY,
    EDGE,
    DjangoWork,
    Reply,
    bearer,
    call,
    in_thread,
    lock_stock,
    lock_waits,
    reserve_headers,
    run,
    snapshot_in,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_edge")]


# The cheap answers -------------------------------------------------------------------------


def test_drop_state_is_served_by_the_edge_as_django_would(work: DjangoWork, redis: redis_lib.Redis) -> None:
    drop = make_drop(slug="state", quantity=7)
    state.refresh([drop.pk])
    work.reset()

    async def scenario() -> tuple[Reply, Reply]:
        return await call("GET", "/api/drops/state"), await call("HEAD", "/api/drops/state")

    got, head = run(scenario)
    assert (work.queries, work.requests) == ([], 0)

    redis.delete("fg:drop:state")
    EDGE.forget()
    django = run(lambda: call("GET", "/api/drops/state"))

    assert got.status == 200 and got.edge and got.headers["content-type"] == "application/json"
    assert got.json() == django.json() and got.json()["remaining"] == 7 and got.json()["state"] == "live"
    assert head.status == 200 and head.edge and head.body == b""
    assert head.headers["content-length"] == str(len(got.body))
    assert not django.edge and work.queries and work.requests == 1


def _sold_out():
    drop = make_drop(slug="gone", quantity=1, per_buyer_limit=1)
    reserve(drop=drop, buyer_id=make_buyer("early").pk, quantity=1, idempotency_key="k")
    return drop, {}


def _paused():
    drop = make_drop(slug="gone")
    switch.pause_drop(drop=drop, actor_id=None, reason="wrong price")
    return drop, {}


def _not_started():
    return make_drop(slug="gone", starts_at=timezone.now() + timedelta(hours=1)), {}


def _ended():
    start = timezone.now() - timedelta(hours=2)
    return make_drop(slug="gone", starts_at=start, ends_at=start + timedelta(hours=1)), {}


def _line_not_started():
    """A buyer in line before the start: nobody is admitted yet, so the answer is when it opens."""
    return make_drop(slug="gone", waiting_room=True, starts_at=timezone.now() + timedelta(hours=1)), {}


def _waiting_room(token: Callable[[int], str | None]):
    def make():
        drop = make_drop(slug="gone", waiting_room=True)
        found = token(drop.pk)
        return drop, {} if found is None else {"x-admission-token": found}

    return make


@pytest.mark.parametrize(
    ("make", "status", "code"),
    [
        (_sold_out, 409, "sold_out"),
        (_paused, 423, "paused"),
        (_not_started, 425, "not_started"),
        (_line_not_started, 425, "not_started"),
        (_ended, 410, "ended"),
        (_waiting_room(lambda d: "forged:token:value"), 403, "not_admitted"),
        (_waiting_room(lambda d: None), 403, "not_admitted"),
        (_waiting_room(lambda d: tokens.issue(drop_id=d + 1, buyer_id=1, ticket=1)), 403, "not_admitted"),
        (_waiting_room(lambda d: tokens.issue(drop_id=d, buyer_id=1, ticket=1) + "x"), 403, "not_admitted"),
    ],
    ids=[
        "sold-out",
        "paused",
        "not-started",
        "line-not-started",
        "ended",
        "forged",
        "no-token",
        "other-drop",
        "tampered",
    ],
)
def test_a_certain_no_is_answered_without_django(make, status: int, code: str, work: DjangoWork) -> None:
    drop, extra = make()
    auth = bearer("bob")
    state.refresh([drop.pk])
    work.reset()

    reply = run(
        lambda: call("POST", "/api/drops/gone/holds", headers=reserve_headers(auth, **extra), body=BODY)
    )

    assert (reply.status, reply.json()["error"]) == (status, code), reply.body
    assert reply.json()["detail"] and reply.edge
    assert (work.queries, work.requests) == ([], 0)
    assert not Hold.objects.filter(buyer__username="bob").exists()


def test_an_expired_token_is_refused_at_the_edge(work: DjangoWork) -> None:
    drop = make_drop(slug="late", waiting_room=True)
    token = tokens.issue(drop_id=drop.pk, buyer_id=1, ticket=1)
    state.refresh([drop.pk])
    work.reset()

    with override_settings(ADMISSION_TOKEN_SECONDS=-1):
        reply = run(
            lambda: call(
                "POST", "/api/drops/late/holds", headers={"x-admission-token": token, "idempotency-key": "k"}
            )
        )

    assert (reply.status, reply.json()["error"], reply.edge) == (403, "not_admitted", True)
    assert "expired" in reply.json()["detail"] and reply.json()["queue"] is True
    assert (work.queries, work.requests) == ([], 0)


@pytest.mark.usefixtures("edge_alone")
def test_without_a_snapshot_the_same_request_goes_to_django(work: DjangoWork, redis: redis_lib.Redis) -> None:
    drop, _ = _sold_out()
    auth = bearer("bob")
    state.refresh([drop.pk])
    redis.delete("fg:drop:gone")
    work.reset()

    reply = run(lambda: call("POST", "/api/drops/gone/holds", headers=reserve_headers(auth), body=BODY))

    assert (reply.status, reply.json()["error"]) == (409, "sold_out")
    assert not reply.edge
    assert work.requests == 1 and len(work.queries) >= 3  # the token, the drop, the claim


@pytest.mark.usefixtures("edge_alone")
def test_a_stale_snapshot_is_unknown_and_never_says_no_for_django(redis: redis_lib.Redis) -> None:
    """A snapshot older than the edge's limit says "sold out"; Django, asked instead, sells."""
    drop = make_drop(slug="fresh", quantity=3)
    auth = bearer("bob")
    state.refresh([drop.pk])
    snap = snapshot_in(redis, "fresh")
    snap["drop"] |= {"remaining": 0, "sold_out": True}
    snap["at"] = time.time() - EDGE.max_age - 1
    redis.set("fg:drop:fresh", json.dumps(snap))

    async def scenario() -> tuple[Reply, Reply]:
        state_reply = await call("GET", "/api/drops/fresh")
        return state_reply, await call(
            "POST", "/api/drops/fresh/holds", headers=reserve_headers(auth), body=BODY
        )

    looked, bought = run(scenario)

    assert not looked.edge and looked.json()["remaining"] == 3
    assert bought.status == 201 and not bought.edge
    assert invariant(drop_id=drop.pk).held == 1


@pytest.mark.usefixtures("edge_alone")
def test_what_may_succeed_goes_through_to_django(work: DjangoWork) -> None:
    """A live drop with stock, and a waiting-room drop with a genuine token: Django sells."""
    live = make_drop(slug="live", quantity=5)
    room = make_drop(slug="room", quantity=5, waiting_room=True)
    auth = bearer("bob")
    token = tokens.issue(drop_id=room.pk, buyer_id=ApiToken.objects.get().user_id, ticket=1)
    state.refresh([live.pk, room.pk])
    work.reset()

    async def scenario() -> list[Reply]:
        return [
            await call("POST", "/api/drops/live/holds", headers=reserve_headers(auth), body=BODY),
            await call(
                "POST",
                "/api/drops/room/holds",
                headers=reserve_headers(auth, **{"x-admission-token": token}),
                body=BODY,
            ),
        ]

    replies = run(scenario)

    assert [(r.status, r.edge) for r in replies] == [(201, False), (201, False)]
    assert work.requests == 2
    assert invariant(drop_id=live.pk).held == 1 and invariant(drop_id=room.pk).held == 1


def test_a_pause_reaches_the_edge_within_a_second(work: DjangoWork) -> None:
    drop = make_drop(slug="switch", quantity=5)
    auth = bearer("bob")
    state.refresh([drop.pk])

    async def scenario() -> tuple[float, Reply, int]:
        assert (await call("GET", "/api/drops/switch")).edge  # starts the subscriber
        deadline = time.monotonic() + 5
        while not EDGE.listening:
            assert time.monotonic() < deadline, "the edge never subscribed"
            await asyncio.sleep(0.01)
        messages = EDGE.stats["message"]
        await in_thread(lambda: switch.pause_drop(drop=drop, actor_id=None, reason="oversold?"))
        paused_at = time.monotonic()
        while True:
            # Until the message lands, the lane answers 423 too (the claim statement decides);
            # what is measured is when the edge answers it alone.
            work.reset()
            reply = await call("POST", "/api/drops/switch/holds", headers=reserve_headers(auth), body=BODY)
            if (reply.status == 423 and reply.edge) or time.monotonic() - paused_at > 2:
                return time.monotonic() - paused_at, reply, EDGE.stats["message"] - messages
            await asyncio.sleep(0.02)

    took, reply, messages = run(scenario)

    assert (reply.status, reply.json()["error"], reply.edge) == (423, "paused", True)
    assert took < 1.0, f"the edge learnt of the pause after {took:.2f} s"
    assert messages >= 1  # it came by the channel, not by a later read of the key
    assert work.requests == 0 and not work.queries
    assert not Hold.objects.exists()


# The bound on claims in flight -----------------------------------------------------------


@override_settings(CLAIM_CONCURRENCY=2)
@pytest.mark.usefixtures("edge_alone")
def test_claims_beyond_the_bound_are_turned_away_at_once() -> None:
    drop = make_drop(slug="crowd", quantity=20)
    auths = [bearer(f"c{i}") for i in range(10)]
    state.refresh([drop.pk])
    blocker = lock_stock(drop.pk)

    async def scenario() -> tuple[list[Reply], list[Reply], int, int]:
        tasks = [
            asyncio.create_task(
                call("POST", "/api/drops/crowd/holds", headers=reserve_headers(auth), body=BODY)
            )
            for auth in auths
        ]
        try:
            deadline = time.monotonic() + 20
            while sum(t.done() for t in tasks) < 8 or await in_thread(lock_waits) < 2:
                assert time.monotonic() < deadline, [t.done() for t in tasks]
                await asyncio.sleep(0.02)
            early = [t.result() for t in tasks if t.done()]
            in_flight, waiting = EDGE.in_flight, await in_thread(lock_waits)
        finally:
            blocker.rollback()  # the row is free: the two inside finish
        late = await asyncio.gather(*(asyncio.wait_for(t, 20) for t in tasks))
        return early, late, in_flight, waiting

    try:
        early, replies, in_flight, waiting = run(scenario)
    finally:
        blocker.close()

    assert len(early) == 8 and all(r.status == 503 and r.edge for r in early), [r.status for r in early]
    assert all(r.headers["retry-after"] == "1" and r.json()["error"] == "busy" for r in early)
    assert (in_flight, waiting) == (2, 2)  # the two inside were waiting on the stock row
    assert sorted(r.status for r in replies) == [201] * 2 + [503] * 8
    assert EDGE.in_flight == 0
    found = invariant(drop_id=drop.pk)
    assert (found.available, found.held, found.drift) == (18, 2, 0)
    assert Hold.objects.count() == 2


def test_the_count_comes_back_when_django_fails_or_the_client_hangs_up() -> None:
    async def scenario() -> tuple[Reply, int]:
        gate = asyncio.Event()

        async def downstream(scope: Any, receive: Any, send: Any) -> None:
            await gate.wait()
            if scope["path"] == "/drops/fails/buy":
                raise RuntimeError("boom")

        edge = Edge(downstream, claim_limit=1)
        failing = asyncio.create_task(call("POST", "/drops/fails/buy", app=edge))
        await asyncio.sleep(0.05)
        busy = await call("POST", "/drops/other/buy", app=edge)
        gate.set()
        with pytest.raises(RuntimeError):
            await failing
        gate.clear()
        hung_up = asyncio.create_task(call("POST", "/drops/waits/buy", app=edge))
        await asyncio.sleep(0.05)
        hung_up.cancel()
        with pytest.raises(asyncio.CancelledError):
            await hung_up
        await edge.aclose()
        return busy, edge.in_flight

    busy, in_flight = asyncio.run(scenario())

    assert (busy.status, busy.headers["retry-after"], busy.edge) == (503, "1", True)
    assert busy.headers["content-type"].startswith("text/html") and b'href="/drops/other/"' in busy.body
    assert in_flight == 0


# Faults and garbage ------------------------------------------------------------------------


@pytest.mark.servers
@pytest.mark.usefixtures("edge_alone")
def test_with_its_redis_gone_the_edge_passes_everything_to_django(tmp_path, work: DjangoWork) -> None:
    drop, _ = _sold_out()
    auth = bearer("bob")
    url, stop, _running = start_redis(tmp_path)
    stop()  # a real server, stopped: its port refuses
    work.reset()

    async def scenario() -> list[Reply]:
        return [
            await call("GET", "/api/drops/gone"),
            await call("POST", "/api/drops/gone/holds", headers=reserve_headers(auth), body=BODY),
        ]

    with override_settings(REDIS_URL=url):
        looked, tried = run(scenario)

    assert (looked.status, looked.edge, looked.json()["sold_out"]) == (200, False, True)
    assert (tried.status, tried.json()["error"], tried.edge) == (409, "sold_out", False)
    assert work.requests == 2
    assert invariant(drop_id=drop.pk).held == 1


@pytest.mark.servers
def test_a_redis_blip_keeps_a_fresh_snapshot_until_it_is_stale(tmp_path, redis: redis_lib.Redis) -> None:
    drop = make_drop(slug="blip")
    state.refresh([drop.pk])
    url, stop, _running = start_redis(tmp_path)
    snap = snapshot_in(redis, "blip")

    async def django(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b"django"})

    async def scenario() -> list[tuple[int, bool]]:
        with redis_lib.Redis.from_url(url) as other:
            other.set("fg:drop:blip", json.dumps(snap | {"at": time.time()}))
        edge = Edge(django, redis_url=url, refresh_after=0.05, max_age=2.0)
        seen = [await call("GET", "/api/drops/blip", app=edge)]
        stop()
        await asyncio.sleep(0.1)
        seen.append(await call("GET", "/api/drops/blip", app=edge))  # Redis gone, snapshot fresh
        await asyncio.sleep(2.0)
        seen.append(await call("GET", "/api/drops/blip", app=edge))  # Redis gone, snapshot stale
        await edge.aclose()
        return [(r.status, r.edge) for r in seen]

    try:
        seen = asyncio.run(scenario())
    finally:
        stop()

    assert seen == [(200, True), (200, True), (299, False)]


@pytest.mark.parametrize(
    ("method", "path", "raw_path", "body", "status"),
    [
        ("POST", "/api/drops//holds", None, BODY, 404),
        ("POST", "/api/drops/" + "x" * 5000 + "/holds", None, BODY, 404),
        ("POST", "/api/drops/caf\ufffd/holds", b"/api/drops/caf%E9/holds", BODY, 404),
        ("GET", "/api/drops/caf\ufffd", b"/api/drops/caf%E9", b"", 404),
        ("GET", "/api/drops/gone/holds", None, b"", 405),
        ("PUT", "/api/drops/gone", None, b"", 405),
        ("BREW", "/api/drops/gone/holds", None, b"\xff\x00", 405),
        ("POST", "/api/drops/gone/holds/", None, BODY, 404),
    ],
)
def test_odd_requests_pass_through_to_djangos_errors(
    method: str, path: str, raw_path: bytes | None, body: bytes, status: int
) -> None:
    drop, _ = _sold_out()
    auth = bearer("bob")
    state.refresh([drop.pk])

    reply = run(lambda: call(method, path, headers=reserve_headers(auth), body=body, raw_path=raw_path))

    assert reply.status == status and not reply.edge, reply.body[:300]
    assert invariant(drop_id=drop.pk).held == 1


def test_garbage_tokens_bodies_and_hosts_do_not_trip_the_edge() -> None:
    room = make_drop(slug="room", waiting_room=True)
    live = make_drop(slug="live", quantity=5)
    auth = bearer("bob")
    state.refresh([room.pk, live.pk])

    async def scenario() -> list[Reply]:
        return [
            # A token of odd bytes: refused at the edge like any forged one.
            await call(
                "POST",
                "/api/drops/room/holds",
                headers=reserve_headers(auth, **{"x-admission-token": "\xff\xfe:.:\x00"}),
                body=BODY,
            ),
            # A body that is not JSON on a drop that may sell: Django names the problem.
            await call("POST", "/api/drops/live/holds", headers=reserve_headers(auth), body=b"\xff{"),
            # A Host Django would refuse: not answered here either.
            await call("GET", "/api/drops/live", headers={"host": "evil.example"}),
        ]

    token, body, host = run(scenario)

    assert (token.status, token.json()["error"], token.edge) == (403, "not_admitted", True)
    assert (body.status, body.json()["error"], body.edge) == (422, "invalid", False)
    assert (host.status, host.edge) == (400, False)
    assert not Hold.objects.exists()


def test_a_crowd_of_polls_waits_for_the_edges_redis_connections_instead_of_being_refused(settings) -> None:
    """redis-py's own pool refuses its 101st connection at once (each refusal sent a poll to Django,
    and under a crowd of 2,000 those ran out of database connections); the edge's pool waits."""
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import MaxConnectionsError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    from core import redis as redis_clients

    async def django(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("not called")

    async def lookups(client: Any) -> list[object]:
        try:
            return await asyncio.gather(
                *(state.drawn_number(client, 1, entry) for entry in range(400)), return_exceptions=True
            )
        finally:
            await client.aclose()

    edge = Edge(django, redis_url=settings.REDIS_URL)
    through_edge = asyncio.run(lookups(edge.snapshots.client()))
    plain = asyncio.run(lookups(redis_clients.client(url=settings.REDIS_URL, socket_timeout=0.5)))

    # none refused for want of a connection: each waited for one and was answered (no entry is in
    # this map), or on a loaded machine waited the edge's half second in vain, as it is meant to
    assert not [failed for failed in through_edge if isinstance(failed, MaxConnectionsError)]
    # (redis-py says a wait in vain as its TimeoutError, or as "No connection available." when the
    # wait for a free connection itself ran out)
    unexpected = [
        found
        for found in through_edge
        if found is not None
        and not isinstance(found, RedisTimeoutError)
        and not (isinstance(found, RedisConnectionError) and "No connection available" in str(found))
    ]
    assert not unexpected, Counter(repr(found) for found in unexpected)
    # more answered than the pool has connections: lookups waited for a freed one (a pool that
    # refused at once answers at most as many); how many more depends on the machine's load
    assert through_edge.count(None) > published.REDIS_CONNECTIONS
    assert any(isinstance(failed, MaxConnectionsError) for failed in plain)  # control: the old pool
