from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.http import Http404
from django.test import Client
from django.urls import URLResolver
from django.utils import timezone

from catalogue import selectors
from tests.factories import make_drop

pytestmark = pytest.mark.django_db


def test_drop_detail_answers_the_contract_fields() -> None:
    drop = make_drop(slug="live-drop", quantity=40, buckets=4)

    body = Client().get("/api/drops/live-drop").json()

    assert {k: body[k] for k in ("slug", "state", "quantity", "remaining", "waiting_room")} == {
        "slug": "live-drop",
        "state": "live",
        "quantity": 40,
        "remaining": 40,
        "waiting_room": False,
    }
    assert body["title"] == drop.display_title
    assert body["starts_at"] == drop.starts_at.isoformat()
    assert body["ends_at"] == drop.ends_at.isoformat()


@pytest.mark.parametrize(
    ("start_offset", "state"), [(timedelta(hours=1), "scheduled"), (timedelta(hours=-3), "ended")]
)
def test_drop_state_follows_the_clock(start_offset: timedelta, state: str) -> None:
    starts = timezone.now() + start_offset
    make_drop(slug="timed", starts_at=starts, ends_at=starts + timedelta(hours=1))

    assert Client().get("/api/drops/timed").json()["state"] == state


@pytest.mark.parametrize(
    "path", ["/api/drops/no-such-drop", "/api/drops/%00%ff", "/api/drops/" + "a" * 500, "/api/nothing"]
)
def test_unknown_things_are_json_404(path: str) -> None:
    answer = Client().get(path)

    assert answer.status_code == 404
    assert answer.json()["error"] == "not_found"


def test_wrong_method_is_405_with_allow() -> None:
    make_drop(slug="m")

    answer = Client().post("/api/drops/m", data="{}", content_type="application/json")

    assert answer.status_code == 405
    assert answer["Allow"] == "GET, HEAD"


def test_openapi_schema_describes_every_contract_path() -> None:
    schema = Client().get("/api/openapi.json").json()

    assert schema["openapi"].startswith("3.")
    assert "/api/drops/{slug}" in schema["paths"]
    for path in schema["paths"].values():
        for operation in path.values():
            assert operation["responses"], operation
    assert schema["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"


def test_every_api_route_is_in_the_schema() -> None:
    from django.urls import get_resolver

    schema_paths = set(Client().get("/api/openapi.json").json()["paths"])
    api = next(p for p in get_resolver().url_patterns if str(p.pattern) == "api/")
    assert isinstance(api, URLResolver)  # api/ includes the API's own patterns
    routes = {
        "/api/"
        + str(p.pattern)
        .replace("<slug:slug>", "{slug}")
        .replace("<id>", "{id}")
        .replace("<entry>", "{entry}")
        for p in api.url_patterns
        if str(p.pattern) not in {"", "openapi.json"}
    }

    assert routes <= schema_paths, routes - schema_paths


def test_the_drop_list_names_every_drop_as_its_own_page_does_live_first() -> None:
    now = timezone.now()
    make_drop(slug="list-ended", starts_at=now - timedelta(hours=3), ends_at=now - timedelta(hours=2))
    make_drop(slug="list-later", starts_at=now + timedelta(hours=1), ends_at=now + timedelta(hours=2))
    make_drop(slug="list-live", quantity=7)
    client = Client()

    listed = client.get("/api/drops")
    refused = client.post("/api/drops", data="garbage", content_type="application/json")

    assert listed.status_code == 200 and listed["Content-Type"] == "application/json"
    drops = listed.json()["drops"]
    assert [d["slug"] for d in drops] == ["list-live", "list-later", "list-ended"]
    assert drops == [client.get(f"/api/drops/{d['slug']}").json() for d in drops]
    assert refused.status_code == 405 and refused.json()["error"] == "method_not_allowed"
    assert client.get("/api/").json()["catalogue"] == "/api/drops"


def test_a_django_404_inside_a_call_is_the_contracts_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(**_: object) -> None:
        raise Http404("gone")

    monkeypatch.setattr(selectors, "drop_view", missing)

    answer = Client().get("/api/drops/anything")

    assert answer.status_code == 404 and answer.json()["error"] == "not_found"


def test_an_unexpected_error_inside_a_call_is_djangos_500_not_a_text_traceback(
    monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    def broken(**_: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(selectors, "drop_view", broken)
    settings.DEBUG = True  # where ninja, left to itself, would answer the traceback as text/plain

    with pytest.raises(RuntimeError, match="a bug"):  # the test client re-raises what reached Django
        Client().get("/api/drops/anything")
