"""Waiting-room joins through the claim lane: the crowd before a start, without Django's request path.

Same harness as tests/admission/test_edge.py: the real `config.asgi.application` in-process,
queries counted on every thread's connection, Django's requests counted by its signal.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings
from django.utils import timezone

from admission import services, state, tokens
from admission.models import Ticket
from catalogue.services import create_buyers
from sale.lane import Lane
from shop.models import Drop
from tests.factories import make_drop, start_now
from tests.harness import EDGE, Reply, bearer, call, claims_of, run, without

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_edge")]

LANE: Lane = EDGE.lane  # type: ignore[assignment]
VOLATILE = ("admission_token", "queue_ticket")  # signed with a timestamp: differ per answer


def lane_answered(reply: Reply) -> bool:
    return reply.headers.get("x-floodgate-lane") == "hit"


def join(slug: str, auth: dict[str, str], body: bytes = b"") -> Reply:
    return run(lambda: call("POST", f"/api/drops/{slug}/queue", headers=auth, body=body))


def upcoming(slug: str = "soon", **options: Any) -> Drop:
    return make_drop(
        slug=slug, quantity=5, waiting_room=True, starts_at=timezone.now() + timedelta(hours=1), **options
    )


def test_a_join_is_answered_by_the_lane_as_django_would_with_a_few_statements(work) -> None:
    drop = upcoming()
    auth = bearer("jo")
    assert join("soon", bearer("warm")).status == 200  # the queue row exists, the drop row is cached
    state.refresh([drop.pk])  # the snapshot is published, as beat does every second
    work.reset()

    first = join("soon", auth)
    queries = list(work.queries)
    again = join("soon", auth)  # another tab: the same ticket
    requests = work.requests
    django = Client().post("/api/drops/soon/queue", HTTP_AUTHORIZATION=auth["authorization"])

    assert first.status == 200 and lane_answered(first) and requests == 0
    # token, who may take part (shop.sql.AUDIENCE), the buyer's ticket, the queue row, the insert:
    # no session, no drop read per join
    assert len(queries) <= 5, "\n".join(q[:90] for q in queries)
    assert without(first.json(), *VOLATILE) == without(again.json(), *VOLATILE)
    assert without(first.json(), *VOLATILE) == without(django.json(), *VOLATILE)
    lane_claims, django_claims = (
        claims_of(first.json()["queue_ticket"]),
        claims_of(django.json()["queue_ticket"]),
    )
    assert lane_claims.pop("i") <= django_claims.pop("i")  # when each was signed: the lane's first
    assert lane_claims == django_claims
    assert first.json()["entry"] == Ticket.objects.get(drop=drop, buyer__username="jo").pk
    assert first.json()["ticket"] is None
    cookie = first.headers.get("set-cookie", "")
    assert cookie.startswith(f"{tokens.TICKET_COOKIE}={first.json()['queue_ticket']};")
    assert "Path=/api/drops/soon/queue" in cookie and "HttpOnly" in cookie


def test_after_the_draw_a_join_gets_the_next_number_through_the_lane(work) -> None:
    drop = upcoming()
    early = [bearer(f"early{i}") for i in range(3)]
    for auth in early:
        assert join("soon", auth).status == 200
    start_now(drop.pk)
    services.run_wave(Drop.objects.get(pk=drop.pk))  # the draw: 1..3
    LANE.forget()  # the cached drop row still says "scheduled"
    work.reset()

    late = join("soon", bearer("late"))

    assert late.status == 200 and lane_answered(late) and work.requests == 0
    assert late.json()["ticket"] == 4 and late.json()["drawn"] is True
    assert claims_of(late.json()["queue_ticket"])["t"] == 4


@pytest.mark.parametrize(
    ("case", "slug", "headers", "status", "error"),
    [
        ("a bad bearer token", "soon", {"authorization": "Bearer forged"}, 401, "unauthenticated"),
        ("no credentials", "soon", {}, 401, "unauthenticated"),
        ("an unknown drop", "nope", None, 404, "not_found"),
        ("a drop without a waiting room", "plain", None, 409, "no_waiting_room"),
        ("an ended drop", "over", None, 410, "ended"),
    ],
)
def test_a_join_that_cannot_be_gets_the_same_clear_answer_as_through_django(
    case: str, slug: str, headers: dict[str, str] | None, status: int, error: str
) -> None:
    upcoming()
    make_drop(slug="plain", quantity=5)
    make_drop(
        slug="over",
        quantity=5,
        waiting_room=True,
        starts_at=timezone.now() - timedelta(hours=2),
        ends_at=timezone.now() - timedelta(hours=1),
    )
    headers = bearer("nob") if headers is None else headers

    reply = join(slug, headers, body=b"{garbage")
    environ: dict[str, Any] = {f"HTTP_{k.upper()}": v for k, v in headers.items()}
    django = Client().post(f"/api/drops/{slug}/queue", **environ)

    assert (reply.status, reply.json()["error"]) == (status, error), case
    assert (reply.status, reply.json()) == (django.status_code, django.json()), case
    assert not Ticket.objects.exists()


@override_settings(RATE_LIMIT_BURST=3, RATE_LIMIT_PER_SECOND=0.01)
def test_a_buyer_joining_in_a_loop_is_limited_by_the_lane_like_by_django() -> None:
    upcoming()
    auth = bearer("loop")

    replies = [join("soon", auth) for _ in range(5)]

    assert [r.status for r in replies] == [200, 200, 200, 429, 429]
    assert all(lane_answered(r) for r in replies)
    assert replies[-1].json()["error"] == "rate_limited" and replies[-1].headers.get("retry-after")
    assert Ticket.objects.count() == 1


@override_settings(IP_RATE_LIMIT_BURST=100_000)  # the whole crowd comes from 127.0.0.1 here
def test_a_thousand_joins_at_once_give_each_buyer_one_ticket_and_the_draw_numbers_them_all(work) -> None:
    drop = upcoming(slug="rush")
    auths = [{"authorization": f"Bearer {b.token}"} for b in create_buyers(count=1000, prefix="rush")]
    work.reset()

    async def crowd() -> list[Reply]:
        gate = asyncio.Semaphore(64)

        async def one(auth: dict[str, str]) -> Reply:
            async with gate:
                return await call("POST", "/api/drops/rush/queue", headers=auth)

        # every buyer twice, the second racing the first: still one ticket each
        return await asyncio.gather(*(one(auth) for auth in auths + auths))

    replies = run(crowd)
    start_now(drop.pk)
    services.run_wave(Drop.objects.get(pk=drop.pk))

    assert {r.status for r in replies} == {200} and work.requests == 0
    # batched (sale.joins): 2,000 joins, far fewer inserts of tickets (one per batch)
    inserts = [q for q in work.queries if q.lstrip().startswith("INSERT INTO admission_ticket")]
    assert 0 < len(inserts) <= 400, len(inserts)
    entries = {r.json()["entry"] for r in replies}
    assert len(entries) == 1000  # the twin requests got the same entry
    numbers = sorted(
        n for n in Ticket.objects.filter(drop=drop).values_list("number", flat=True) if n is not None
    )
    assert numbers == list(range(1, 1001))


def test_a_join_to_a_drop_or_by_an_account_deleted_while_cached_gets_djangos_answer() -> None:
    room = upcoming(slug="gone-room")
    auth = bearer("leaver")
    assert join("soon-nope", auth).status == 404  # the token is cached now
    assert join("gone-room", bearer("other")).status == 200  # and the drop row
    Drop.objects.filter(pk=room.pk).delete()
    dropped = join("gone-room", bearer("third"))
    upcoming(slug="kept-room")
    assert join("kept-room", bearer("fourth")).status == 200
    get_user_model().objects.filter(username="leaver").delete()
    left = join("kept-room", auth)

    assert (dropped.status, dropped.json()["error"]) == (404, "not_found")
    assert (left.status, left.json()["error"]) == (401, "unauthenticated")
    assert not Ticket.objects.filter(buyer__username__in=["third", "leaver"]).exists()
