"""HTTP answers around the views: oversized bodies, HEAD, TRACE (Django's test client, real PostgreSQL)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from checkout.models import WebhookEvent
from holds.models import Hold
from shop.models import ApiToken
from tests.factories import make_buyer, make_drop

pytestmark = pytest.mark.django_db

HUGE = 3 * 1024 * 1024  # past Django's DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB)


def bearer(username: str) -> dict[str, Any]:  # the test client's WSGI extras (typed Any)
    user = make_buyer(username)
    ApiToken.objects.create(user=user, digest=ApiToken.digest_of(f"token-{username}"))
    return {"HTTP_AUTHORIZATION": f"Bearer token-{username}"}


@pytest.mark.parametrize("size", [20 * 1024, HUGE], ids=["past the API's 16 KB", "past Django's 2.5 MB"])
def test_an_oversized_api_body_is_a_json_413_and_holds_nothing(size: int) -> None:
    make_drop(slug="big", quantity=5)
    body = json.dumps({"quantity": 1, "pad": "x" * size})

    answer = Client().post(
        "/api/drops/big/holds",
        data=body,
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY="k",
        **bearer("big"),
    )

    assert answer.status_code == 413, answer.content[:200]
    assert answer["Content-Type"] == "application/json"
    assert answer.json()["error"] == "too_large" and answer.json()["detail"]
    assert not Hold.objects.exists()


def test_an_oversized_webhook_is_a_json_400_and_records_nothing() -> None:
    answer = Client().post(
        "/checkout/webhooks/simulated", data=b"{" + b" " * HUGE + b"}", content_type="application/json"
    )

    assert answer.status_code == 400 and answer.json()["error"] == "bad_webhook"
    assert not WebhookEvent.objects.exists()


def test_head_on_the_json_gets_answers_as_get_without_a_body() -> None:
    drop = make_drop(slug="heads", quantity=5)
    auth = bearer("head")
    hold = (
        Client()
        .post(
            "/api/drops/heads/holds",
            data={"quantity": 1},
            content_type="application/json",
            HTTP_IDEMPOTENCY_KEY="k",
            **auth,
        )
        .json()["id"]
    )

    for path in [
        "/api/",
        "/api/openapi.json",
        "/api/me",
        f"/api/drops/{drop.slug}",
        f"/api/holds/{hold}",
        "/api/orders",
    ]:
        got, head = Client().get(path, **auth), Client().head(path, **auth)
        assert head.status_code == got.status_code == 200, (path, head.status_code)
        assert head.content == b"" and head["Content-Type"] == got["Content-Type"] == "application/json", path


@pytest.mark.parametrize("path", ["/", "/drops/traced/", "/healthz", "/accounts/login/", "/api/drops/traced"])
@pytest.mark.parametrize("method", ["TRACE", "TRACK"])
def test_trace_is_refused_everywhere(method: str, path: str) -> None:
    make_drop(slug="traced", quantity=5)

    answer = Client().generic(method, path)

    assert answer.status_code == 405, (method, path, answer.status_code)
    assert "TRACE" not in answer["Allow"]
