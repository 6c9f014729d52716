"""The queue's WebSocket opens from the published snapshot: no query, no hop to Django's sync thread."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis as redis_lib
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.utils import timezone
from websockets.sync.client import ClientConnection, connect
from websockets.typing import Origin

from admission import state
from admission.rooms import MISS_BURST
from config.asgi import application
from devtools.ports import free_port
from ops import rehearsal
from tests import harness
from tests.conftest import app_env, database_url_for_tests, start_process, stop, wait_for_port
from tests.factories import make_drop
from tests.harness import close_code, message

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_edge")]

EDGE = harness.EDGE
DjangoWork = harness.DjangoWork
ORIGIN = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]


async def first_message(slug: str) -> tuple[dict[str, object] | int, WebsocketCommunicator]:
    """Connect in-process; the first message, or the close code when the socket is closed at once."""
    client = WebsocketCommunicator(application, f"/ws/drops/{slug}/queue/", headers=ORIGIN)
    connected, _ = await client.connect(timeout=5)
    assert connected
    received = await client.receive_output(timeout=5)
    if received["type"] == "websocket.close":
        return int(received["code"]), client
    return json.loads(received["text"]), client


def test_a_crowd_of_sockets_opens_while_djangos_sync_thread_is_busy(work: DjangoWork, settings) -> None:
    """50 handshakes answered from the snapshot while the thread database_sync_to_async uses is stuck."""
    settings.WS_SOCKETS_PER_ADDRESS = 100  # the crowd comes from one address here
    drop = make_drop(slug="crowd", quantity=9, waiting_room=True)
    plain = make_drop(slug="plain", quantity=9)
    state.refresh([drop.pk, plain.pk])
    released = threading.Event()
    work.reset()

    async def scenario() -> tuple[list[dict[str, object] | int], float, bool]:
        blocked = asyncio.create_task(sync_to_async(released.wait)(10))  # holds the one sync thread
        await asyncio.sleep(0.1)
        started = time.monotonic()
        try:
            opened = await asyncio.gather(*(first_message("crowd") for _ in range(50)))
            plain_room = await first_message("plain")
            took = time.monotonic() - started
            still_blocked = not blocked.done()
        finally:
            released.set()
        await blocked
        for _, client in [*opened, plain_room]:
            await client.disconnect()
        return [m for m, _ in [*opened, plain_room]], took, still_blocked

    messages, took, still_blocked = harness.run(scenario)

    assert still_blocked, "the sync thread was free after all: this test proves nothing"
    assert all(isinstance(m, dict) and m["remaining"] == 9 for m in messages[:-1]), messages[:3]
    assert messages[-1] == 4404  # a drop without a waiting room, decided from its snapshot
    assert took < 5, f"{took:.1f} s"
    assert work.queries == [] and work.requests == 0


def test_a_socket_for_a_drop_without_a_snapshot_looks_it_up_once_and_publishes_it(
    work: DjangoWork, redis: redis_lib.Redis
) -> None:
    make_drop(slug="cold", quantity=4, waiting_room=True)
    lookups_before = EDGE.stats["lookup"]
    work.reset()

    async def scenario() -> list[dict[str, object] | int]:
        opened = await asyncio.gather(*(first_message("cold") for _ in range(10)))
        opened.append(await first_message("no-such-drop"))
        opened.append(await first_message("no-such-drop"))  # remembered: no second lookup
        for _, client in opened:
            await client.disconnect()
        return [m for m, _ in opened]

    messages = harness.run(scenario)

    assert all(isinstance(m, dict) and m["remaining"] == 4 for m in messages[:10])
    assert messages[10:] == [4404, 4404]
    assert EDGE.stats["lookup"] - lookups_before == 2  # each slug once, then remembered
    assert redis.get("fg:drop:cold") is not None
    snapshots = [q for q in work.queries if "admission_wave" in q]  # the snapshot statement names it too
    lookups = sum("shop_drop" in q and "waiting_room" in q for q in work.queries if q not in snapshots)
    assert lookups <= 3, lookups  # the list of rooms, then one per slug at a time, not one per socket


def test_a_flood_of_made_up_slugs_is_refused_without_a_query_each(work: DjangoWork) -> None:
    make_drop(slug="real-room", quantity=4, waiting_room=True)
    lookups = EDGE.stats["lookup"]
    work.reset()

    async def scenario() -> list[dict[str, object] | int]:
        opened = [await first_message(f"made-up-{n}") for n in range(100)]
        opened.append(await first_message("real-room"))  # in the list: looked up whatever the flood
        for _, client in opened:
            await client.disconnect()
        return [m for m, _ in opened]

    codes = harness.run(scenario)

    assert codes[:100] == [4404] * 100
    assert isinstance(codes[100], dict) and codes[100]["remaining"] == 4
    # the list of every waiting room, a burst of slugs not in it looked up (a drop made since
    # the list was read opens at once), then none: the rest were refused without a query
    looked_up = EDGE.stats["lookup"] - lookups
    assert looked_up <= MISS_BURST + 2, looked_up
    assert len(work.queries) <= MISS_BURST + 4, work.queries


def test_a_waiting_room_made_after_the_list_was_read_opens_at_once(work: DjangoWork) -> None:
    make_drop(slug="early-room", quantity=4, waiting_room=True)

    async def scenario() -> tuple[dict[str, object] | int, dict[str, object] | int]:
        early, client = await first_message("early-room")  # reads the list of rooms
        await client.disconnect()
        await asyncio.to_thread(lambda: make_drop(slug="new-room", quantity=3, waiting_room=True))
        new, client = await first_message("new-room")
        await client.disconnect()
        return early, new

    early, new = harness.run(scenario)

    assert isinstance(early, dict) and isinstance(new, dict) and new["remaining"] == 3


def test_one_address_holds_a_few_sockets_and_the_next_is_told_to_poll(work: DjangoWork, settings) -> None:
    settings.WS_SOCKETS_PER_ADDRESS = 3
    drop = make_drop(slug="capped", quantity=4, waiting_room=True)
    state.refresh([drop.pk])

    async def scenario() -> tuple[list[dict[str, object] | int], dict[str, object] | int]:
        opened = [await first_message("capped") for _ in range(4)]
        await opened[0][1].disconnect()  # one closes: its place is free again
        again, client = await first_message("capped")
        for _, other in [*opened[1:], (again, client)]:
            await other.disconnect()
        return [m for m, _ in opened], again

    first_four, after_one_closed = harness.run(scenario)

    assert [isinstance(m, dict) for m in first_four[:3]] == [True] * 3
    assert first_four[3] == 4429  # the page polls instead (static/js/queue.js)
    assert isinstance(after_one_closed, dict) and after_one_closed["remaining"] == 4


@pytest.fixture
def daphne_without_a_database(payment_provider: str) -> Iterator[str]:
    """A real daphne whose DATABASE_URL points at a port nobody listens on."""
    port, dead = free_port(), free_port()
    parts = urlsplit(database_url_for_tests())
    user = parts.netloc.rpartition("@")[0]
    broken = urlunsplit(parts._replace(netloc=f"{user}@127.0.0.1:{dead}" if user else f"127.0.0.1:{dead}"))
    env = {
        **app_env(payment_provider, f"http://127.0.0.1:{port}"),
        "DATABASE_URL": broken,
        "DB_POOL_TIMEOUT": "2",
    }
    daphne = str(Path(sys.executable).parent / "daphne")
    command = [daphne, "-b", "127.0.0.1", "-p", str(port), "config.asgi:application"]
    process, log = start_process(f"daphne-nodb-{port}", command, env)
    wait_for_port(port, process, log)
    yield f"ws://127.0.0.1:{port}"
    stop(process)


def test_with_the_database_unreachable_a_socket_still_opens_from_the_snapshot(
    daphne_without_a_database: str,
) -> None:
    base = daphne_without_a_database
    drop = make_drop(slug="nodb", quantity=6, waiting_room=True)
    plain = make_drop(slug="nodb-plain", quantity=6)
    state.refresh([drop.pk, plain.pk])

    def open_socket(slug: str) -> ClientConnection:
        origin = base.replace("ws://", "http://")
        return connect(f"{base}/ws/drops/{slug}/queue/", origin=Origin(origin), open_timeout=10)

    with open_socket("nodb") as client:
        first = message(client)
    with open_socket("nodb-plain") as client:
        plain_code = close_code(client)
    with open_socket("nodb-unknown") as client:  # no snapshot: a lookup, and the database is away
        unknown_code = close_code(client)

    assert first["remaining"] == 6 and first["state"] == "admitting" and first["admitted_through"] == 0
    assert plain_code == 4404
    assert unknown_code == 4503  # try again later, not a crash


def test_a_rehearsals_copy_has_no_queue_socket_for_anyone(work: DjangoWork) -> None:
    """The copy's line does not exist outside its own buyers, and a socket knows no buyer: its
    counts are not pushed to whoever guesses the slug (the crowd polls over HTTP)."""
    later = timezone.now() + timedelta(minutes=5)
    drop = make_drop(slug="real-room", quantity=5, waiting_room=True, starts_at=later)
    copy, _ = rehearsal.begin(drop=drop, buyers=2, starts_in=timedelta(minutes=5), lasts=timedelta(minutes=5))

    async def opened(slug: str) -> dict[str, object] | int:
        first, client = await first_message(slug)
        await client.disconnect()
        return first

    async def scenario() -> list[dict[str, object] | int]:
        cold = await opened(copy.slug)  # no snapshot yet: looked up
        await harness.in_thread(lambda: state.refresh([copy.pk, drop.pk]))
        EDGE.forget()
        return [cold, await opened(copy.slug), await opened(drop.slug)]  # from the snapshots

    cold, published, real = harness.run(scenario)

    assert (cold, published) == (4404, 4404)
    assert isinstance(real, dict) and real["remaining"] == 5  # the drop it copies still has one
