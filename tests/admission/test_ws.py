"""The waiting room's WebSocket against a real daphne, the Redis channel layer and real clients."""

from __future__ import annotations

import asyncio
import json
import time
from contextlib import ExitStack
from datetime import timedelta
from typing import Any

import httpx
import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.utils import timezone
from redis import Redis
from websockets.sync.client import ClientConnection, connect
from websockets.typing import Origin

from admission import services, state
from admission.models import Ticket
from shop.models import ApiToken, Drop
from tests.factories import make_buyer, make_drop
from tests.harness import close_code, message

pytestmark = pytest.mark.django_db(transaction=True)


def socket(base: str, slug: str) -> ClientConnection:
    url = base.replace("http://", "ws://") + f"/ws/drops/{slug}/queue/"
    return connect(url, origin=Origin(base), open_timeout=10)


def mark_after(client: ClientConnection, mark: int) -> dict[str, Any]:
    """The next message with a mark above `mark`; the mark never goes back.

    Messages repeating the mark are skipped: the snapshot is republished whenever its other
    numbers change (by beat each second, or by a web process when beat is late or away).
    """
    for _ in range(10):
        found = message(client)
        assert int(found["admitted_through"]) >= mark, f"the mark went back from {mark}: {found}"
        if int(found["admitted_through"]) > mark:
            return found
    raise AssertionError(f"no mark above {mark} in ten messages")


def state_becomes(client: ClientConnection, wanted: str) -> dict[str, object]:
    """The next message in this state (republished snapshots of the old one may come first)."""
    for _ in range(10):
        found = message(client)
        if found["state"] == wanted:
            return found
    raise AssertionError(f"never heard {wanted!r}")


def wave(drop: Drop, later: timedelta) -> int:
    """Force a wave as if `later` had passed (the admitted buyers' token lifetime is over)."""
    done = services.run_wave(Drop.objects.get(pk=drop.pk), now=timezone.now() + later, force=True)
    assert done is not None
    return done.admitted_through


def line_up(drop: Drop, make_buyers, n: int) -> list[int | None]:
    services.run_wave(drop)  # the start: nobody came early, so joiners get numbers at once
    return [services.join(drop=drop, buyer_id=b).number for b in make_buyers(n, prefix=f"{drop.slug}-")]


def test_every_waiting_client_hears_every_wave_in_order(live_daphne: str, make_buyers) -> None:
    # given 30 buyers in line for 5 units and 20 pages watching
    drop = make_drop(slug="ws-waves", quantity=5, waiting_room=True, admission_percent=100)
    assert line_up(drop, make_buyers, 30) == list(range(1, 31))
    with ExitStack() as stack:
        clients = [stack.enter_context(socket(live_daphne, "ws-waves")) for _ in range(20)]
        opening = [message(c) for c in clients]
        assert {(m["admitted_through"], m["state"], m["remaining"]) for m in opening} == {(0, "admitting", 5)}

        # when five waves run (nobody buys; each comes a token lifetime after the last)
        marks = [wave(drop, timedelta(seconds=200 * (i + 1))) for i in range(5)]

        # then every client hears all five, once each, in order
        assert marks == [5, 10, 15, 20, 25]
        for client in clients:
            heard, last = [], 0
            for _ in marks:
                heard.append(mark_after(client, last))
                last = int(heard[-1]["admitted_through"])
            assert [m["admitted_through"] for m in heard] == marks
            assert all(m["state"] == "admitting" and m["remaining"] == 5 for m in heard)


def test_a_buyer_whose_position_reaches_zero_gets_a_token_from_the_api(live_daphne: str, make_buyers) -> None:
    drop = make_drop(slug="ws-mine", quantity=4, waiting_room=True, admission_percent=100)
    line_up(drop, make_buyers, 5)
    buyer = make_buyer("wendy")
    ApiToken.objects.create(user=buyer, digest=ApiToken.digest_of("token-wendy"))
    ticket = services.join(drop=drop, buyer_id=buyer.pk).number
    api = httpx.Client(base_url=live_daphne, headers={"Authorization": "Bearer token-wendy"}, timeout=10)
    assert ticket == 6

    with socket(live_daphne, "ws-mine") as client:
        marks = [int(message(client)["admitted_through"])]
        before = api.get("/api/drops/ws-mine/queue").json()
        wave(drop, timedelta(seconds=200))
        marks.append(int(mark_after(client, marks[-1])["admitted_through"]))
        wave(drop, timedelta(seconds=400))
        marks.append(int(mark_after(client, marks[-1])["admitted_through"]))
        positions = [max(0, ticket - mark) for mark in marks]
    after = api.get("/api/drops/ws-mine/queue").json()

    assert positions == [6, 2, 0]
    assert before["position"] == 6 and before["admitted"] is False and before["admission_token"] is None
    assert after["position"] == 0 and after["admitted"] is True and after["admission_token"]


def test_a_client_that_comes_back_gets_the_current_mark_at_once(
    live_daphne: str, make_buyers, redis: Redis
) -> None:
    drop = make_drop(slug="ws-back", quantity=3, waiting_room=True, admission_percent=100)
    line_up(drop, make_buyers, 20)
    with socket(live_daphne, "ws-back") as client:
        assert message(client)["admitted_through"] == 0
        wave(drop, timedelta(seconds=200))
        assert mark_after(client, 0)["admitted_through"] == 3

    # while it is away, two waves pass
    wave(drop, timedelta(seconds=400))
    assert wave(drop, timedelta(seconds=600)) == 9

    with socket(live_daphne, "ws-back") as client:
        assert message(client)["admitted_through"] == 9
    # the published snapshot gone (Redis restarted, key expired): read from PostgreSQL instead
    redis.delete(state.KEY.format(slug="ws-back"))
    with socket(live_daphne, "ws-back") as client:
        back = message(client)
        assert back["admitted_through"] == 9 and back["remaining"] == 3 and back["last_ticket"] == 20


def test_a_client_waiting_longer_than_the_redis_read_timeout_still_hears_the_wave(
    live_daphne: str, make_buyers
) -> None:
    # Waiting is mostly silence: the socket must outlive the channel layer's blocking read (5 s).
    drop = make_drop(slug="ws-idle", quantity=2, waiting_room=True, admission_percent=100)
    line_up(drop, make_buyers, 5)
    with socket(live_daphne, "ws-idle") as client:
        assert message(client)["admitted_through"] == 0
        time.sleep(8)
        wave(drop, timedelta(seconds=200))
        assert mark_after(client, 0)["admitted_through"] == 2


@pytest.mark.slow
def test_the_channel_layer_waits_through_a_silence_longer_than_its_blocking_read() -> None:
    # A consumer waits on BZPOPMIN for 5 s at a time; a client read timeout of 5 s kills it.
    layer = get_channel_layer()

    async def hear_after_silence() -> dict[str, object]:
        channel = await layer.new_channel()
        asyncio.get_running_loop().call_later(
            7, lambda: asyncio.ensure_future(layer.send(channel, {"type": "queue.update"}))
        )
        return await asyncio.wait_for(layer.receive(channel), timeout=15)

    assert async_to_sync(hear_after_silence)() == {"type": "queue.update"}


@pytest.mark.parametrize("slug", ["no-such-drop", "ws-plain", "NOT_A_SLUG", "a%20b", "a/b"])
def test_a_socket_for_no_waiting_room_is_closed_with_4404(live_daphne: str, slug: str) -> None:
    make_drop(slug="ws-plain", waiting_room=False)

    with socket(live_daphne, slug) as client:
        assert close_code(client) == 4404


def test_a_ping_gets_a_pong_and_garbage_gets_told_then_closed(live_daphne: str) -> None:
    make_drop(slug="ws-talk", waiting_room=True)

    with socket(live_daphne, "ws-talk") as client:
        message(client)
        client.send(json.dumps({"type": "ping"}))
        assert message(client) == {"type": "pong"}
        client.send("not json")
        assert message(client)["error"] == "bad_frame"
        client.send(json.dumps({"type": "subscribe", "slug": "other"}))
        assert message(client)["error"] == "bad_frame"
        client.send("[]")
        assert close_code(client) == 4400
    with socket(live_daphne, "ws-talk") as client:
        message(client)
        client.send("x" * 10_000)
        assert close_code(client) == 4400


def test_waiting_clients_hear_a_pause_and_the_resume_at_once(live_daphne: str, make_buyers) -> None:
    from ops.switch import pause_drop, resume_drop

    drop = make_drop(slug="ws-pause", quantity=5, waiting_room=True)
    line_up(drop, make_buyers, 3)
    with socket(live_daphne, "ws-pause") as client:
        assert message(client)["state"] == "admitting"

        pause_drop(drop=drop, actor_id=None, reason="payment provider down")
        paused = state_becomes(client, "paused")
        resume_drop(drop=drop, actor_id=None)
        resumed = state_becomes(client, "admitting")

    assert paused["state"] == "paused" and resumed["state"] == "admitting"
    first = Ticket.objects.filter(drop=drop).first()
    assert first is not None
    before = services.place(drop=drop, buyer_id=first.buyer_id)
    assert before.queue.admitted_through == 0  # no wave ran while paused (none was forced)
