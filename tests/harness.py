"""The in-process ASGI harness: the real `config.asgi.application` driven with raw ASGI messages,
Django's work counted across threads, and the edge's fixtures. Its fixtures (`work`, `edge_alone`,
`fresh_edge`) reach every test through tests/conftest.py; a module that drives the edge marks
itself `usefixtures("fresh_edge")` and imports the helpers it calls.

Django runs views in threads of its own, so queries are counted on every connection any thread
opens, and "entered Django" is counted by Django's request_started signal.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import psycopg
import pytest
import redis as redis_lib
from django.core import signing
from django.core.signals import request_started
from django.db import connection, connections
from django.db.backends.signals import connection_created
from django.utils import timezone
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection

from admission import services, state
from admission.edge import Edge
from config.asgi import application, edge
from sale.lane import Lane as ClaimLane
from shop.models import ApiToken, Drop
from tests.factories import make_buyer, make_drop

EDGE: Edge = edge


# Driving the ASGI application --------------------------------------------------------------


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def edge(self) -> bool:
        return self.headers.get("x-floodgate-edge") == "hit"

    def json(self) -> Any:
        return json.loads(self.body)


async def call(
    method: str,
    path: str,
    *,
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    raw_path: bytes | None = None,
    app: Any = application,
) -> Reply:
    """One HTTP request through the ASGI app, as daphne would hand it over."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": raw_path if raw_path is not None else path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (k.lower().encode(), v.encode("latin-1"))
            for k, v in ({"host": "127.0.0.1"} | (headers or {})).items()
        ],
        "client": ("127.0.0.1", 50123),
        "server": ("127.0.0.1", 8000),
    }
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Future()  # the client stays connected; Django cancels this when done
        raise AssertionError("unreachable")

    started: dict[str, Any] = {}
    chunks: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            started.update(message)
        else:
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    found = {k.decode().lower(): v.decode("latin-1") for k, v in started["headers"]}
    return Reply(started["status"], found, b"".join(chunks))


def run(scenario: Callable[[], Awaitable[Any]]) -> Any:
    """Run an async scenario on a fresh loop; the edge's subscriber and clients close after it."""

    async def main() -> Any:
        try:
            return await scenario()
        finally:
            await EDGE.aclose()

    return asyncio.run(main())


async def in_thread(fn: Callable[[], Any]) -> Any:
    """ORM work from inside a scenario: on a thread of its own, its connection closed after."""

    def work() -> Any:
        try:
            return fn()
        finally:
            connections.close_all()

    return await asyncio.to_thread(work)


def bearer(username: str) -> dict[str, str]:
    user = make_buyer(username)
    ApiToken.objects.create(user=user, digest=ApiToken.digest_of(f"token-{username}"))
    return {"authorization": f"Bearer token-{username}"}


def reserve_headers(auth: dict[str, str], key: str = "k1", **extra: str) -> dict[str, str]:
    return {**auth, "idempotency-key": key, "content-type": "application/json", **extra}


BODY = json.dumps({"quantity": 1}).encode()


# Counting Django's work across threads ---------------------------------------------------


class DjangoWork:
    """Queries on any connection of any thread, and requests that entered Django."""

    def __init__(self) -> None:
        self.queries: list[str] = []
        self.requests = 0
        self.active = True
        self._lock = threading.Lock()

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if self.active:
            with self._lock:
                self.queries.append(sql)
        return execute(sql, params, many, context)

    def install(self, sender: Any = None, connection: Any = None, **_: Any) -> None:
        if self not in connection.execute_wrappers:
            connection.execute_wrappers.append(self)

    def started(self, **_: Any) -> None:
        with self._lock:
            self.requests += 1

    def reset(self) -> None:
        with self._lock:
            self.queries.clear()
            self.requests = 0


@pytest.fixture
def edge_alone() -> Iterator[None]:
    """The edge straight in front of Django, without the claim lane (tests/sale/test_lane.py):
    what the edge does not answer must reach Django's own request path."""
    lane, EDGE.lane = EDGE.lane, None
    try:
        yield
    finally:
        EDGE.lane = lane


@pytest.fixture
def work() -> Iterator[DjangoWork]:
    counter = DjangoWork()
    connection_created.connect(counter.install, weak=False)
    request_started.connect(counter.started, weak=False)
    for existing in connections.all():
        counter.install(connection=existing)
    yield counter
    counter.active = False
    connection_created.disconnect(counter.install)
    request_started.disconnect(counter.started)
    for existing in connections.all():
        if counter in existing.execute_wrappers:
            existing.execute_wrappers.remove(counter)


def snapshot_in(redis: redis_lib.Redis, slug: str) -> dict[str, Any]:
    """The drop's published snapshot as Redis holds it; it must be there."""
    raw = redis.get(state.KEY.format(slug=slug))
    assert raw is not None, f"no snapshot of {slug} in Redis"
    return json.loads(raw)


@pytest.fixture
def fresh_edge(redis: redis_lib.Redis) -> Iterator[None]:
    """No snapshot from an earlier test (same slugs, other drops) in Redis or in the edge; after
    the test, the lane's background work (a sold-out publish) done before the tables are flushed."""
    keys = list(redis.scan_iter("fg:drop:*"))
    if keys:
        redis.delete(*keys)
    redis.delete(state.REVOKED)  # an earlier test's buyer ids are this test's (the tables are flushed)
    EDGE.forget()
    lane = EDGE.lane
    assert lane is None or isinstance(lane, ClaimLane)  # config.asgi wires sale.lane's
    if lane is not None:
        lane.forget()  # tokens and drops of an earlier test's (flushed) rows
    yield
    if lane is not None:
        lane.settle()


# Stock held by another session ------------------------------------------------------------


def lock_stock(drop_id: int) -> psycopg.Connection:
    """Hold the drop's stock row in another session: claims that reach it wait."""
    config = connection.settings_dict
    blocker = psycopg.connect(
        dbname=config["NAME"],
        user=config["USER"] or None,
        password=config["PASSWORD"] or None,
        host=config["HOST"] or None,
        port=config["PORT"] or None,
    )
    blocker.execute("SELECT 1 FROM inventory_stockbucket WHERE drop_id = %s FOR UPDATE", [drop_id])
    return blocker


def lock_waits() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return int(cursor.fetchone()[0])


# The waiting room through the edge ----------------------------------------------------------


VOLATILE = ("admission_token", "queue_ticket")  # signed with a timestamp: differ per answer


def join(slug: str, auth: dict[str, str]) -> dict[str, Any]:
    """POST the queue API (Django) and return its answer."""
    reply = run(lambda: call("POST", f"/api/drops/{slug}/queue", headers=auth))
    assert reply.status == 200 and not reply.edge, reply.body
    return reply.json()


def poll(slug: str, auth: dict[str, str], ticket: str | None = None, **extra: str) -> Reply:
    headers = {**auth, **extra}
    if ticket is not None:
        headers["x-queue-ticket"] = ticket
    return run(lambda: call("GET", f"/api/drops/{slug}/queue", headers=headers))


def django_poll(slug: str, auth: dict[str, str]) -> Reply:
    """The same poll answered by Django itself (the app behind the edge), for comparison."""
    return run(lambda: call("GET", f"/api/drops/{slug}/queue", headers=auth, app=EDGE.app))


def without(body: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in keys}


def room(slug: str = "room", quantity: int = 3, **options: Any) -> Drop:
    """A live waiting-room drop whose start (the draw of nobody) has run: joiners get numbers."""
    drop = make_drop(slug=slug, quantity=quantity, waiting_room=True, admission_percent=100, **options)
    services.run_wave(drop)
    return drop


def admit(drop: Drop) -> int:
    """A wave as if the last admitted buyers' token lifetime were over."""
    later = timezone.now() + timedelta(seconds=1000)
    wave = services.run_wave(Drop.objects.get(pk=drop.pk), now=later, force=True)
    assert wave is not None
    state.refresh([drop.pk])
    EDGE.forget()  # no subscriber between scenarios: the next poll reads the new snapshot
    return wave.admitted_through


def claims_of(ticket: str) -> dict[str, Any]:
    return json.loads(signing.b64_decode(ticket.split(":")[0].encode()))


# WebSocket clients ---------------------------------------------------------------------


def message(client: ClientConnection) -> dict[str, Any]:
    return json.loads(client.recv(timeout=10))


def close_code(client: ClientConnection) -> int | None:
    with pytest.raises(ConnectionClosed) as closed:
        for _ in range(5):
            client.recv(timeout=10)
    return closed.value.rcvd.code if closed.value.rcvd else None
