"""The published schema, generated from the answer models, and the check that holds answers to it."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import models
from django.test import Client
from jsonschema import Draft202012Validator

import admission.api
import catalogue.answers
import catalogue.api
import checkout.api
import config.api
import config.schemas
import fairness.api
import ops.answers
import ops.api
import sale.api
import shop.models
from admission.answers import OfferState, QueueState, RaffleResult
from checkout.models import OrderState, PaymentState, RefundState
from config.api import schema
from holds.models import HoldState
from shop.models import ApiToken, DropFormat, DropState
from tests.api_schema import ApiSchema, SchemaMismatch
from tests.factories import make_buyer, make_drop

pytestmark = pytest.mark.django_db


def bearer(username: str) -> dict[str, Any]:  # the test client's WSGI extras (typed Any)
    user = make_buyer(username)
    ApiToken.objects.create(user=user, digest=ApiToken.digest_of(f"token-{username}"))
    return {"HTTP_AUTHORIZATION": f"Bearer token-{username}"}


def reserve(slug: str, auth: dict[str, Any]) -> Any:
    return Client().post(
        f"/api/drops/{slug}/holds",
        data=json.dumps({"quantity": 1}),
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY="k1",
        **auth,
    )


def answer_of(response: Any) -> dict[str, Any]:
    request = response.wsgi_request
    return {
        "method": request.method,
        "path": request.path_info,
        "status": response.status_code,
        "content_type": response["Content-Type"],
        "body": response.content,
    }


def test_the_schema_is_served_as_published() -> None:
    answer = Client().get("/api/openapi.json")

    assert answer.status_code == 200
    assert answer.json() == schema()


def response_schemas(doc: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    yield from ((f"components/{name}", s) for name, s in doc["components"]["schemas"].items())
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            for status, response in operation["responses"].items():
                for media in response.get("content", {}).values():
                    yield f"{method} {path} {status}", media["schema"]


def objects_in(node: object) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if node.get("type") == "object" and "properties" in node:  # not an `if` clause's test
            yield node
        for value in node.values():
            yield from objects_in(value)
    elif isinstance(node, list):
        for value in node:
            yield from objects_in(value)


def test_every_answer_schema_is_valid_and_closed() -> None:
    doc = schema()

    for where, answer in response_schemas(doc):
        Draft202012Validator.check_schema(answer)
        for obj in objects_in(answer):
            # Closed objects: a field the views add or drop shows up as a failing test.
            assert obj.get("additionalProperties") is False, where
            assert set(obj["required"]) <= set(obj["properties"]), where


def test_every_operation_lists_what_every_api_view_may_answer() -> None:
    # core.api.operation lists a bad bearer token (401) and a busy database (503) on every call.
    for path, item in schema()["paths"].items():
        for method, operation in item.items():
            assert {"401", "503"} <= set(operation["responses"]), f"{method} {path}"


def test_every_state_in_the_schema_is_a_models_choices() -> None:
    enums = {name: s["enum"] for name, s in schema()["components"]["schemas"].items() if "enum" in s}

    assert enums == {
        choices.__name__: choices.values
        for choices in (
            DropState,
            HoldState,
            OrderState,
            PaymentState,
            RefundState,
            QueueState,
            OfferState,
            DropFormat,
            RaffleResult,
        )
    }


def test_a_state_added_to_the_models_choices_is_in_the_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    choices: Any = models.TextChoices  # Enum's functional API, which django-stubs does not declare
    archived = choices(
        "DropState", [*((state.name, state.value) for state in DropState), ("ARCHIVED", "archived")]
    )
    monkeypatch.setattr(shop.models, "DropState", archived)
    naming = (catalogue.answers, ops.answers, config.schemas)  # the answers that name DropState
    # and the calls that declare them, each package's router and the API that gathers them
    declaring = (catalogue.api, sale.api, admission.api, checkout.api, fairness.api, ops.api)
    try:
        for module in (*naming, *declaring):
            importlib.reload(module)
        doc = importlib.reload(config.api).schema()
    finally:
        monkeypatch.undo()
        for module in (*naming, *declaring):
            importlib.reload(module)
        importlib.reload(config.api)

    assert doc["components"]["schemas"]["DropState"]["enum"] == [*DropState.values, "archived"]
    assert "archived" not in config.api.schema()["components"]["schemas"]["DropState"]["enum"]


def test_a_field_the_answer_model_does_not_list_fails_the_check() -> None:
    make_drop(slug="extra")
    created = answer_of(reserve("extra", bearer("extra")))
    published = ApiSchema(schema())
    published.check(**created)

    body = {**json.loads(created["body"]), "gift_wrap": True}
    with pytest.raises(SchemaMismatch, match="gift_wrap"):
        published.check(**{**created, "body": json.dumps(body).encode()})


def drifted(change: str) -> ApiSchema:
    doc = schema()
    hold = doc["components"]["schemas"]["Hold"]
    if change == "a new required property":
        hold["required"].append("gift_wrap")
        hold["properties"]["gift_wrap"] = {"type": "boolean"}
    elif change == "a property dropped":
        del hold["properties"]["extended"]
        hold["required"].remove("extended")
    elif change == "a type changed":
        hold["properties"]["quantity"] = {"type": "string"}
    elif change == "a status missing":
        del doc["paths"]["/api/drops/{slug}/holds"]["post"]["responses"]["201"]
    return ApiSchema(doc)


@pytest.mark.parametrize(
    "change", ["a new required property", "a property dropped", "a type changed", "a status missing"]
)
def test_a_drifted_schema_fails_the_real_answer(change: str) -> None:
    make_drop(slug="drift")
    created = reserve("drift", bearer("drifter"))
    assert created.status_code == 201

    ApiSchema(schema()).check(**answer_of(created))  # the published schema describes it
    with pytest.raises(SchemaMismatch):
        drifted(change).check(**answer_of(created))


def test_the_suite_checks_every_client_answer(api_answers_match_schema: list[ApiSchema]) -> None:
    make_drop(slug="checked")
    published = api_answers_match_schema[0]
    before = published.checked

    Client().get("/api/drops/checked")

    assert published.checked == before + 1
    api_answers_match_schema[0] = drifted("a type changed")
    with pytest.raises(SchemaMismatch, match="quantity"):
        reserve("checked", bearer("checker"))


def test_other_paths_and_methods_answer_errors_the_schema_names() -> None:
    make_drop(slug="fallback")
    published = ApiSchema(schema())

    unknown = Client().get("/api/no/such/thing")
    wrong_method = Client().put("/api/drops/fallback")

    assert unknown.status_code == 404 and wrong_method.status_code == 405
    assert wrong_method.json()["error"] == "method_not_allowed"
    with pytest.raises(SchemaMismatch, match="no such operation"):
        published.check(**{**answer_of(unknown), "status": 200})
    with pytest.raises(SchemaMismatch, match="application/json"):
        published.check(**{**answer_of(Client().get("/api/drops/fallback")), "content_type": "text/html"})


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path", ["/api/nothing-here", "/api/drops/a%0Ab", "/api/drops/x%0A/queue/draw", "/api/nothing%0A/here"]
)
def test_any_other_path_under_the_api_is_a_json_404_even_with_a_newline(path: str) -> None:
    answer = Client().get(path)

    assert answer.status_code == 404 and answer["Content-Type"] == "application/json"
    assert answer.json()["error"] == "not_found"
