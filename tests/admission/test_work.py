"""Proof of work for a place in line: work that cannot be done in advance.

A challenge is fresh (a server nonce), expires within minutes, is issued only once the room is
open and is spent by one join; a join without a live, unspent, solved challenge of its own is 428
with a fresh challenge and queues nobody.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from admission import work
from admission.models import Ticket
from catalogue import services as catalogue
from shop.models import DEFAULT_JOIN_WORK_BITS, Drop
from tests.factories import make_buyer, make_drop
from tests.harness import bearer, call, run

if TYPE_CHECKING:
    from django.test.client import _MonkeyPatchedWSGIResponse as TestResponse

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_edge")]

BITS = 10


def guarded(slug: str = "guarded", bits: int = BITS, starts_in: timedelta = timedelta(minutes=30)) -> Drop:
    return make_drop(
        slug=slug, quantity=5, waiting_room=True, join_work_bits=bits, starts_at=timezone.now() + starts_in
    )


def signed_in(username: str) -> tuple[Client, User]:
    buyer = make_buyer(username)
    client = Client()
    client.force_login(buyer)
    return client, buyer


def join(client: Client, slug: str, challenge: str | None = None, proof: str | None = None) -> TestResponse:
    headers: dict[str, Any] = {}  # the test client's WSGI extras (typed Any)
    if challenge is not None:
        headers["HTTP_X_JOIN_CHALLENGE"] = challenge
    if proof is not None:
        headers["HTTP_X_JOIN_PROOF"] = proof
    return client.post(f"/api/drops/{slug}/queue", **headers)


def refused(answer: TestResponse) -> dict[str, Any]:
    """A 428 that hands out a fresh challenge (and says when it expires)."""
    assert answer.status_code == 428, answer.content
    body = answer.json()
    assert body["error"] == "proof_of_work_required" and body["bits"] == BITS
    assert work.CHALLENGE.fullmatch(body["challenge"]) and body["expires_at"]
    return body


def test_a_join_without_a_valid_proof_is_428_with_a_fresh_challenge_and_queues_nobody() -> None:
    guarded()
    client, _ = signed_in("solver")

    bare = refused(join(client, "guarded"))
    again = refused(join(client, "guarded"))
    wrong = next(
        n for n in (format(i, "x") for i in range(10_000)) if not work.solves(bare["challenge"], n, BITS)
    )
    unsolved = refused(join(client, "guarded", bare["challenge"], wrong))
    garbage = refused(join(client, "guarded", "NOT A CHALLENGE", "NOT A NONCE!" * 10))
    assert not Ticket.objects.exists()
    assert len({bare["challenge"], again["challenge"], unsolved["challenge"], garbage["challenge"]}) == 4
    solved = join(client, "guarded", again["challenge"], work.solve(again["challenge"], BITS))
    kept = join(client, "guarded")  # the place is kept: no second proof

    assert solved.status_code == 200 and kept.status_code == 200
    assert kept.json()["entry"] == solved.json()["entry"] and Ticket.objects.count() == 1


def test_a_proof_solved_before_its_challenge_was_issued_is_428_and_queues_nobody(settings) -> None:
    drop = guarded()
    client, buyer = signed_in("banker")
    # a bot banks work days ahead: against the old, fixed challenge (an HMAC of account and drop) ...
    fixed = hmac.new(
        settings.SECRET_KEY.encode(), f"join-work:{drop.pk}:{buyer.pk}".encode(), hashlib.sha256
    ).hexdigest()[:32]
    # ... or against a challenge it made up in the format, with an expiry of its choosing
    made_up = f"{int(timezone.now().timestamp()) + 3600}.{'ab' * 4}.{'cd' * 8}"

    answers = [
        join(client, "guarded", fixed, work.solve(fixed, BITS)),
        join(client, "guarded", made_up, work.solve(made_up, BITS)),
    ]

    assert [refused(a)["challenge"] != c for a, c in zip(answers, (fixed, made_up), strict=True)] == [
        True,
        True,
    ]
    assert "not issued to this account" in answers[1].json()["detail"]
    assert not Ticket.objects.exists()


def test_a_replayed_proof_is_428_and_queues_nobody() -> None:
    drop = guarded()
    client, buyer = signed_in("replayer")
    asked = work.issue(drop=drop, buyer_id=buyer.pk).text
    nonce = work.solve(asked, BITS)
    assert join(client, "guarded", asked, nonce).status_code == 200
    Ticket.objects.filter(drop=drop).delete()  # the place is gone (say, the line was reset)

    replayed = join(client, "guarded", asked, nonce)

    assert refused(replayed)["challenge"] != asked and "used already" in replayed.json()["detail"]
    assert not Ticket.objects.exists()


def test_an_expired_proof_is_428_and_queues_nobody(settings) -> None:
    drop = guarded()
    client, buyer = signed_in("sleeper")
    long_ago = timezone.now() - timedelta(seconds=settings.JOIN_WORK_CHALLENGE_SECONDS + 1)
    asked = work.issue(drop=drop, buyer_id=buyer.pk, now=long_ago).text

    late = join(client, "guarded", asked, work.solve(asked, BITS))

    assert refused(late)["challenge"] != asked and "expired" in late.json()["detail"]
    assert not Ticket.objects.exists()


def test_a_challenge_belongs_to_one_account_and_one_drop() -> None:
    first = guarded("one")
    guarded("two")
    anns, ann = signed_in("ann")
    bobs, _ = signed_in("bob")
    asked = work.issue(drop=first, buyer_id=ann.pk).text
    nonce = work.solve(asked, BITS)

    other_buyer = join(bobs, "one", asked, nonce)
    other_drop = join(anns, "two", asked, nonce)
    own = join(anns, "one", asked, nonce)

    assert (other_buyer.status_code, other_drop.status_code, own.status_code) == (428, 428, 200)
    assert Ticket.objects.count() == 1


def test_no_challenge_before_the_room_opens_and_no_place_without_one() -> None:
    drop = guarded(starts_in=work.ROOM_OPENS + timedelta(minutes=5))
    client, buyer = signed_in("early")

    answer = join(client, "guarded")
    page = client.get("/drops/guarded/").content.decode()

    assert answer.status_code == 409 and answer.json()["error"] == "room_not_open"
    assert answer.json()["opens_at"] == work.room_opens_at(drop).isoformat()
    assert 'id="room-opens"' in page and "data-work-challenge" not in page
    with pytest.raises(work.RoomNotOpen):
        work.issue(drop=drop, buyer_id=buyer.pk)
    assert not Ticket.objects.exists()


def test_the_lane_asks_the_same_proof_as_django() -> None:
    guarded()
    auth = bearer("laner")

    first = run(lambda: call("POST", "/api/drops/guarded/queue", headers=auth))
    asked = first.json()["challenge"]
    proof = {"x-join-challenge": asked, "x-join-proof": work.solve(asked, BITS)}
    joined = run(lambda: call("POST", "/api/drops/guarded/queue", headers={**auth, **proof}))
    Ticket.objects.all().delete()
    replayed = run(lambda: call("POST", "/api/drops/guarded/queue", headers={**auth, **proof}))

    assert first.headers.get("x-floodgate-lane") == "hit" and first.status == 428
    assert first.json()["bits"] == BITS and work.CHALLENGE.fullmatch(asked)
    assert joined.status == 200 and joined.headers.get("x-floodgate-lane") == "hit"
    assert replayed.status == 428 and not Ticket.objects.exists()


def test_the_page_join_needs_the_proof_its_script_finds() -> None:
    guarded()
    client, buyer = signed_in("pager")
    page = client.get("/drops/guarded/queue/").content.decode()
    shown = re.search(r'data-work-challenge="([^"]+)"', page)
    assert shown, page
    asked = shown[1]

    without = client.post("/drops/guarded/queue/", {"proof": "", "challenge": asked})
    queued_without = Ticket.objects.count()
    with_proof = client.post("/drops/guarded/queue/", {"proof": work.solve(asked, BITS), "challenge": asked})

    assert f'data-work-bits="{BITS}"' in page and f'name="challenge" value="{asked}"' in page
    assert without.status_code == 302 and queued_without == 0  # back to the drop page, told why
    assert with_proof.status_code == 302 and Ticket.objects.filter(buyer=buyer).count() == 1


def test_the_work_is_on_by_default_and_create_drop_sets_it_per_drop(capsys) -> None:
    call_command("create_drop", "--slug", "default-on", "--quantity", "3", "--waiting-room")
    call_command("create_drop", "--slug", "off", "--quantity", "3", "--waiting-room", "--join-work-bits", "0")
    call_command(
        "create_drop", "--slug", "hard", "--quantity", "3", "--waiting-room", "--join-work-bits", "22"
    )
    with pytest.raises(CommandError, match="drop not created"):
        call_command("create_drop", "--slug", "bad", "--quantity", "3", "--join-work-bits", "29")
    bits = dict(Drop.objects.values_list("slug", "join_work_bits"))
    assert bits == {"default-on": DEFAULT_JOIN_WORK_BITS, "off": 0, "hard": 22}
    assert DEFAULT_JOIN_WORK_BITS > 0
    copy = catalogue.duplicate_drop(drop=Drop.objects.get(slug="hard"), rehearsal=True, slug_word="rehearsal")
    assert copy.join_work_bits == 0  # a rehearsal measures the line, not the bots' price
    assert catalogue.duplicate_drop(drop=Drop.objects.get(slug="hard")).join_work_bits == 22
