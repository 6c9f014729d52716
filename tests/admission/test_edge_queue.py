"""The waiting room's polls answered at the edge from a signed queue ticket, without Django.

Same harness as test_edge: the real `config.asgi.application` driven in-process, queries
counted on every connection of every thread, Django's requests counted by its signal.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta
from typing import Any

import pytest
import redis as redis_lib
from django.core import signing
from django.test import Client, override_settings
from django.utils import timezone

from admission import services, state, tokens
from holds.counts import invariant
from holds.models import Hold
from shop.models import ApiToken, Drop
from tests.factories import make_buyer, make_drop, start_now
from tests.harness import (
    BODY,
    EDGE,
    VOLATILE,
    DjangoWork,
    Reply,
    admit,
    bearer,
    call,
    claims_of,
    django_poll,
    join,
    poll,
    reserve_headers,
    room,
    run,
    snapshot_in,
    without,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_edge")]

# Answered at the edge --------------------------------------------------------------------


def test_a_poll_with_its_ticket_is_answered_at_the_edge_as_django_would(work: DjangoWork) -> None:
    drop = room(quantity=2)
    auths = [bearer(f"q{i}") for i in range(4)]
    joined = [join("room", auth) for auth in auths]
    assert [j["ticket"] for j in joined] == [1, 2, 3, 4] and all(j["queue_ticket"] for j in joined)
    assert admit(drop) == 2
    work.reset()

    at_edge = [poll("room", auth, j["queue_ticket"]) for auth, j in zip(auths, joined, strict=True)]
    assert (work.queries, work.requests) == ([], 0)
    from_django = [django_poll("room", auth) for auth in auths]

    assert all(r.status == 200 and r.edge for r in at_edge), [r.body for r in at_edge]
    assert all(r.status == 200 and not r.edge for r in from_django)
    for edge, django in zip(at_edge, from_django, strict=True):
        assert without(edge.json(), *VOLATILE) == without(django.json(), *VOLATILE)
        assert set(edge.json()) == set(django.json())
    positions = [(r.json()["position"], r.json()["admitted"]) for r in at_edge]
    assert positions == [(0, True), (0, True), (1, False), (2, False)]
    assert [bool(r.json()["admission_token"]) for r in at_edge] == [True, True, False, False]
    assert at_edge[0].headers["cache-control"] == "private"
    assert work.requests == 4


def test_a_poll_with_only_its_bearer_token_is_answered_at_the_edge_as_django_would(work: DjangoWork) -> None:
    """The ticket is optional in the contract: a client that ignores it must not push the line onto
    Django. The lane's token cache names the buyer; their ticket is read once, batched."""
    drop = room(quantity=2)
    auths = [bearer(f"b{i}") for i in range(6)]
    for auth in auths:
        join("room", auth)  # through the lane: the tokens are cached
    admit(drop)
    work.reset()

    async def everyone() -> list[Reply]:
        return await asyncio.gather(*(call("GET", "/api/drops/room/queue", headers=a) for a in auths))

    first = run(everyone)
    first_queries, first_requests = list(work.queries), work.requests
    work.reset()
    again = [poll("room", auth) for auth in auths]
    # the tickets are kept (each run of the harness subscribes afresh, and a new subscription
    # forgets the lane's tokens, as after a reconnect: those are looked up again)
    assert work.requests == 0 and not [q for q in work.queries if "admission_ticket" in q]
    django = [django_poll("room", auth) for auth in auths]
    ApiToken.objects.filter(user__username="b0").delete()  # revoked: the lane forgets it at once
    revoked = poll("room", auths[0])

    assert all(r.status == 200 and r.edge for r in first + again), [r.body for r in first]
    assert first_requests == 0 and 1 <= len(first_queries) <= 2, first_queries  # one, then the rest
    assert all("admission_ticket" in q for q in first_queries)
    for edge, answer in zip(again, django, strict=True):
        assert without(edge.json(), *VOLATILE) == without(answer.json(), *VOLATILE)
    assert [r.json()["admitted"] for r in again] == [True, True, False, False, False, False]
    bound = tokens.credential(bearer=auths[2]["authorization"].removeprefix("Bearer "), session_key=None)
    third = tokens.ticket(again[2].json()["queue_ticket"], drop_id=drop.pk, bound_to=bound)
    assert third is not None and third.number == 3
    assert (revoked.status, revoked.edge) == (401, False)


def test_an_admitted_buyer_reserves_with_the_token_from_an_edge_poll(work: DjangoWork) -> None:
    drop = room(quantity=1)
    auth = bearer("winner")
    ticket = join("room", auth)["queue_ticket"]
    waiting = poll("room", auth, ticket)
    admit(drop)
    work.reset()

    admitted = poll("room", auth, ticket)
    assert (work.queries, work.requests) == ([], 0)
    token = admitted.json()["admission_token"]
    bought = run(
        lambda: call(
            "POST",
            "/api/drops/room/holds",
            headers=reserve_headers(auth, **{"x-admission-token": token}),
            body=BODY,
        )
    )

    assert waiting.edge and waiting.json()["admission_token"] is None and waiting.json()["position"] == 1
    assert admitted.edge and admitted.json()["admitted"] is True
    assert bought.status == 201, bought.body
    assert invariant(drop_id=drop.pk).held == 1


def test_the_page_sets_a_cookie_that_its_polls_carry_to_the_edge(work: DjangoWork) -> None:
    """The browser path: the session cookie and the ticket cookie, the page's polling unchanged."""
    room()
    browser = Client()
    browser.force_login(make_buyer("browser"))
    page = browser.post("/drops/room/queue/", follow=True)
    assert page.status_code == 200
    cookie = page.cookies[tokens.TICKET_COOKIE]
    assert cookie["path"] == "/api/drops/room/queue" and cookie["httponly"]
    session = browser.cookies["sessionid"].value
    state.refresh([Drop.objects.get(slug="room").pk])
    work.reset()

    reply = poll("room", {"cookie": f"sessionid={session}; {tokens.TICKET_COOKIE}={cookie.value}"})
    assert (work.queries, work.requests) == ([], 0)
    # Another session (a new login) with the same ticket cookie: not this ticket's credential.
    relogged = poll(
        "room", {"cookie": f"sessionid=other{session[5:]}; {tokens.TICKET_COOKIE}={cookie.value}"}
    )

    assert reply.status == 200 and reply.edge and reply.json()["ticket"] == 1
    assert (relogged.status, relogged.edge) == (401, False)  # Django: that session does not exist


# Anything doubtful goes to Django, which ignores tickets ------------------------------------


def _forged(ticket: str, **_: Any) -> str:
    return ticket[:-3] + ("AAA" if not ticket.endswith("AAA") else "BBB")


def _tampered(ticket: str, *, drop: Drop, other_id: int, **_: Any) -> str:
    """The claims edited to another buyer, the signature kept."""
    claims = claims_of(ticket)
    edited = signing.b64_encode(json.dumps(claims | {"b": other_id}).encode()).decode()
    return ticket.replace(ticket.split(":")[0], edited)


def _other_drop(ticket: str, *, other_drop_ticket: str, **_: Any) -> str:
    return other_drop_ticket


@pytest.mark.parametrize(
    ("case", "make", "sender", "status"),
    [
        ("forged", _forged, "first", 200),
        ("tampered", _tampered, "second", 200),
        ("other-drop", _other_drop, "first", 200),
        ("other-buyer", lambda t, **_: t, "second", 200),
        ("other-buyer-not-in-line", lambda t, **_: t, "stranger", 404),
        ("no-credential", lambda t, **_: t, "nobody", 401),
        ("garbage", lambda t, **_: "\xff\xfe:.:\x00" * 3, "first", 200),
        ("huge", lambda t, **_: t + "x" * 20_000, "first", 200),
        ("no-ticket", lambda t, **_: "", "first", 200),
    ],
)
def test_a_doubtful_ticket_gets_djangos_answer_for_whoever_asks(
    case: str, make: Any, sender: str, status: int, work: DjangoWork
) -> None:
    drop = room(quantity=1)
    elsewhere = room("elsewhere", quantity=1)
    auths = {name: bearer(name) for name in ("first", "second", "stranger")} | {"nobody": {}}
    first = join("room", auths["first"])
    join("room", auths["second"])
    other_drop_ticket = join("elsewhere", auths["first"])["queue_ticket"]
    admit(drop)
    state.refresh([elsewhere.pk])
    second_id = claims_of(join("room", auths["second"])["queue_ticket"])["b"]
    sent = make(first["queue_ticket"], drop=drop, other_id=second_id, other_drop_ticket=other_drop_ticket)
    work.reset()

    reply = poll("room", auths[sender], sent)
    honest = django_poll("room", auths[sender])  # the same buyer asking Django itself

    assert reply.status == status and not reply.edge, reply.body[:300]
    assert work.requests == 2
    if status == 200:
        assert without(reply.json(), *VOLATILE) == without(honest.json(), *VOLATILE)
        # Never the first buyer's admission for anybody else.
        assert reply.json()["admitted"] is (sender == "first")
    else:
        assert reply.json()["error"] == honest.json()["error"]
    assert not Hold.objects.exists()


def test_an_expired_ticket_goes_to_django_which_signs_a_fresh_one(work: DjangoWork) -> None:
    room()
    auth = bearer("old")
    ticket = join("room", auth)["queue_ticket"]
    work.reset()

    with override_settings(QUEUE_TICKET_SECONDS=-1):
        expired = poll("room", auth, ticket)
    fresh = poll("room", auth, expired.json()["queue_ticket"])

    assert (expired.status, expired.edge, expired.json()["ticket"]) == (200, False, 1)
    assert (fresh.status, fresh.edge) == (200, True)


def test_a_stale_snapshot_or_none_sends_the_poll_to_django(redis: redis_lib.Redis, work: DjangoWork) -> None:
    drop = room(quantity=1)
    auth = bearer("slow")
    ticket = join("room", auth)["queue_ticket"]
    state.refresh([drop.pk])
    snap = snapshot_in(redis, "room")
    snap["queue"]["admitted_through"] = 99  # a stale snapshot must never admit
    snap["at"] = time.time() - EDGE.max_age - 1
    redis.set("fg:drop:room", json.dumps(snap))
    EDGE.forget()
    work.reset()

    stale = poll("room", auth, ticket)
    redis.delete("fg:drop:room")
    EDGE.forget()
    missing = poll("room", auth, ticket)

    assert (stale.status, stale.edge, stale.json()["admitted"]) == (200, False, False)
    assert (missing.status, missing.edge, missing.json()["admitted"]) == (200, False, False)
    assert work.requests == 2


def test_a_snapshot_the_edge_cannot_read_sends_the_poll_to_django(
    redis: redis_lib.Redis, work: DjangoWork
) -> None:
    """A snapshot another build published (its queue message lacks a field this build's Place
    needs) is Django's to answer, not a 500 at the edge (the edge hands any poll it fails on to Django)."""
    drop = room(quantity=1)
    auth = bearer("older")
    ticket = join("room", auth)["queue_ticket"]
    state.refresh([drop.pk])
    EDGE.forget()
    work.reset()
    readable = poll("room", auth, ticket)  # the control: this build's snapshot is the edge's
    snap = snapshot_in(redis, "room")
    del snap["queue"]["format"]
    redis.set("fg:drop:room", json.dumps(snap))
    EDGE.forget()
    work.reset()

    older = poll("room", auth, ticket)

    assert (readable.status, readable.edge) == (200, True)
    assert (older.status, older.edge, older.json()["format"]) == (200, False, "waiting_room")
    assert work.requests == 1


def test_before_the_draw_an_entry_is_answered_and_after_it_the_edge_knows_the_number(
    work: DjangoWork, redis: redis_lib.Redis
) -> None:
    drop = make_drop(
        slug="early", quantity=5, waiting_room=True, starts_at=timezone.now() + timedelta(hours=1)
    )
    auths = [bearer(f"e{i}") for i in range(3)]
    joined = [join("early", auth) for auth in auths]
    assert all(j["ticket"] is None and j["drawn"] is False for j in joined)
    state.refresh([drop.pk])
    work.reset()

    before = poll("early", auths[0], joined[0]["queue_ticket"])
    assert (work.queries, work.requests) == ([], 0)
    django_before = django_poll("early", auths[0])
    start_now(drop.pk)
    services.run_wave(Drop.objects.get(pk=drop.pk))  # the start: the draw numbers the entries
    state.refresh([drop.pk])
    EDGE.forget()
    work.reset()
    # The whole line polls at the start with number-less tickets: the draw's map answers them.
    drawn = [poll("early", auth, j["queue_ticket"]) for auth, j in zip(auths, joined, strict=True)]
    assert (work.queries, work.requests) == ([], 0)
    django_drawn = [django_poll("early", auth) for auth in auths]
    again = poll("early", auths[0], drawn[0].json()["queue_ticket"])  # the new ticket carries it
    redis.delete(state.DRAWN.format(drop=drop.pk))
    work.reset()
    lost = poll("early", auths[1], joined[1]["queue_ticket"])  # the map flushed: Django reads the ticket

    assert before.edge and before.status == 200
    assert without(before.json(), *VOLATILE) == without(django_before.json(), *VOLATILE)
    assert before.json()["position"] is None and before.json()["entry"] == joined[0]["entry"]
    assert all(d.edge and d.status == 200 for d in drawn)
    assert [without(d.json(), *VOLATILE) for d in drawn] == [
        without(d.json(), *VOLATILE) for d in django_drawn
    ]
    assert sorted(d.json()["ticket"] for d in drawn) == [1, 2, 3]
    first = drawn[0].json()
    assert claims_of(first["queue_ticket"]) | {"t": None} == claims_of(joined[0]["queue_ticket"])
    assert claims_of(first["queue_ticket"])["t"] == first["ticket"]
    assert again.edge and without(again.json(), *VOLATILE) == without(drawn[0].json(), *VOLATILE)
    assert not lost.edge and work.requests == 1 and lost.json()["ticket"] == drawn[1].json()["ticket"]


def test_the_page_cookie_gets_the_drawn_ticket_from_the_edge(work: DjangoWork) -> None:
    drop = make_drop(
        slug="early", quantity=5, waiting_room=True, starts_at=timezone.now() + timedelta(hours=1)
    )
    auth = bearer("cookie")
    sent = join("early", auth)["queue_ticket"]
    start_now(drop.pk)
    services.run_wave(Drop.objects.get(pk=drop.pk))
    state.refresh([drop.pk])
    EDGE.forget()

    reply = poll("early", {**auth, "cookie": f"{tokens.TICKET_COOKIE}={sent}"})

    assert reply.edge and reply.json()["ticket"] == 1
    cookie = reply.headers.get("set-cookie", "")
    assert cookie.startswith(f"{tokens.TICKET_COOKIE}={reply.json()['queue_ticket']};")
    assert "Path=/api/drops/early/queue" in cookie and "HttpOnly" in cookie and "SameSite=Lax" in cookie


def test_a_real_server_never_answers_garbage_tickets_with_a_500(live_daphne: str) -> None:
    import httpx

    room()
    auth = bearer("junk")
    state.refresh([Drop.objects.get(slug="room").pk])
    sent = [
        "x" * 60_000,  # far beyond any ticket; the server may refuse the header block outright
        "\u00ff\u00fe:.:" * 100,
        ".eJyLjgUAARUAuQ:1:x",
        "a" * 511 + ":" + "b",
    ]
    statuses = []
    with httpx.Client(base_url=live_daphne, timeout=10) as client:
        for value in sent:
            headers = {
                **{name.encode("latin-1"): said.encode("latin-1") for name, said in auth.items()},
                b"x-queue-ticket": value.encode("latin-1"),
                b"cookie": f"{tokens.TICKET_COOKIE}={value[:4000]}".encode("latin-1"),
            }
            try:
                statuses.append(client.get("/api/drops/room/queue", headers=headers).status_code)
            except httpx.RemoteProtocolError:
                statuses.append(400)  # the server hung up on a header block it will not read
    assert all(400 <= s < 500 for s in statuses), statuses  # never in line: Django's 404, or refused
