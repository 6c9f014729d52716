"""Proof of work for a place in line: a join without a valid one is 428 and queues nobody."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from admission import work
from admission.models import Ticket
from tests.factories import make_buyer, make_drop
from tests.harness import bearer, call, run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_edge")]

BITS = 10


def guarded(slug: str = "guarded", bits: int = BITS):
    return make_drop(
        slug=slug,
        quantity=5,
        waiting_room=True,
        join_work_bits=bits,
        starts_at=timezone.now() + timedelta(hours=1),
    )


def test_a_join_without_a_valid_proof_is_428_with_the_challenge_and_queues_nobody() -> None:
    drop = guarded()
    buyer = make_buyer("solver")
    client = Client()
    client.force_login(buyer)
    asked = work.challenge(drop_id=drop.pk, buyer_id=buyer.pk)
    wrong = next(n for n in (format(i, "x") for i in range(10_000)) if not work.solves(asked, n, BITS))

    bare = client.post("/api/drops/guarded/queue")
    forged = client.post("/api/drops/guarded/queue", HTTP_X_JOIN_PROOF=wrong)
    garbage = client.post("/api/drops/guarded/queue", HTTP_X_JOIN_PROOF="NOT A NONCE!" * 10)
    assert not Ticket.objects.exists()
    solved = client.post("/api/drops/guarded/queue", HTTP_X_JOIN_PROOF=work.solve(asked, BITS))
    again = client.post("/api/drops/guarded/queue")  # the place is kept: no second proof

    for answer in (bare, forged, garbage):
        assert answer.status_code == 428
        body = answer.json()
        assert (body["error"], body["challenge"], body["bits"]) == ("proof_of_work_required", asked, BITS)
    assert solved.status_code == 200 and again.status_code == 200
    assert again.json()["entry"] == solved.json()["entry"] and Ticket.objects.count() == 1


def test_a_challenge_belongs_to_one_account_and_one_drop() -> None:
    first = guarded("one")
    guarded("two")
    ann, bob = make_buyer("ann"), make_buyer("bob")
    nonce = work.solve(work.challenge(drop_id=first.pk, buyer_id=ann.pk), BITS)
    bobs = Client()
    bobs.force_login(bob)
    anns = Client()
    anns.force_login(ann)

    other_buyer = bobs.post("/api/drops/one/queue", HTTP_X_JOIN_PROOF=nonce)
    other_drop = anns.post("/api/drops/two/queue", HTTP_X_JOIN_PROOF=nonce)
    own = anns.post("/api/drops/one/queue", HTTP_X_JOIN_PROOF=nonce)

    assert (other_buyer.status_code, other_drop.status_code, own.status_code) == (428, 428, 200)
    assert Ticket.objects.count() == 1


def test_the_lane_asks_the_same_proof_as_django() -> None:
    drop = guarded()
    auth = bearer("laner")
    buyer_id = Ticket._meta.get_field("buyer").related_model.objects.get(username="laner").pk
    asked = work.challenge(drop_id=drop.pk, buyer_id=buyer_id)

    refused = run(lambda: call("POST", "/api/drops/guarded/queue", headers=auth))
    joined = run(
        lambda: call(
            "POST", "/api/drops/guarded/queue", headers={**auth, "x-join-proof": work.solve(asked, BITS)}
        )
    )

    assert refused.headers.get("x-floodgate-lane") == "hit" and refused.status == 428
    assert refused.json()["challenge"] == asked and refused.json()["bits"] == BITS
    assert joined.status == 200 and joined.json()["entry"] == Ticket.objects.get().pk


def test_the_page_join_needs_the_proof_its_script_finds() -> None:
    drop = guarded()
    buyer = make_buyer("pager")
    client = Client()
    client.force_login(buyer)
    page = client.get("/drops/guarded/queue/").content.decode()
    asked = work.challenge(drop_id=drop.pk, buyer_id=buyer.pk)

    without = client.post("/drops/guarded/queue/", {"proof": ""})
    queued_without = Ticket.objects.count()
    with_proof = client.post("/drops/guarded/queue/", {"proof": work.solve(asked, BITS)})

    assert f'data-work-challenge="{asked}"' in page and f'data-work-bits="{BITS}"' in page
    assert without.status_code == 302 and queued_without == 0  # back to the drop page, told why
    assert with_proof.status_code == 302 and Ticket.objects.filter(buyer=buyer).count() == 1
