"""A drop's public report, published when it is over, checked against the database.

The sale: a waiting room of 3 units and 7 entries that sells out. One admitted buyer lets a hold
run out and the unit is offered to the next entry, who pays; a paid unit is refunded and put back
on sale, offered to the entry after, who lets the offer lapse, and then to the next, who pays; the
last entry's account is banned. Every figure and
every entry's outcome is compared with what the database holds, the root with the leaves, and
each proof with the root, through the API and the command; garbage is refused and changes nothing.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from admission import services as line
from admission import state, tally
from admission.models import Queue, Ticket
from checkout import refunds
from fairness import chart, merkle, outcomes, services
from fairness.models import Report
from holds import services as holds
from holds.counts import invariant
from holds.models import Hold, HoldState
from sale import offers
from shop.models import Drop
from tests.checkout.helpers import accepted, paid
from tests.factories import expire_in, make_buyer, merchant
from tests.harness import admit, room

pytestmark = pytest.mark.django_db(transaction=True)


def sale(slug: str = "fair") -> tuple[Drop, dict[str, User]]:
    """The sale above, over: returns the drop and its buyers by name (ticket order a..g)."""
    drop = room(slug, quantity=3)
    buyers = {name: make_buyer(f"{slug}-{name}") for name in "abcdefg"}
    for buyer in buyers.values():
        line.join(drop=drop, buyer_id=buyer.pk)
    assert admit(drop) == 3
    held = {
        name: holds.reserve(drop=drop, buyer_id=buyers[name].pk, quantity=1, idempotency_key=name).hold
        for name in "abc"
    }
    orders = {name: paid(held[name]) for name in "ac"}
    expire_in([held["b"].pk], -1)  # b runs out: the unit goes to the next entry, d
    assert offers.offer_returns(Drop.objects.get(pk=drop.pk), wait=True) == 1
    paid(Hold.objects.get(drop=drop, buyer=buyers["d"], state=HoldState.HELD))
    asked = refunds.request_refund(order_id=orders["a"].pk, quantity=1, restock=True, by=None)
    accepted(asked.refund)  # a's unit comes back on sale: offered to e, who lets it lapse
    assert offers.offer_returns(Drop.objects.get(pk=drop.pk), wait=True) == 1
    lapsed = Hold.objects.get(drop=drop, buyer=buyers["e"], state=HoldState.HELD)
    expire_in([lapsed.pk], -1)
    assert offers.offer_returns(Drop.objects.get(pk=drop.pk), wait=True) == 1  # to f, who pays
    paid(Hold.objects.get(drop=drop, buyer=buyers["f"], state=HoldState.HELD))
    get_user_model().objects.filter(pk=buyers["g"].pk).update(is_active=False)
    state.refresh([drop.pk])  # published, as the tick keeps it: the door counts it
    tally.add(Counter({(slug, tally.BUSY): 4, (slug, tally.RATE_LIMITED): 2}))
    Drop.objects.filter(pk=drop.pk).update(ends_at=timezone.now() - timedelta(seconds=1))
    return Drop.objects.get(pk=drop.pk), buyers


def expected_outcome(drop: Drop, ticket: Ticket) -> str:
    """The entry's outcome line, from the rows themselves (not the report's statement)."""
    mine = Hold.objects.filter(drop=drop, buyer_id=ticket.buyer_id)
    sold = mine.filter(state=HoldState.SOLD)
    admitted = ticket.number is not None and ticket.number <= Queue.objects.get(drop=drop).admitted_through
    return (
        f"entry={ticket.pk};place={ticket.number};admitted={int(admitted)};"
        f"offered={mine.filter(idempotency_key=f'offer:{ticket.pk}').count()};"
        f"expired={mine.filter(state=HoldState.EXPIRED).count()};"
        f"bought={sum(h.quantity for h in sold)};refunded={sum(h.refunded for h in sold)};"
        f"banned={int(not ticket.buyer.is_active)}"
    )


def test_the_report_of_a_sold_out_room_says_what_the_database_holds() -> None:
    drop, buyers = sale()
    body = Client().get("/api/drops/fair/report").json()
    tickets = list(Ticket.objects.filter(drop=drop).select_related("buyer").order_by("pk"))
    assert body["leaves"] == [expected_outcome(drop, t) for t in tickets]
    entry = {name: Ticket.objects.get(drop=drop, buyer=b).pk for name, b in buyers.items()}
    # what the story above says, read back from the lines
    assert (
        body["leaves"][0]
        == f"entry={entry['a']};place=1;admitted=1;offered=0;expired=0;bought=1;refunded=1;banned=0"
    )
    assert body["leaves"][1].endswith("expired=1;bought=0;refunded=0;banned=0")
    assert (
        body["leaves"][3]
        == f"entry={entry['d']};place=4;admitted=1;offered=1;expired=0;bought=1;refunded=0;banned=0"
    )
    assert body["leaves"][4].endswith("offered=1;expired=1;bought=0;refunded=0;banned=0")
    assert body["leaves"][5].endswith("offered=1;expired=0;bought=1;refunded=0;banned=0")
    assert body["leaves"][6].endswith("place=7;admitted=0;offered=0;expired=0;bought=0;refunded=0;banned=1")
    assert body["size"] == 7 and body["root"] == outcomes.root_of(body["leaves"])

    figures = body["figures"]
    sold = Hold.objects.filter(drop=drop, state=HoldState.SOLD)
    assert (
        figures["units"]
        == {
            "quantity": 3,
            "sold": sum(h.quantity - h.refunded for h in sold),
            "refunded": sum(h.refunded for h in sold),
            "restocked": sum(h.restocked for h in sold),
            "left": invariant(drop_id=drop.pk).available,
        }
        == {"quantity": 3, "sold": 3, "refunded": 1, "restocked": 1, "left": 0}
    )
    assert figures["holds_expired"] == Hold.objects.filter(drop=drop, state=HoldState.EXPIRED).count() == 2
    offered = {
        Hold.objects.get(drop=drop, buyer=buyers[name], idempotency_key=f"offer:{entry[name]}").created_at
        for name in "def"
    }
    assert [(o["entry"], o["place"]) for o in figures["offers"]] == [
        (entry["d"], 4),
        (entry["e"], 5),
        (entry["f"], 6),
    ]
    assert {datetime.fromisoformat(o["at"]) for o in figures["offers"]} == offered
    assert figures["offers_in_line_order"] is True
    assert figures["door"] == {
        "proof_failed": 0,
        "rate_limited": 2,
        "busy": 4,
        "server_error": 0,
        "banned": 1,
        "accounts_merged": 0,
    }
    assert figures["entries"] == 7
    # the wave let 3 in; the three offers took the mark past it, to 6
    assert figures["admissions"]["admitted_through"] == Queue.objects.get(drop=drop).admitted_through == 6
    assert [w["admitted_through"] for w in figures["admissions"]["waves"]] == [3]
    assert (
        figures["waits"]["admitted"] == 6
        and 0 <= figures["waits"]["p50_seconds"] <= figures["waits"]["p99_seconds"]
    )
    assert figures["draw"]["seed_sha256"] == Queue.objects.get(drop=drop).seed_sha256

    # every entry's proof leads to the published root
    for ticket in tickets:
        proof = Client().get(f"/api/drops/fair/report/entries/{ticket.pk}").json()
        assert proof["leaf"] == expected_outcome(drop, ticket)
        assert services.check(proof, entry=ticket.pk, root=body["root"]) == []


def test_a_tampered_outcome_or_proof_does_not_verify_and_the_untouched_one_does() -> None:
    drop, buyers = sale("tamper")
    a = Ticket.objects.get(drop=drop, buyer=buyers["a"]).pk
    proof = Client().get(f"/api/drops/tamper/report/entries/{a}").json()
    assert services.check(proof, entry=a) == []  # the control
    better = proof | {"leaf": proof["leaf"].replace("refunded=1", "refunded=0")}
    assert "not the published" in services.check(better, entry=a)[0]
    flipped = proof | {
        "proof": [("0" if proof["proof"][0][0] != "0" else "1") + proof["proof"][0][1:], *proof["proof"][1:]]
    }
    assert "not the published" in services.check(flipped, entry=a)[0]
    assert "does not fit" in services.check(proof | {"size": 1}, entry=a)[0]
    assert "not entry" in services.check(proof, entry=a + 1)[0]
    assert "not the root you were given" in services.check(proof, entry=a, root="0" * 64)[0]


def test_the_command_verifies_an_entry_and_fails_a_tampered_one(tmp_path: Path) -> None:
    drop, buyers = sale("cmd")
    d = Ticket.objects.get(drop=drop, buyer=buyers["d"]).pk
    out = io.StringIO()
    call_command("verify_outcome", "cmd", str(d), stdout=out)
    assert out.getvalue().startswith(f"verified: entry={d};place=4;")

    document = Client().get(f"/api/drops/cmd/report/entries/{d}").json()
    saved = tmp_path / "proof.json"
    saved.write_text(json.dumps(document))
    out = io.StringIO()
    call_command(
        "verify_outcome", "cmd", str(d), "--json", str(saved), "--root", document["root"], stdout=out
    )
    assert "verified" in out.getvalue()  # the control: the saved proof, against the root given apart

    saved.write_text(json.dumps(document | {"leaf": document["leaf"].replace("bought=1", "bought=2")}))
    err = io.StringIO()
    with pytest.raises(SystemExit) as failed:
        call_command("verify_outcome", "cmd", str(d), "--json", str(saved), stderr=err)
    assert failed.value.code == 1 and "MISMATCH" in err.getvalue()
    with pytest.raises(SystemExit) as failed:
        call_command("verify_outcome", "cmd", str(d), "--root", "ab" * 32, stderr=io.StringIO())
    assert failed.value.code == 1


def test_the_report_waits_for_the_end_and_for_the_last_hold() -> None:
    drop = room("early", quantity=2)
    buyer = make_buyer("early-a")
    line.join(drop=drop, buyer_id=buyer.pk)
    admit(drop)
    answer = Client().get("/api/drops/early/report")
    assert answer.status_code == 409 and answer.json()["error"] == "report_not_published"
    hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=1, idempotency_key="h").hold
    Drop.objects.filter(pk=drop.pk).update(ends_at=timezone.now() - timedelta(seconds=1))
    answer = Client().get("/api/drops/early/report")  # over, but a buyer still holds a unit
    assert answer.status_code == 409 and "holding a unit" in answer.json()["detail"]
    assert not Report.objects.exists()
    out = io.StringIO()
    with pytest.raises(SystemExit) as waiting:
        call_command("verify_outcome", "early", "1", stdout=out)
    assert waiting.value.code == 2 and "no report yet" in out.getvalue()
    paid(hold)
    assert Client().get("/api/drops/early/report").status_code == 200
    assert Report.objects.filter(drop=drop).exists()


def test_garbage_is_refused_clearly_and_changes_nothing() -> None:
    drop, _ = sale("junk")
    client = Client()
    for entry, status in (
        ("abc", 422),
        ("-1", 422),
        ("1" * 30, 422),
        ("1.5", 422),
        ("²", 422),
        ("999999999", 404),
    ):
        answer = client.get(f"/api/drops/junk/report/entries/{entry}")
        assert answer.status_code == status, entry
        assert answer.json()["detail"]
    assert client.get("/api/drops/nope/report").status_code == 404
    assert client.post("/api/drops/junk/report").status_code == 405
    assert client.get("/drops/nope/report/").status_code == 404
    report = Report.objects.get(drop=drop)  # the first good read published it; garbage did not change it
    assert client.get("/api/drops/junk/report/entries/x").status_code == 422
    assert Report.objects.get(drop=drop).root == report.root and Report.objects.count() == 1


def test_the_merchant_adds_a_note_but_cannot_edit_the_figures(roles: None) -> None:
    drop, _ = sale("noted")
    published = services.report(drop)
    client = merchant()
    page = client.get(f"/admin/fairness/report/{drop.pk}/change/")
    assert page.status_code == 200
    forged = {"units": {"quantity": 3, "sold": 3, "refunded": 0, "restocked": 0, "left": 0}}
    answer = client.post(
        f"/admin/fairness/report/{drop.pk}/change/",
        {
            "note": "Thank you all: the next drop is in March.",
            "figures": json.dumps(forged),
            "root": "0" * 64,
        },
    )
    assert answer.status_code == 302
    after = Report.objects.get(drop=drop)
    assert after.note == "Thank you all: the next drop is in March."
    assert after.figures == published.figures and after.root == published.root
    shown = Client().get("/drops/noted/report/").content.decode()
    assert "Thank you all: the next drop is in March." in shown and published.root in shown


def test_a_buyer_sees_their_own_outcome_on_the_page_and_nobody_elses() -> None:
    drop, buyers = sale("mine")
    client = Client()
    client.force_login(buyers["d"])
    page = client.get("/drops/mine/report/").content.decode()
    d = Ticket.objects.get(drop=drop, buyer=buyers["d"]).pk
    assert f"entry={d};place=4;" in page and 'id="report-mine"' in page
    assert 'href="/drops/mine/report/"' in client.get("/drops/mine/queue/").content.decode()
    visitor = Client().get("/drops/mine/report/").content.decode()
    assert 'id="report-mine"' not in visitor and "report-root" in visitor
    for buyer in buyers.values():
        assert buyer.email not in visitor and buyer.username not in visitor  # nothing personal published
    assert 'href="/drops/mine/report/"' in Client().get("/drops/mine/").content.decode()
    # the line drawn: one wave's step and the three offers past it, as dots
    assert 'id="report-chart-mark"' in visitor and visitor.count('class="report-chart-offer"') == 3


def test_the_chart_steps_up_with_each_wave_and_dots_each_offer() -> None:
    start = timezone.now()
    waves = [(start + timedelta(seconds=2), 10), (start + timedelta(seconds=6), 30)]
    offered = [(start + timedelta(seconds=8), 31)]
    drawn = chart.line(start, waves, offered)
    assert drawn is not None and drawn.places == 31 and drawn.seconds == 8.0
    points = [tuple(map(float, p.split(","))) for p in drawn.steps.split()]
    ys = [y for _, y in points]
    assert ys == sorted(ys, reverse=True)  # the mark only goes up (y grows downwards)
    assert points[0] == (0.0, 160.0) and points[-1][0] == 600.0
    assert drawn.offers == [(600.0, 0.0)]
    assert chart.line(start, [], []) is None


def test_a_buyer_cannot_pass_their_own_hold_off_as_an_offer() -> None:
    drop = room("spoof", quantity=3)
    x, y = make_buyer("spoof-x"), make_buyer("spoof-y")
    for buyer in (x, y):
        line.join(drop=drop, buyer_id=buyer.pk)
    admit(drop)
    y_entry = Ticket.objects.get(drop=drop, buyer=y).pk
    # x sends y's offer key as their own idempotency key: a hold with a request digest, no offer
    paid(holds.reserve(drop=drop, buyer_id=x.pk, quantity=1, idempotency_key=f"offer:{y_entry}").hold)
    Drop.objects.filter(pk=drop.pk).update(ends_at=timezone.now() - timedelta(seconds=1))
    body = Client().get("/api/drops/spoof/report").json()
    assert body["figures"]["offers"] == [] and body["figures"]["offers_in_line_order"] is True
    assert all(";offered=0;" in leaf for leaf in body["leaves"])


def reference_root(hashes: list[bytes]) -> bytes:
    """RFC 9162's MTH, as the RFC writes it (recursive): the level-built tree must agree."""
    if len(hashes) == 1:
        return hashes[0]
    k = 1 << ((len(hashes) - 1).bit_length() - 1)
    return merkle.node_hash(reference_root(hashes[:k]), reference_root(hashes[k:]))


def reference_path(hashes: list[bytes], index: int) -> list[bytes]:
    if len(hashes) == 1:
        return []
    k = 1 << ((len(hashes) - 1).bit_length() - 1)
    if index < k:
        return [*reference_path(hashes[:k], index), reference_root(hashes[k:])]
    return [*reference_path(hashes[k:], index - k), reference_root(hashes[:k])]


def test_merkle_proofs_hold_for_every_leaf_of_every_size() -> None:
    leaves = [merkle.leaf_hash(f"entry={i}") for i in range(1, 34)]
    for size in range(1, len(leaves) + 1):
        tree = merkle.Tree(leaves[:size])
        root = tree.root
        assert root == reference_root(leaves[:size])
        for index in range(size):
            path = tree.proof(index)
            assert path == reference_path(leaves[:size], index)
            assert merkle.root_from_proof(leaves[index], index, size, path) == root
            if size < len(leaves):  # a proof in the smaller tree is no proof in the larger one
                bigger = merkle.root(leaves[: size + 1])
                assert merkle.root_from_proof(leaves[index], index, size + 1, path) != bigger
            if size > 1:
                assert merkle.root_from_proof(leaves[(index + 1) % size], index, size, path) != root
    # RFC 9162's empty-leaf hash, and a tree that does not duplicate its last leaf to fill a level
    assert merkle.leaf_hash("").hex() == "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
    assert merkle.root(leaves[:3]) != merkle.root([*leaves[:3], leaves[2]])
