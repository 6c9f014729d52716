"""The sold-out flag: set when the database says the stock is gone, cleared when units come back."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from admission import services, state
from admission.models import Ticket
from holds import services as holds
from shop.models import ApiToken
from tests.factories import drop_permission, make_buyer, make_drop

pytestmark = pytest.mark.django_db


def bearer(username: str) -> dict[str, Any]:  # the test client's WSGI extras (typed Any)
    user = make_buyer(username)
    ApiToken.objects.create(user=user, digest=ApiToken.digest_of(f"token-{username}"))
    return {"HTTP_AUTHORIZATION": f"Bearer token-{username}", "HTTP_IDEMPOTENCY_KEY": "k"}


def reserve(auth: dict[str, Any]):
    return Client().post(
        "/api/drops/last-one/holds", data=json.dumps({"quantity": 1}), content_type="application/json", **auth
    )


def published(slug: str) -> dict[str, Any]:
    """The drop's snapshot in Redis; it must be there."""
    snapshot = state.cached(slug)
    assert snapshot is not None, f"no snapshot of {slug} published"
    return snapshot


def test_the_flag_is_set_by_a_sold_out_answer_and_cleared_when_the_unit_comes_back() -> None:
    drop = make_drop(slug="last-one", quantity=1)
    services.tick()
    assert published("last-one")["drop"]["sold_out"] is False

    first, second = bearer("first"), bearer("second")
    hold = reserve(first).json()
    assert reserve(second).json()["error"] == "sold_out"

    flagged = published("last-one")  # published by the sold-out answer, before any tick
    assert flagged["drop"]["sold_out"] is True and flagged["drop"]["remaining"] == 0

    Client().delete(f"/api/holds/{hold['id']}", **first)
    assert published("last-one")["drop"]["sold_out"] is True  # until the next tick reads the database
    services.tick()

    cleared = published("last-one")
    assert cleared["drop"]["sold_out"] is False and cleared["drop"]["remaining"] == 1
    assert reserve(second).status_code == 201
    assert drop.pk == cleared["drop_id"]


def test_metrics_show_each_waiting_rooms_mark_and_line(make_buyers) -> None:
    from django.contrib.auth import get_user_model

    drop = make_drop(slug="gauged", quantity=2, waiting_room=True, admission_percent=100)
    make_drop(slug="no-room", quantity=2)
    services.run_wave(drop)
    for buyer in make_buyers(5, prefix="gauged"):
        services.join(drop=drop, buyer_id=buyer)
    services.run_wave(drop, force=True)
    first = Ticket.objects.get(drop=drop, number=1).buyer_id
    held = holds.reserve(drop=drop, buyer_id=first, quantity=1, idempotency_key="k").hold
    holds.release(hold_id=held.pk, buyer_id=first)  # back to the line, not yet offered
    staff = get_user_model().objects.create_user("ops", password="x", is_staff=True)
    staff.user_permissions.add(drop_permission("view_drop"))  # who may watch
    client = Client()
    client.force_login(staff)

    lines = client.get("/metrics").content.decode().splitlines()

    assert 'floodgate_queue_admitted_through{drop="gauged"} 2.0' in lines
    assert 'floodgate_queue_waiting{drop="gauged"} 3.0' in lines
    assert 'floodgate_queue_returning_units{drop="gauged"} 1.0' in lines
    assert not [line for line in lines if 'drop="no-room"' in line and "floodgate_queue_" in line]
