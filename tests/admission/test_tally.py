"""The door's counts for each drop's public report: what the web process answered on a drop's paths
(429, 503, other 5xx), added to Redis, and the proofs of work that failed."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from admission import state, tally, work
from config import asgi
from core.asgi import Message, Receive, Scope, Send
from tests.factories import make_buyer, make_drop

STATUS = {
    "/api/drops/tally-a/holds": 503,
    "/drops/tally-a/buy": 503,
    "/api/drops/tally-a/queue": 429,
    "/drops/tally-a/queue/": 429,
    "/api/drops/tally-a": 500,
    "/api/drops/tally-b/queue": 200,
    "/drops/tally-b/": 404,
    "/drops/made-up/buy": 503,  # no such drop: no key of its own
    "/healthz": 503,  # no drop's path: nobody's count
}


async def inner(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": STATUS[scope["path"]], "headers": []})
    await send({"type": "http.response.body", "body": b""})


async def ask(app: tally.Tally, path: str) -> int:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    await app({"type": "http", "path": path, "method": "GET"}, receive, send)
    return int(sent[0]["status"])


def test_each_drops_refusals_and_errors_are_counted_once_a_second_apart(redis: object) -> None:
    for slug in ("tally-a", "tally-b"):  # published drops (their snapshot keys); made-up is not
        redis.set(state.KEY.format(slug=slug), "{}", ex=60)  # type: ignore[attr-defined]
    app = tally.Tally(inner, pending=tally.Pending(flush_after=0.05))

    async def crowd() -> list[int]:
        answers = [await ask(app, path) for path in STATUS for _ in range(3)]
        await asyncio.sleep(0.5)  # the flush, and its write in the executor
        return answers

    answers = asyncio.run(crowd())
    assert answers == [status for status in STATUS.values() for _ in range(3)]  # passed on unchanged
    assert tally.counts("tally-a") == {"proof_failed": 0, "rate_limited": 6, "busy": 6, "server_error": 3}
    assert tally.counts("tally-b") == dict.fromkeys(tally.KINDS, 0)
    assert not list(redis.scan_iter("fg:tally:healthz*"))  # type: ignore[attr-defined]
    assert not redis.exists(tally.KEY.format(slug="made-up"))  # type: ignore[attr-defined]


def flushed(slug: str) -> dict[str, int]:
    tally.PENDING.flush()
    return tally.counts(slug)


def test_the_served_application_counts_through_the_tally() -> None:
    http = asgi.application.application_mapping["http"]
    assert isinstance(http, tally.Tally) and http.app is asgi.edge


@pytest.mark.django_db
def test_a_failed_proof_of_work_is_counted_and_asking_for_the_first_challenge_is_not() -> None:
    drop = make_drop(
        slug="tally-work",
        quantity=5,
        waiting_room=True,
        join_work_bits=10,
        starts_at=timezone.now() + timedelta(minutes=30),
    )
    state.refresh([drop.pk])  # its snapshot is published, as the tick does for an open room
    client = Client()
    client.force_login(make_buyer("tally-worker"))
    first = client.post("/api/drops/tally-work/queue")
    assert first.status_code == 428 and flushed(drop.slug)["proof_failed"] == 0
    challenge = first.json()["challenge"]
    wrong = next(n for n in (format(i, "x") for i in range(10_000)) if not work.solves(challenge, n, 10))
    answer = client.post(
        "/api/drops/tally-work/queue", HTTP_X_JOIN_CHALLENGE=challenge, HTTP_X_JOIN_PROOF=wrong
    )
    assert answer.status_code == 428 and flushed(drop.slug)["proof_failed"] == 1
    garbage = client.post("/api/drops/tally-work/queue", HTTP_X_JOIN_CHALLENGE="not-a-challenge")
    assert garbage.status_code == 428 and flushed(drop.slug)["proof_failed"] == 2
    solved = client.post(
        "/api/drops/tally-work/queue",
        HTTP_X_JOIN_CHALLENGE=garbage.json()["challenge"],
        HTTP_X_JOIN_PROOF=work.solve(garbage.json()["challenge"], 10),
    )
    assert solved.status_code in (200, 201) and flushed(drop.slug)["proof_failed"] == 2
