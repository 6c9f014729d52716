"""The queue API and the reserve path's admission check: contract codes, garbage, tokens."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import Any

import pytest
from django.core import signing
from django.test import Client, override_settings
from django.utils import timezone

from admission import services, tokens
from admission.models import Ticket
from holds.models import Hold
from shop.models import ApiToken
from tests.factories import make_buyer, make_drop

pytestmark = pytest.mark.django_db


def bearer(username: str) -> tuple[dict[str, Any], int]:  # the test client's WSGI extras (typed Any)
    user = make_buyer(username)
    ApiToken.objects.create(user=user, digest=ApiToken.digest_of(f"token-{username}"))
    return {"HTTP_AUTHORIZATION": f"Bearer token-{username}"}, user.pk


def reserve(slug: str, auth: dict[str, str], token: str | None, key: str = "k1"):
    headers: dict[str, Any] = {**auth, "HTTP_IDEMPOTENCY_KEY": key}
    if token is not None:
        headers["HTTP_X_ADMISSION_TOKEN"] = token
    return Client().post(
        f"/api/drops/{slug}/holds",
        data=json.dumps({"quantity": 1}),
        content_type="application/json",
        **headers,
    )


@pytest.fixture
def admitted():
    """A live waiting-room drop, one admitted buyer and one still waiting."""
    drop = make_drop(slug="room", quantity=1, waiting_room=True, admission_percent=100)
    services.run_wave(drop)
    first, first_id = bearer("first")
    second, second_id = bearer("second")
    Client().post("/api/drops/room/queue", **first)
    Client().post("/api/drops/room/queue", **second)
    services.run_wave(drop, force=True)  # one unit: admits ticket 1
    place = Client().get("/api/drops/room/queue", **first).json()
    assert place["admitted"] is True
    return drop, (first, first_id, place["admission_token"]), (second, second_id)


def test_admitted_buyer_reserves_with_the_token(admitted) -> None:
    _, (auth, _, token), _ = admitted
    response = reserve("room", auth, token)
    assert response.status_code == 201, response.json()


@pytest.mark.parametrize("case", ["missing", "forged", "tampered", "other_buyer", "other_drop", "expired"])
def test_reserve_without_a_valid_admission_is_403_and_changes_nothing(admitted, case: str) -> None:
    drop, (_, _, token), (second_auth, second_id) = admitted
    auth = second_auth
    if case == "missing":
        sent = None
    elif case == "forged":
        sent = "eyJkIjoxfQ:1tXyZ:forgedsignature"
    elif case == "tampered":  # a valid token's claims edited to another buyer
        sent = token.replace(
            token.split(":")[0],
            signing.b64_encode(json.dumps({"d": drop.pk, "b": second_id, "t": 1}).encode()).decode(),
        )
    elif case == "other_buyer":
        sent = token  # the first buyer's genuine token, sent by the second
    elif case == "other_drop":
        other = make_drop(slug="elsewhere", quantity=1, waiting_room=True)
        sent = tokens.issue(drop_id=other.pk, buyer_id=second_id, ticket=1)
    else:
        sent = tokens.issue(drop_id=drop.pk, buyer_id=second_id, ticket=2)  # genuine but stale
    with override_settings(ADMISSION_TOKEN_SECONDS=1 if case == "expired" else 120):
        if case == "expired":
            time.sleep(2.1)
        response = reserve("room", auth, sent)
    assert response.status_code == 403
    assert response.json()["error"] == "not_admitted"
    assert response.json()["detail"]
    if case == "expired":
        assert "expired" in response.json()["detail"]
    assert Hold.objects.filter(drop=drop).count() == 0


def test_queue_api_garbage_and_contract_codes() -> None:
    plain = make_drop(slug="plain", quantity=3)
    ended = make_drop(
        slug="over",
        quantity=3,
        waiting_room=True,
        starts_at=timezone.now() - timedelta(hours=3),
        ends_at=timezone.now() - timedelta(hours=1),
    )
    make_drop(slug="room2", quantity=3, waiting_room=True)
    auth, _ = bearer("g")
    client = Client()

    assert client.post("/api/drops/room2/queue").status_code == 401
    assert client.post("/api/drops/nope/queue", **auth).json()["error"] == "not_found"
    assert client.post("/api/drops/plain/queue", **auth).json()["error"] == "no_waiting_room"
    assert client.post("/api/drops/over/queue", **auth).status_code == 410
    assert client.get("/api/drops/room2/queue", **auth).json()["error"] == "not_in_queue"
    assert client.put("/api/drops/room2/queue", **auth).status_code == 405
    assert (
        client.post(
            "/api/drops/room2/queue", data="{garbage", content_type="application/json", **auth
        ).status_code
        == 200
    )
    assert client.get("/api/drops/plain/queue/draw").status_code == 409
    assert client.get("/api/drops/%00/queue").status_code == 404
    assert Ticket.objects.filter(drop__in=[plain, ended]).count() == 0
    assert Ticket.objects.count() == 1  # the one good join (the garbage body is ignored: a join has none)
