"""Presale codes over HTTP, through the real ASGI application (edge, lane, Django): in the window a
claim carrying `presale_code` is Django's single claim, the edge lets it by, and every refusal is
the same clear answer on the lane's door and Django's."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from admission import state
from holds import presale
from holds.counts import invariant
from holds.models import Hold, PresaleCode
from shop.models import Drop
from tests.factories import make_drop
from tests.harness import EDGE, Reply, bearer, call, reserve_headers, run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_edge")]


def presale_drop(slug: str = "early") -> Drop:
    now = timezone.now()
    return make_drop(
        slug=slug,
        quantity=5,
        starts_at=now + timedelta(hours=1),
        presale_starts_at=now - timedelta(minutes=1),
    )


def claim(slug: str, auth: dict[str, str], body: dict[str, object], key: str = "k1") -> Reply:
    raw = json.dumps(body).encode()
    return run(lambda: call("POST", f"/api/drops/{slug}/holds", headers=reserve_headers(auth, key), body=raw))


def test_a_code_in_the_presale_window_holds_a_unit_through_django_and_is_spent() -> None:
    drop = presale_drop()
    (code,) = presale.generate_codes(drop=drop, count=1)
    auth = bearer("vip")

    reply = claim("early", auth, {"quantity": 1, "presale_code": code.code})
    again = claim("early", auth, {"quantity": 1, "presale_code": code.code})

    assert reply.status == 201, reply.body
    assert reply.headers.get("x-floodgate-lane") != "hit"  # the lane left it to Django's single claim
    assert again.status == 200 and again.json()["id"] == reply.json()["id"]
    assert Hold.objects.get(drop=drop).presale_code_id == code.pk
    assert PresaleCode.objects.get(pk=code.pk).uses == 1


def test_the_edge_with_the_drops_snapshot_lets_a_presale_claim_by_and_still_refuses_before_it() -> None:
    # given both drops' snapshots published, as beat does: the edge answers from them
    drop = presale_drop()
    later = make_drop(slug="later", quantity=5, starts_at=timezone.now() + timedelta(hours=1))
    (code,) = presale.generate_codes(drop=drop, count=1)
    state.refresh([drop.pk, later.pk])
    EDGE.forget()

    in_window = claim("early", bearer("vip"), {"quantity": 1, "presale_code": code.code})
    not_yet = claim("later", bearer("eager"), {"quantity": 1, "presale_code": code.code})

    assert in_window.status == 201 and not in_window.edge, in_window.body
    assert (not_yet.status, not_yet.json()["error"]) == (425, "not_started") and not_yet.edge


def test_the_drop_says_when_its_presale_opens() -> None:
    drop = presale_drop()

    reply = run(lambda: call("GET", "/api/drops/early"))

    assert reply.status == 200 and reply.json()["state"] == "scheduled"
    assert drop.presale_starts_at is not None
    assert reply.json()["presale_starts_at"] == drop.presale_starts_at.isoformat()


REFUSALS = [
    ("no code, not on the list", {"quantity": 1}, 425, "not_started"),
    ("an unknown code", {"quantity": 1, "presale_code": "NOSUCHCODE"}, 403, "invalid_code"),
    ("a number", {"quantity": 1, "presale_code": 12345}, 403, "invalid_code"),
    ("a list", {"quantity": 1, "presale_code": ["A"]}, 403, "invalid_code"),
    ("too long", {"quantity": 1, "presale_code": "A" * 500}, 403, "invalid_code"),
    ("unicode", {"quantity": 1, "presale_code": "CAF\u00c9"}, 403, "invalid_code"),
    ("NUL", {"quantity": 1, "presale_code": "AB\u0000"}, 403, "invalid_code"),
]


@pytest.mark.parametrize(("case", "body", "status", "code"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_a_claim_the_presale_does_not_admit_is_refused_clearly_and_changes_nothing(
    case: str, body: dict[str, object], status: int, code: str
) -> None:
    drop = presale_drop()
    presale.generate_codes(drop=drop, count=2)

    reply = claim("early", bearer("hopeful"), body)

    assert (reply.status, reply.json()["error"]) == (status, code), (case, reply.body)
    assert reply.json()["detail"]
    assert not Hold.objects.exists() and invariant(drop_id=drop.pk).available == 5
    assert set(PresaleCode.objects.values_list("uses", flat=True)) == {0}


def test_a_used_code_is_409_on_both_doors() -> None:
    drop = presale_drop()
    (code,) = presale.generate_codes(drop=drop, count=1)
    assert claim("early", bearer("first"), {"quantity": 1, "presale_code": code.code}).status == 201
    late = bearer("late")

    through_lane = claim("early", late, {"quantity": 1, "presale_code": code.code}, key="a")
    EDGE.lane, lane = None, EDGE.lane
    try:
        through_django = claim("early", late, {"quantity": 1, "presale_code": code.code}, key="b")
    finally:
        EDGE.lane = lane

    assert (through_lane.status, through_lane.json()["error"]) == (409, "code_used")
    assert (through_lane.status, through_lane.json()) == (through_django.status, through_django.json())
    assert Hold.objects.filter(drop=drop).count() == 1


def test_after_the_start_the_lane_sells_to_anyone_and_a_bad_code_is_still_refused() -> None:
    now = timezone.now()
    make_drop(
        slug="open",
        quantity=5,
        starts_at=now - timedelta(minutes=1),
        presale_starts_at=now - timedelta(hours=1),
    )

    reply = claim("open", bearer("anyone"), {"quantity": 1})
    garbage = claim("open", bearer("typo"), {"quantity": 1, "presale_code": {"no": "code"}})

    assert reply.status == 201 and reply.headers.get("x-floodgate-lane") == "hit", reply.body
    assert (garbage.status, garbage.json()["error"]) == (403, "invalid_code")


def test_the_drop_page_offers_the_presale_form_and_a_code_posted_without_javascript_reserves() -> None:
    import re

    from django.test import Client

    from tests.factories import make_buyer

    drop = presale_drop()
    (code,) = presale.generate_codes(drop=drop, count=1)
    client = Client()
    client.force_login(make_buyer("formfan"))
    visitor = Client().get("/drops/early/").content.decode()
    page = client.get("/drops/early/").content.decode()
    matched = re.search(r'name="idempotency_key" value="(\w+)"', page)
    assert matched
    key = matched.group(1)

    wrong = client.post(
        "/drops/early/buy", {"quantity": "1", "idempotency_key": key, "presale_code": "WRONG"}
    )
    after = client.get(wrong["Location"]).content.decode()
    bought = client.post(
        "/drops/early/buy", {"quantity": "1", "idempotency_key": key, "presale_code": code.code}
    )

    assert 'id="presale-code"' in page and "Presale is on" in page
    assert "Log in to use a presale code" in visitor
    assert "not valid for this drop" in after
    hold = Hold.objects.get(drop=drop)
    assert bought["Location"] == f"/holds/{hold.pk}/" and hold.presale_code_id == code.pk


def test_the_drop_page_before_a_presale_shows_no_presale_form() -> None:
    from django.test import Client

    now = timezone.now()
    make_drop(slug="soon", starts_at=now + timedelta(hours=2), presale_starts_at=now + timedelta(hours=1))

    assert 'id="presale-code"' not in Client().get("/drops/soon/").content.decode()
