from __future__ import annotations

import json
from io import StringIO

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import CommandError, call_command
from django.test import Client

pytestmark = pytest.mark.django_db


def test_create_buyers_prints_one_json_line_per_buyer_with_working_credentials() -> None:
    out = StringIO()
    call_command("create_buyers", "--count", "500", "--prefix", "load", stdout=out)

    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(lines) == 500
    assert len({line["username"] for line in lines}) == 500
    assert get_user_model().objects.filter(username__startswith="load-").count() == 500
    first, last = lines[0], lines[-1]
    assert authenticate(username=last["username"], password=last["password"]) is not None
    answer = Client().get("/api/me", HTTP_AUTHORIZATION=f"Bearer {first['token']}")
    assert answer.status_code == 200
    assert answer.json() == {"username": first["username"]}


def test_create_buyers_refuses_a_count_below_one() -> None:
    with pytest.raises(CommandError, match="at least 1"):
        call_command("create_buyers", "--count", "0", stdout=StringIO())
    assert get_user_model().objects.count() == 0


@pytest.mark.parametrize(
    "header", ["Bearer nonsense", "Bearer ", "Basic dXNlcjpwYXNz", "Token abc", "Bearer " + "x" * 5000]
)
def test_api_refuses_bad_bearer_tokens(header: str) -> None:
    answer = Client().get("/api/me", HTTP_AUTHORIZATION=header)

    assert answer.status_code == 401
    assert answer.json()["error"] == "unauthenticated"


def test_api_without_credentials_is_unauthenticated() -> None:
    answer = Client().get("/api/me")

    assert answer.status_code == 401
    assert "Bearer" in answer.json()["detail"]
