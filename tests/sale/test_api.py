"""The holds API: contract status codes, garbage in, nothing changed."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from holds.counts import invariant
from holds.models import Hold
from shop.models import ApiToken, Drop
from tests.factories import make_buyer, make_drop

pytestmark = pytest.mark.django_db


def bearer(username: str) -> dict[str, Any]:  # the test client's WSGI extras (typed Any)
    user = make_buyer(username)
    ApiToken.objects.create(user=user, digest=ApiToken.digest_of(f"token-{username}"))
    return {"HTTP_AUTHORIZATION": f"Bearer token-{username}"}


def post_hold(slug: str, auth: dict[str, str], body: object, key: str | None = "k1", raw: str | None = None):
    headers: dict[str, Any] = dict(auth)
    if key is not None:
        headers["HTTP_IDEMPOTENCY_KEY"] = key
    data = raw if raw is not None else json.dumps(body)
    return Client().post(f"/api/drops/{slug}/holds", data=data, content_type="application/json", **headers)


def test_reserve_then_same_key_then_get_then_release() -> None:
    drop = make_drop(slug="api-drop", quantity=10, buckets=2, per_buyer_limit=2)
    auth = bearer("alice")

    created = post_hold("api-drop", auth, {"quantity": 2})
    again = post_hold("api-drop", auth, {"quantity": 2})
    seen = Client().get(f"/api/holds/{created.json()['id']}", **auth)
    released = Client().delete(f"/api/holds/{created.json()['id']}", **auth)
    released_again = Client().delete(f"/api/holds/{created.json()['id']}", **auth)

    assert created.status_code == 201
    assert set(created.json()) >= {"id", "state", "quantity", "expires_at"}
    assert created.json()["state"] == "held" and created.json()["quantity"] == 2
    assert again.status_code == 200 and again.json()["id"] == created.json()["id"]
    assert seen.status_code == 200 and seen.json()["order"] is None
    assert released.json()["state"] == "released" and released_again.json()["state"] == "released"
    assert invariant(drop_id=drop.pk).available == 10


@pytest.mark.parametrize(
    ("body", "raw", "status", "code"),
    [
        ({"quantity": 0}, None, 422, "invalid_quantity"),
        ({"quantity": -1}, None, 422, "invalid_quantity"),
        ({"quantity": 10**9}, None, 422, "limit_reached"),
        ({"quantity": "abc"}, None, 422, "invalid_quantity"),
        ({"quantity": 1.5}, None, 422, "invalid_quantity"),
        ({"quantity": True}, None, 422, "invalid_quantity"),
        ({}, None, 422, "invalid_quantity"),
        (None, "{not json", 422, "invalid"),
        (None, "[1, 2]", 422, "invalid"),
        ({"quantity": 1, "unit": "A1"}, None, 422, "invalid"),
    ],
)
def test_garbage_bodies_are_clear_4xx_and_change_nothing(
    body: object, raw: str | None, status: int, code: str
) -> None:
    drop = make_drop(slug="strict", quantity=10, per_buyer_limit=2)

    answer = post_hold("strict", bearer("bob"), body, raw=raw)

    assert answer.status_code == status, answer.content
    assert answer.json()["error"] == code
    assert answer.json()["detail"]
    assert not Hold.objects.exists()
    assert invariant(drop_id=drop.pk).available == 10


@pytest.mark.parametrize(
    "raw",
    [
        '{"quantity": 1, "unit": "A\\u0000"}',  # NUL: PostgreSQL text refuses it
        '{"quantity": 1, "unit": "A\\ud800"}',  # a lone surrogate: not encodable as UTF-8
        '{"quantity": 1, "unit": "' + "A" * 41 + '"}',  # longer than any label
    ],
)
def test_a_unit_label_postgresql_cannot_compare_is_422_not_500(raw: str) -> None:
    drop = make_drop(slug="seats", quantity=3, mode="units", unit_labels=["A1", "A2", "A3"])

    answer = post_hold("seats", bearer("nul"), None, raw=raw)

    assert answer.status_code == 422, answer.content
    assert answer.json()["error"] == "invalid" and answer.json()["detail"]
    assert not Hold.objects.exists()
    assert invariant(drop_id=drop.pk).available == 3


def test_an_idempotency_key_again_with_another_request_is_422_and_keeps_the_first_hold() -> None:
    drop = make_drop(slug="reuse", quantity=10, mode="units", per_buyer_limit=3)
    auth = bearer("rita")
    created = post_hold("reuse", auth, {"quantity": 1})

    more = post_hold("reuse", auth, {"quantity": 2})
    seat = post_hold("reuse", auth, {"quantity": 1, "unit": "5"})
    same = post_hold("reuse", auth, None, raw='{ "quantity" : 1 }')  # other bytes, the same request

    assert created.status_code == 201
    assert (more.status_code, more.json()["error"]) == (422, "idempotency_key_reused"), more.content
    assert (seat.status_code, seat.json()["error"]) == (422, "idempotency_key_reused")
    assert same.status_code == 200 and same.json()["id"] == created.json()["id"]
    assert Hold.objects.get().quantity == 1
    assert invariant(drop_id=drop.pk).held == 1


@pytest.mark.parametrize("key", [None, "", "x" * 65, "spaces are bad", "ünïcode"])
def test_missing_or_bad_idempotency_key_is_400(key: str | None) -> None:
    make_drop(slug="keys", quantity=5)

    answer = post_hold("keys", bearer("carl"), {"quantity": 1}, key=key)

    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_idempotency_key"
    assert not Hold.objects.exists()


def test_someone_elses_hold_is_404_and_stays_held() -> None:
    make_drop(slug="mine", quantity=5)
    created = post_hold("mine", bearer("dora"), {"quantity": 1}).json()
    eve = bearer("eve")

    looked = Client().get(f"/api/holds/{created['id']}", **eve)
    deleted = Client().delete(f"/api/holds/{created['id']}", **eve)

    assert looked.status_code == deleted.status_code == 404
    assert looked.json()["error"] == "not_found"
    assert Hold.objects.get(pk=created["id"]).state == "held"
    assert Client().get("/api/holds/not-a-number", **eve).status_code == 404


def test_sold_out_paused_not_started_ended_answers() -> None:
    now = timezone.now()
    make_drop(slug="tiny", quantity=1)
    make_drop(slug="later", starts_at=now + timedelta(hours=1))
    make_drop(slug="over", starts_at=now - timedelta(hours=2), ends_at=now - timedelta(hours=1))
    paused = make_drop(slug="frozen")
    Drop.objects.filter(pk=paused.pk).update(paused=True)
    post_hold("tiny", bearer("first"), {"quantity": 1})

    answers = {
        slug: post_hold(slug, bearer(f"b-{slug}"), {"quantity": 1})
        for slug in ["tiny", "later", "over", "frozen"]
    }

    assert {slug: (a.status_code, a.json()["error"]) for slug, a in answers.items()} == {
        "tiny": (409, "sold_out"),
        "later": (425, "not_started"),
        "over": (410, "ended"),
        "frozen": (423, "paused"),
    }


def test_a_second_hold_while_one_is_active_is_refused_with_its_id() -> None:
    make_drop(slug="one-each", quantity=5, per_buyer_limit=2)
    auth = bearer("fay")
    first = post_hold("one-each", auth, {"quantity": 1}, key="a").json()

    second = post_hold("one-each", auth, {"quantity": 1}, key="b")

    assert second.status_code == 409
    assert second.json() | {"detail": ""} == {"error": "hold_exists", "detail": "", "hold": first["id"]}


def test_limit_counts_what_was_already_bought() -> None:
    drop = make_drop(slug="limited", quantity=5, per_buyer_limit=2)
    auth = bearer("gus")
    first = post_hold("limited", auth, {"quantity": 2}, key="a").json()
    Hold.objects.filter(pk=first["id"]).update(state="sold", ended_at=timezone.now())

    again = post_hold("limited", auth, {"quantity": 1}, key="b")

    assert again.status_code == 422 and again.json()["error"] == "limit_reached"
    assert Hold.objects.filter(drop=drop).count() == 1


def test_unauthenticated_and_unknown_drop() -> None:
    make_drop(slug="open")

    anonymous = Client().post(
        "/api/drops/open/holds", data="{}", content_type="application/json", HTTP_IDEMPOTENCY_KEY="k"
    )
    unknown = post_hold("nope", bearer("hal"), {"quantity": 1})

    assert anonymous.status_code == 401 and anonymous.json()["error"] == "unauthenticated"
    assert unknown.status_code == 404 and unknown.json()["error"] == "not_found"


def test_session_buyer_needs_csrf_on_the_api() -> None:
    make_drop(slug="csrf")
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_buyer("ivy"))

    answer = client.post(
        "/api/drops/csrf/holds",
        data='{"quantity": 1}',
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY="k",
    )

    assert answer.status_code == 403 and answer.json()["error"] == "csrf_failed"
    assert not Hold.objects.exists()
