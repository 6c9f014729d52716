"""Raffle drops: entries through the waiting room (its proof of work and limits) until the close, the
same committed draw ranks them, the first ranked get a hold each for the offer time, and an unpaid
win passes to the next ranked entry. Over a real server (floodgate-web, two workers) for the crowd."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from typing import Any

import httpx
import pytest
from django.core import mail
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client, TestCase
from django.utils import timezone

from admission import services, state, work
from admission.models import Ticket
from catalogue.services import create_buyers
from checkout import outbox, raffles
from core.errors import InvalidInput
from holds import services as holds
from holds.counts import invariant
from holds.models import Hold, HoldState
from inventory import services as stock
from sale import offers
from shop.models import Drop, DropFormat
from tests.checkout.helpers import api, buyer_token, pay_at_provider, provider_config, wait_until
from tests.conftest import Worker
from tests.crowd import Answer, Session, crowd
from tests.factories import expire_in, make_buyer, make_drop, merchant, start_now
from tests.harness import EDGE, VOLATILE, DjangoWork, Reply, bearer, django_poll, poll, without
from tests.harness import join as harness_join
from tests.shop.test_admin_add import add_form

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_edge")]

UNITS = 100
ENTRANTS = 2000
UNPAID = 30
BITS = 8  # the room's proof of work applies to a raffle's entries; small, so 2,000 solve in seconds


def raffle(slug: str, *, quantity: int = UNITS, bits: int = 0, **options: Any) -> Drop:
    return make_drop(
        slug=slug,
        quantity=quantity,
        waiting_room=True,
        raffle=True,
        join_work_bits=bits,
        offer_seconds=600,
        starts_at=timezone.now() + timedelta(minutes=10),
        **options,
    )


def close_and_draw(drop: Drop) -> Drop:
    """The entries' close: the start moved to now (as its time coming), then the tick's draw and the
    offers it sends (run here: no worker in this test)."""
    start_now(drop.pk)
    drop = Drop.objects.select_related("product").get(pk=drop.pk)
    with TestCase.captureOnCommitCallbacks(execute=True):  # the draw's map is published on commit
        assert services.run_wave(drop) is None  # a raffle admits nobody in waves
    offers.offer_returns(drop, wait=True)
    return drop


def winners_in_hold_order(drop_id: int, *, after_hold: int = 0) -> list[int]:
    """The ranks of the entries holding a unit, in the order the holds were made."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT t.number FROM holds_hold h"
            "  JOIN admission_ticket t ON t.drop_id = h.drop_id AND t.buyer_id = h.buyer_id"
            " WHERE h.drop_id = %s AND h.id > %s ORDER BY h.id",
            [drop_id, after_hold],
        )
        return [row[0] for row in cursor.fetchall()]


def enter_all(base: str, slug: str, tokens: list[str]) -> list[Answer]:
    """Each entrant enters as the contract says: the join, a 428 with a challenge, the join with its proof."""

    async def enter(client: Session, token: str) -> Answer:
        headers = {"authorization": f"Bearer {token}"}
        asked = await client.post(f"/api/drops/{slug}/queue", headers=headers)
        if asked.status_code != 428:
            return asked
        challenge = asked.json()["challenge"]
        proof = {"x-join-challenge": challenge, "x-join-proof": work.solve(challenge, BITS)}
        return await client.post(f"/api/drops/{slug}/queue", headers={**headers, **proof})

    return crowd(base, tokens, enter)


def look_all(base: str, slug: str, tokens: list[str]) -> list[Answer]:
    async def look(client: Session, token: str) -> Answer:
        return await client.get(f"/api/drops/{slug}/queue", headers={"authorization": f"Bearer {token}"})

    return crowd(base, tokens, look)


def test_a_raffle_of_100_units_for_2000_entrants_over_http(crowd_server: str, capsys) -> None:
    # given: a raffle of 100 units, 2,000 entrants entering over HTTP with the room's proof of work
    drop = raffle("raffle-http", bits=BITS)
    buyers = create_buyers(count=ENTRANTS, prefix="rafflehttp")
    tokens = [b.token for b in buyers]
    entered = enter_all(crowd_server, drop.slug, tokens)
    assert [r.status_code for r in entered] == [200] * ENTRANTS, {
        r.text for r in entered if r.status_code != 200
    }
    assert all(r.json()["format"] == "raffle" and r.json()["result"] is None for r in entered)
    assert Ticket.objects.filter(drop=drop).count() == ENTRANTS

    # when: the entries close and the draw ranks them
    drop = close_and_draw(drop)

    # then: exactly 100 holds, held by the first 100 of the published ranking, in rank order
    published = httpx.get(f"{crowd_server}/api/drops/{drop.slug}/queue/draw").json()
    ranking = published["order"]  # entry ids, first ranked first
    assert len(ranking) == ENTRANTS
    buyer_of_entry = dict(Ticket.objects.filter(drop=drop).values_list("id", "buyer_id"))
    held = Hold.objects.filter(drop=drop, state=HoldState.HELD)
    assert held.count() == UNITS and all(h.quantity == 1 for h in held)
    assert {h.buyer_id for h in held} == {buyer_of_entry[e] for e in ranking[:UNITS]}
    assert winners_in_hold_order(drop.pk) == list(range(1, UNITS + 1))
    count = invariant(drop_id=drop.pk)
    assert (count.held, count.available, count.sold, count.drift) == (UNITS, 0, 0, 0)

    # and every entrant reads their result over HTTP (the edge answers the reserves, Django the wins)
    token_of_buyer = {b.username: b.token for b in buyers}
    entry_of_token = {}
    for entry, username in Ticket.objects.filter(drop=drop).values_list("id", "buyer__username"):
        entry_of_token[token_of_buyer[username]] = entry
    rank_of_entry = {entry: n for n, entry in enumerate(ranking, start=1)}
    looked = look_all(crowd_server, drop.slug, tokens)
    results = {}
    for token, answer in zip(tokens, looked, strict=True):
        assert answer.status_code == 200, answer.text
        body = answer.json()
        rank = rank_of_entry[entry_of_token[token]]
        assert body["rank"] == body["ticket"] == rank and body["format"] == "raffle"
        results[rank] = body
    assert all(
        results[r]["result"] == "won" and results[r]["offer"]["state"] == "held" for r in range(1, 101)
    )
    assert all(results[r]["result"] == "reserve" and results[r]["offer"] is None for r in range(101, 2001))

    # when: 30 wins go unpaid past their deadline (ranks chosen across the winners)
    unpaid_ranks = list(range(3, UNITS + 1, 3))[:UNPAID]
    unpaid = [results[r]["offer"]["hold"] for r in unpaid_ranks]
    last_hold = max(h.pk for h in held)
    expire_in(unpaid, -1)
    offers.offer_returns(drop, wait=True)  # beat's offer step: it reclaims the lapsed wins first

    # then: they pass to entries 101-130, in order, one unit each, and nothing drifts
    assert winners_in_hold_order(drop.pk, after_hold=last_hold) == list(range(UNITS + 1, UNITS + UNPAID + 1))
    assert Hold.objects.filter(drop=drop, state=HoldState.HELD).count() == UNITS
    assert set(Hold.objects.filter(pk__in=unpaid).values_list("state", flat=True)) == {HoldState.EXPIRED}
    count = invariant(drop_id=drop.pk)
    assert (count.held, count.available + count.held + count.sold, count.drift) == (UNITS, UNITS, 0)
    again = {
        rank_of_entry[entry_of_token[t]]: a.json()
        for t, a in zip(tokens, look_all(crowd_server, drop.slug, tokens), strict=True)
    }
    assert all(again[r]["result"] == "lost" and again[r]["offer"]["state"] == "lapsed" for r in unpaid_ranks)
    assert all(again[r]["result"] == "won" for r in range(UNITS + 1, UNITS + UNPAID + 1))
    assert again[UNITS + UNPAID + 1]["result"] == "reserve"

    # and the raffle's draw checks out from its published JSON: it adds up, on the seed alone (no
    # drand round here), so verify_draw says so and exits 3
    capsys.readouterr()
    with pytest.raises(SystemExit) as seed_only:
        call_command("verify_draw", drop.slug, "--json", f"{crowd_server}/api/drops/{drop.slug}/queue/draw")
    assert seed_only.value.code == 3
    assert "SEED ONLY, not verified as unsteerable" in capsys.readouterr().out


def test_an_entry_after_the_close_is_refused_and_an_entrant_keeps_their_entry(make_buyers) -> None:
    drop = raffle("raffle-late", quantity=3)
    early, late = make_buyers(2, prefix="late-")
    services.join(drop=drop, buyer_id=early)
    drop = close_and_draw(drop)
    client = Client()
    client.force_login(make_buyer("late-comer"))
    answer = client.post(f"/api/drops/{drop.slug}/queue")
    assert answer.status_code == 409
    body = answer.json()
    assert body["error"] == "entries_closed" and "closed" in body["detail"] and body["closed_at"]
    with pytest.raises(services.EntriesClosed):
        services.join(drop=drop, buyer_id=late)
    assert not Ticket.objects.filter(drop=drop, buyer_id=late).exists()
    assert services.join(drop=drop, buyer_id=early).number == 1  # joining again: the same entry


def test_an_entry_the_close_overtakes_is_refused_not_numbered_behind_the_list(make_buyers) -> None:
    # given: the list closed (the start's wave), the drop's start not yet seen by the join's check
    drop = raffle("raffle-race", quantity=3)
    first, second = make_buyers(2, prefix="race-")
    services.join(drop=drop, buyer_id=first)
    close_and_draw(drop)
    # when: a join that read the drop before the close (its start still ahead) inserts
    with pytest.raises(services.EntriesClosed):
        services.join(drop=drop, buyer_id=second)  # drop object from before the close
    # then: no ticket numbered after the list (a raffle's entries are the closed list)
    assert list(Ticket.objects.filter(drop=drop).values_list("number", flat=True)) == [1]


def test_result_won_reserve_lost_and_one_email_each() -> None:
    drop = raffle("raffle-mail", quantity=2)
    buyers = [make_buyer(f"mail-{n}").pk for n in range(4)]
    for buyer in buyers:
        services.join(drop=drop, buyer_id=buyer)
    before = services.place(drop=drop, buyer_id=buyers[0]).as_json()
    assert before["format"] == DropFormat.RAFFLE and before["result"] is None and before["rank"] is None
    drop = close_and_draw(drop)
    by_rank = {services.place(drop=drop, buyer_id=b).number: b for b in buyers}
    answers: dict[int | None, dict[str, Any]] = {
        n: services.place(drop=drop, buyer_id=b).as_json() for n, b in by_rank.items()
    }
    assert [answers[n]["result"] for n in (1, 2, 3, 4)] == ["won", "won", "reserve", "reserve"]
    assert answers[3]["rank"] == 3 and answers[1]["offer"]["hold"]

    # the winners hear at once; the reserves not yet (their result is not decided)
    mail.outbox.clear()
    assert raffles.announce_raffle_results() == 2
    assert raffles.announce_raffle_results() == 0  # once per entrant, however often beat runs
    outbox.relay_outbox()
    assert len(mail.outbox) == 2
    won = mail.outbox[0]
    assert won.subject.startswith("[Floodgate] You won")
    assert f"/holds/{answers[1]['offer']['hold']}/" in str(won.body)

    # when: the winners pay (confirm), nothing can reach ranks 3 and 4 any more: lost, and told once
    for n in (1, 2):
        assert holds.confirm(hold_id=answers[n]["offer"]["hold"])
    state.refresh([drop.pk])
    assert services.place(drop=drop, buyer_id=by_rank[3]).as_json()["result"] == "lost"
    assert services.place(drop=drop, buyer_id=by_rank[1]).as_json()["result"] == "won"
    assert raffles.announce_raffle_results() == 2
    outbox.relay_outbox()
    lost = [m for m in mail.outbox if "decided" in m.subject]
    assert len(lost) == 2 and "/queue/verify" in lost[0].body
    assert invariant(drop_id=drop.pk).drift == 0


def test_a_waiting_room_says_its_format_and_no_result(make_buyers) -> None:
    drop = make_drop(
        slug="room-format", quantity=3, waiting_room=True, starts_at=timezone.now() + timedelta(minutes=5)
    )
    (buyer,) = make_buyers(1, prefix="fmt-")
    body = services.join(drop=drop, buyer_id=buyer).as_json()
    assert body["format"] == "waiting_room" and body["result"] is None and body["rank"] is None


def test_a_raffle_needs_a_waiting_room() -> None:
    with pytest.raises(InvalidInput, match="waiting room"):
        make_drop(slug="no-room", raffle=True, waiting_room=False)
    assert not Drop.objects.filter(slug="no-room").exists()


def create(*args: str) -> str:
    out = StringIO()
    call_command("create_drop", *args, stdout=out)
    return out.getvalue()


def test_create_drop_makes_a_raffle_whose_entries_close_in_seconds() -> None:
    printed = create("--slug", "cmd-raffle", "--quantity", "10", "--raffle", "--entries-close-in", "120")
    drop = Drop.objects.get(slug="cmd-raffle")
    assert drop.raffle and drop.waiting_room and drop.format == DropFormat.RAFFLE
    assert abs((drop.starts_at - timezone.now()).total_seconds() - 120) < 10
    assert '"format": "raffle"' in printed


@pytest.mark.parametrize(
    "args, message",
    [
        (["--entries-close-in", "60"], "add --raffle"),
        (["--raffle", "--entries-close-in", "0"], "at least 1 second"),
        (["--raffle", "--entries-close-in", "-5"], "at least 1 second"),
        (["--raffle", "--entries-close-in", "60", "--starts-in", "30"], "give --entries-close-in or"),
        (["--raffle", "--no-waiting-room"], "waiting room"),
    ],
)
def test_create_drop_refuses_bad_raffle_flags_and_writes_nothing(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        create("--slug", "bad-raffle", "--quantity", "10", *args)
    assert not Drop.objects.filter(slug="bad-raffle").exists()


def test_create_drop_refuses_a_close_that_is_not_a_number() -> None:
    with pytest.raises(CommandError, match="entries-close-in"):
        create("--slug", "bad-raffle", "--quantity", "10", "--raffle", "--entries-close-in", "soon")
    assert not Drop.objects.filter(slug="bad-raffle").exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "chosen, flags",
    [("raffle", (True, True)), ("waiting_room", (True, False)), ("first_come", (False, False))],
)
def test_the_admin_sets_a_drops_format_as_one_choice(
    roles: None, chosen: str, flags: tuple[bool, bool]
) -> None:
    client = merchant()
    answer = client.post("/admin/shop/drop/add/", add_form(format=chosen))
    assert answer.status_code == 302, answer.context["adminform"].form.errors if answer.context else answer
    drop = Drop.objects.get(slug="tees")
    assert (drop.waiting_room, drop.raffle) == flags and drop.format == chosen
    page = client.get(f"/admin/shop/drop/{drop.pk}/change/")
    assert f'<option value="{chosen}" selected>' in page.content.decode()


def test_the_admin_refuses_a_format_that_does_not_exist(roles: None) -> None:
    answer = merchant().post("/admin/shop/drop/add/", add_form(format="lottery"))
    assert answer.status_code == 200
    assert "format" in answer.context["adminform"].form.errors
    assert not Drop.objects.filter(slug="tees").exists()


def test_a_winner_pays_through_the_saga_and_an_unpaid_win_passes_on(
    live_daphne: str, payment_provider: str, celery_worker: Worker
) -> None:
    # given: a raffle of 2 units and 3 entrants, drawn
    provider_config(payment_provider, latency_ms=50, failure_rate=0, duplicates=1, late_seconds=0)
    drop = raffle("raffle-saga", quantity=2)
    tokens = [buyer_token(f"saga-{n}") for n in range(3)]
    for token in tokens:
        with api(live_daphne, token) as client:
            assert client.post(f"/api/drops/{drop.slug}/queue").status_code == 200
    drop = close_and_draw(drop)
    looked = {}
    for token in tokens:
        with api(live_daphne, token) as client:
            body = client.get(f"/api/drops/{drop.slug}/queue").json()
            looked[body["rank"]] = (token, body)
    assert [looked[n][1]["result"] for n in (1, 2, 3)] == ["won", "won", "reserve"]

    # when: rank 1 pays for its win through the saga; rank 2 lets its deadline pass
    first_token, first = looked[1]
    with api(live_daphne, first_token) as client:
        started = client.post(f"/api/holds/{first['offer']['hold']}/payment")
    assert started.status_code == 202, started.text
    pay_at_provider(started.json()["redirect_url"])
    wait_until(lambda: Hold.objects.get(pk=first["offer"]["hold"]).state == HoldState.SOLD)
    expire_in([looked[2][1]["offer"]["hold"]], -1)
    offers.offer_returns(drop, wait=True)

    # then: the sold win stays won, the lapsed one is lost, rank 3 won it; nothing drifts
    results = {}
    for n, (token, _) in looked.items():
        with api(live_daphne, token) as client:
            results[n] = client.get(f"/api/drops/{drop.slug}/queue").json()
    assert (results[1]["result"], results[1]["offer"]["state"]) == ("won", "sold")
    assert (results[2]["result"], results[2]["offer"]["state"]) == ("lost", "lapsed")
    assert (results[3]["result"], results[3]["offer"]["state"]) == ("won", "held")
    count = invariant(drop_id=drop.pk)
    assert (count.sold, count.held, count.available, count.drift) == (1, 1, 0, 0)


def test_the_edge_answers_a_raffles_reserves_as_django_does_and_sends_wins_to_django(
    work: DjangoWork,
) -> None:
    # given: a raffle of 2 units and 5 entrants, drawn
    drop = raffle("raffle-edge", quantity=2)
    auths = [bearer(f"re{i}") for i in range(5)]
    joined = [harness_join(drop.slug, auth) for auth in auths]
    drop = close_and_draw(drop)
    state.refresh([drop.pk])
    EDGE.forget()

    def both() -> list[tuple[Reply, Reply]]:
        answers = [
            (poll(drop.slug, a, j["queue_ticket"]), django_poll(drop.slug, a))
            for a, j in zip(auths, joined, strict=True)
        ]
        for edge, django in answers:
            assert edge.status == django.status == 200
            assert without(edge.json(), *VOLATILE) == without(django.json(), *VOLATILE)
        return answers

    # then: both doors say the same; the reserves are the edge's to answer, the wins Django's
    answers = both()
    by_rank = {e.json()["rank"]: e for e, _ in answers}
    assert [by_rank[n].json()["result"] for n in range(1, 6)] == [
        "won",
        "won",
        "reserve",
        "reserve",
        "reserve",
    ]
    assert [by_rank[n].edge for n in range(1, 6)] == [False, False, True, True, True]

    # when: both winners pay, nothing can reach the reserves: lost, at the edge as in Django
    for n in (1, 2):
        assert holds.confirm(hold_id=by_rank[n].json()["offer"]["hold"])
    state.refresh([drop.pk])
    EDGE.forget()
    after = {e.json()["rank"]: e for e, _ in both()}
    assert [after[n].json()["result"] for n in range(1, 6)] == ["won", "won", "lost", "lost", "lost"]
    assert after[3].edge


def test_units_added_after_the_draw_go_to_the_next_ranked_entry_not_to_the_winners() -> None:
    # given: a raffle of 2 units and 4 entrants, drawn (ranks 1 and 2 hold the wins)
    drop = raffle("raffle-more", quantity=2, per_buyer_limit=2)
    buyers = [make_buyer(f"more-{n}").pk for n in range(4)]
    for buyer in buyers:
        services.join(drop=drop, buyer_id=buyer)
    drop = close_and_draw(drop)
    by_rank = {services.place(drop=drop, buyer_id=b).number: b for b in buyers}

    # when: the merchant adds a unit after the draw, and the offers run
    stock.change_quantity(drop=drop, quantity=3)
    offers.offer_returns(drop, wait=True)

    # then: rank 3 is offered it (as a win passed on would be); no winner can claim it as a second unit
    assert services.place(drop=drop, buyer_id=by_rank[3]).as_json()["result"] == "won"
    assert services.place(drop=drop, buyer_id=by_rank[4]).as_json()["result"] == "reserve"
    assert winners_in_hold_order(drop.pk) == [1, 2, 3]
    count = invariant(drop_id=drop.pk)
    assert (count.quantity, count.held, count.available, count.drift) == (3, 3, 0, 0)
