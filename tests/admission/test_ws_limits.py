"""A queue socket's frames are budgeted: a burst, then a steady rate; a flood closes it with 4429
(issue 43: 40 sockets x 1,000 pings slowed the drop page tenfold). The real ASGI application, the
Redis channel layer, Channels' WebsocketCommunicator."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from channels.testing import WebsocketCommunicator

from admission import state
from admission.consumers import MESSAGE_BURST, MESSAGES_PER_SECOND, TOO_MANY
from config.asgi import application
from tests import harness
from tests.factories import make_drop

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_edge")]

ORIGIN = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
PING = json.dumps({"type": "ping"})


async def opened(slug: str) -> WebsocketCommunicator:
    client = WebsocketCommunicator(application, f"/ws/drops/{slug}/queue/", headers=ORIGIN)
    connected, _ = await client.connect(timeout=5)
    assert connected
    first = await client.receive_output(timeout=5)
    assert first["type"] == "websocket.send", first  # the mark, from the snapshot
    return client


async def pings(client: WebsocketCommunicator, n: int) -> tuple[int, int | None]:
    """Send n pings back to back; (pongs heard, the close code or None while the socket is open)."""
    for _ in range(n):
        await client.send_to(text_data=PING)
    pongs = 0
    while True:
        if await client.receive_nothing(timeout=0.5):
            return pongs, None
        out = await client.receive_output(timeout=5)
        if out["type"] == "websocket.close":
            return pongs, int(out["code"])
        if json.loads(out["text"]) == {"type": "pong"}:
            pongs += 1


def room(slug: str) -> None:
    drop = make_drop(slug=slug, quantity=5, waiting_room=True)
    state.refresh([drop.pk])


def test_a_flood_of_pings_is_answered_up_to_the_budget_then_the_socket_closes() -> None:
    room("ws-flood")

    async def scenario() -> tuple[int, int | None]:
        client = await opened("ws-flood")
        try:
            return await pings(client, 1_000)
        finally:
            await client.disconnect()

    pongs, code = harness.run(scenario)

    # the burst, and at most what the rate refilled while the flood was read
    assert MESSAGE_BURST <= pongs <= MESSAGE_BURST + 2, pongs
    assert code == TOO_MANY


def test_control_pings_within_the_budget_are_all_answered_and_the_budget_refills() -> None:
    room("ws-calm")

    async def scenario() -> tuple[tuple[int, int | None], tuple[int, int | None]]:
        client = await opened("ws-calm")
        try:
            burst = await pings(client, MESSAGE_BURST)
            await asyncio.sleep(3 / MESSAGES_PER_SECOND)  # three more frames' worth
            refilled = await pings(client, 3)
            return burst, refilled
        finally:
            await client.disconnect()

    started = time.monotonic()
    burst, refilled = harness.run(scenario)

    assert burst == (MESSAGE_BURST, None)  # every ping answered, the socket open
    assert refilled == (3, None), (refilled, time.monotonic() - started)
