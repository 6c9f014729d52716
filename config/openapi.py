"""The OpenAPI 3.1 description of `/api/`, served at `/api/openapi.json`, generated.

Its schemas are the JSON Schema of the answer models in config/schemas.py; its operations come
from the table below (path, method, summary, parameters, and each status's model). The test suite
checks every /api/ answer it sees against this document (tests/api_schema.py), so an answer that
gains, loses or retypes a field, or a status not listed here, fails a test.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter
from pydantic.json_schema import (
    DefsRef,
    GenerateJsonSchema,
    JsonSchemaKeyT,
    JsonSchemaMode,
    JsonSchemaValue,
    models_json_schema,
)
from pydantic_core import CoreSchema

from config import schemas

Schema = dict[str, Any]


class OpenApiJsonSchema(GenerateJsonSchema):
    """JSON Schema as the published document writes it: no titles, no `default: null` for a field
    that may be left out, and `{"type": [t, "null"]}` for a nullable scalar."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def generate(self, schema: CoreSchema, mode: JsonSchemaMode = "validation") -> JsonSchemaValue:
        json_schema = super().generate(schema, mode)
        json_schema.pop("title", None)
        return json_schema

    def generate_definitions(
        self, inputs: Sequence[tuple[JsonSchemaKeyT, JsonSchemaMode, CoreSchema]]
    ) -> tuple[dict[tuple[JsonSchemaKeyT, JsonSchemaMode], JsonSchemaValue], dict[DefsRef, JsonSchemaValue]]:
        keys, definitions = super().generate_definitions(inputs)
        for definition in definitions.values():
            definition.pop("title", None)  # the component's name says it
        return keys, definitions

    def default_schema(self, schema: Any) -> JsonSchemaValue:
        # An answer leaves an Omittable field out rather than sending its default.
        return self.generate_inner(schema["schema"])

    def nullable_schema(self, schema: Any) -> JsonSchemaValue:
        inner = self.generate_inner(schema["schema"])
        if isinstance(inner.get("type"), str):
            return {**inner, "type": [inner["type"], "null"]}
        return super().nullable_schema(schema)


@dataclass(frozen=True)
class Answer:
    description: str
    model: type[BaseModel] | None = schemas.Error  # None: no body (304)
    retry: bool = False  # carries Retry-After


@dataclass(frozen=True)
class Param:
    name: str
    where: Literal["path", "header"] = "path"
    type: Any = str
    required: bool = True
    description: str | None = None


@dataclass(frozen=True)
class Operation:
    summary: str
    answers: dict[int, Answer]
    params: tuple[Param, ...] = ()
    login: bool = False
    unsafe: bool = False  # a write: the CSRF check and the body size limit apply
    body: type[BaseModel] | None = None


def error(description: str) -> Answer:
    return Answer(description)


def busy(description: str) -> Answer:
    return Answer(description, retry=True)


SLUG = Param("slug")
ID = Param("id", type=int)
QUEUE_ERRORS = {
    404: error("No such drop (or, for GET, not in its queue: not_in_queue)"),
    409: error(
        "no_waiting_room; sold_out (POST, a new buyer: sold out with none held, the line is closed); "
        "room_not_open (POST, a drop asking proof of work, earlier than opens_at); "
        "entries_closed (POST, a new entry to a raffle after its entries closed at closed_at)"
    ),
    410: error("ended: the queue is closed"),
}

OPERATIONS: dict[str, dict[str, Operation]] = {
    "/api/": {"get": Operation("Where to start", {200: Answer("Links", schemas.Links)})},
    "/api/openapi.json": {"get": Operation("This document", {200: Answer("OpenAPI 3.1", schemas.Document)})},
    "/api/me": {
        "get": Operation("Who the credentials belong to", {200: Answer("The user", schemas.Me)}, login=True)
    },
    "/api/drops": {
        "get": Operation(
            "Every drop: live, upcoming, sold out, then ended (most recent first); HEAD too",
            {200: Answer("The drops", schemas.DropList)},
        )
    },
    "/api/drops/{slug}": {
        "get": Operation(
            "A drop and how much of it is left (HEAD too)",
            {200: Answer("The drop", schemas.Drop), 404: error("No such drop")},
            (SLUG,),
        )
    },
    "/api/drops/{slug}/holds": {
        "post": Operation(
            "Reserve units: they are yours until expires_at",
            {
                201: Answer("Reserved", schemas.Hold),
                200: Answer("The same Idempotency-Key again: the hold it made", schemas.Hold),
                400: error("invalid_idempotency_key: missing or malformed Idempotency-Key"),
                403: error(
                    "not_admitted (waiting-room drops), invalid_code (no such presale code for this drop, "
                    "or not a code), or csrf_failed"
                ),
                404: error("No such drop"),
                409: error(
                    "sold_out (with remaining), unit_taken, hold_exists (with hold), code_used (the "
                    "presale code has admitted all the claims it may), or discount_code_used"
                ),
                410: error("ended, or discount_code_expired"),
                422: error(
                    "invalid_quantity, limit_reached, invalid (body, unit), idempotency_key_reused "
                    "(the key was used for another quantity, unit or discount code), invalid_discount_code "
                    "or discount_code_not_for_drop (nothing is held)"
                ),
                423: error("paused"),
                425: error(
                    "not_started (in a presale window: no presale code, and the account is not on the "
                    "list), or discount_code_not_started"
                ),
                429: busy("rate_limited; see Retry-After"),
                503: busy("busy: the database, Redis or this process' claim slots; see Retry-After"),
            },
            (
                SLUG,
                Param("Idempotency-Key", "header", Annotated[str, Field(min_length=1, max_length=64)]),
                Param("X-Admission-Token", "header", required=False),
            ),
            login=True,
            unsafe=True,
            body=schemas.ReserveBody,
        )
    },
    "/api/drops/{slug}/queue": {
        "post": Operation(
            "Join the waiting room; joining again returns the same ticket",
            {
                200: Answer("Your place", schemas.Place),
                **QUEUE_ERRORS,
                428: error(
                    "proof_of_work_required: a new place in this drop's line needs a nonce whose "
                    "sha256('<challenge>:<nonce>') starts with `bits` zero bits, sent as X-Join-Proof "
                    "with the challenge as X-Join-Challenge before `expires_at`; a challenge is spent "
                    "by one join, and a refused one comes back with a fresh challenge"
                ),
                429: busy("rate_limited; see Retry-After"),
                503: busy("busy (Redis down or the line is catching up); see Retry-After"),
            },
            (
                SLUG,
                Param(
                    "X-Join-Proof",
                    "header",
                    Annotated[str, Field(pattern="^[0-9a-z]{1,32}$")],
                    required=False,
                    description="The proof of work's nonce, for drops that ask one (see 428)",
                ),
                Param(
                    "X-Join-Challenge",
                    "header",
                    Annotated[str, Field(pattern="^[0-9]{10}[.][0-9a-f]{8}[.][0-9a-f]{16}$")],
                    required=False,
                    description="The challenge the proof solves, as the last 428 gave it",
                ),
            ),
            login=True,
            unsafe=True,
        ),
        "get": Operation(
            "Your place in the waiting room (a fresh admission token once admitted)",
            {200: Answer("Your place", schemas.Place), **QUEUE_ERRORS},
            (
                SLUG,
                Param(
                    "X-Queue-Ticket",
                    "header",
                    required=False,
                    description="The queue_ticket of an earlier answer, sent with the same credential",
                ),
            ),
            login=True,
        ),
    },
    "/api/drops/{slug}/reminder": {
        "post": Operation(
            "Ask to be e-mailed when the drop opens (before its start); asking again keeps one reminder",
            {
                201: Answer("Asked", schemas.DropReminder),
                200: Answer("Asked already: the same reminder", schemas.DropReminder),
                403: error("forbidden: an account made for a rehearsal; or csrf_failed"),
                404: error("No such drop"),
                409: error(
                    "not_scheduled: the drop has started or ended, or its waiting room is open (join it)"
                ),
            },
            (SLUG,),
            login=True,
            unsafe=True,
        ),
        "get": Operation(
            "Whether you asked for a reminder of this drop, and whether it went out",
            {
                200: Answer("Your reminder (reminded false: none)", schemas.DropReminder),
                404: error("No such drop"),
            },
            (SLUG,),
            login=True,
        ),
        "delete": Operation(
            "Forget your reminder if it has not gone out (none to forget: the same answer)",
            {
                200: Answer("Your reminder now (reminded true only if it was sent)", schemas.DropReminder),
                404: error("No such drop"),
            },
            (SLUG,),
            login=True,
            unsafe=True,
        ),
    },
    "/api/push/subscription": {
        "post": Operation(
            "Get a push on this browser when it is your turn (the browser's PushSubscription.toJSON())",
            {
                201: Answer("Subscribed", schemas.PushSubscribed),
                200: Answer(
                    "Subscribed already: the same endpoint, its keys renewed", schemas.PushSubscribed
                ),
                403: error("csrf_failed"),
                404: error("push_off: the shop sends no pushes"),
                422: error("invalid: not a subscription (endpoint, keys.p256dh, keys.auth)"),
            },
            login=True,
            unsafe=True,
            body=schemas.PushSubscriptionBody,
        ),
        "delete": Operation(
            "No more pushes to this browser (an endpoint not yours or unknown: the same answer)",
            {
                200: Answer("Unsubscribed (subscribed false)", schemas.PushSubscribed),
                403: error("csrf_failed"),
                422: error("invalid: no endpoint"),
            },
            login=True,
            unsafe=True,
            body=schemas.PushSubscriptionBody,
        ),
    },
    "/api/drops/{slug}/queue/draw": {
        "get": Operation(
            "Check the draw: the seed's hash before the start; seed and entries after",
            {
                200: Answer(
                    "Sort the entries by sha256('<seed>:<entry>'); the first gets ticket 1 (after the "
                    "draw with ETag and Last-Modified: the record never changes)",
                    schemas.Draw,
                ),
                304: Answer("If-None-Match or If-Modified-Since names the drawn record: unchanged", None),
                404: error("No such drop"),
                409: error("no_waiting_room"),
            },
            (SLUG,),
        )
    },
    "/api/drops/{slug}/report": {
        "get": Operation(
            "The drop's public report, published when it is over: figures and every entry's outcome",
            {
                200: Answer(
                    "The figures, the merchant's note, and the Merkle root over the outcomes",
                    schemas.PublicReport,
                ),
                404: error("No such drop"),
                409: error("report_not_published: the drop is not over, or a buyer still holds a unit"),
                503: busy("busy: the door's counts cannot be read right now"),
            },
            (SLUG,),
        )
    },
    "/api/drops/{slug}/report/entries/{entry}": {
        "get": Operation(
            "One entry's outcome with its inclusion proof: recompute the root and compare",
            {
                200: Answer(
                    "The outcome line, its index, the tree's size, the sibling hashes, the root",
                    schemas.Inclusion,
                ),
                404: error("No such drop, or no such entry in its report"),
                409: error("report_not_published"),
                422: error("invalid: the entry is not a number"),
                503: busy("busy: the door's counts cannot be read right now"),
            },
            (SLUG, Param("entry", description="The entry (the ticket's public id)")),
        )
    },
    "/api/holds/{id}": {
        "get": Operation(
            "One of your holds",
            {200: Answer("The hold", schemas.Hold), 404: error("Not yours or none")},
            (ID,),
            login=True,
        ),
        "delete": Operation(
            "Release a hold; its units go back to stock once",
            {200: Answer("The hold after release", schemas.Hold), 404: error("Not yours or none")},
            (ID,),
            login=True,
            unsafe=True,
        ),
    },
    "/api/holds/{id}/payment": {
        "post": Operation(
            "Start paying a hold: extends it once; send the buyer to redirect_url",
            {
                202: Answer("The payment and its order", schemas.PaymentStarted),
                404: error("Not yours or none"),
                409: error("hold_not_active: expired or released; address_required: the product ships"),
                503: busy("busy, payment_unavailable or payment_opening; see Retry-After"),
            },
            (ID,),
            login=True,
            unsafe=True,
        )
    },
    "/api/holds/{id}/more-time": {
        "post": Operation(
            "I need more time: half the hold's first window more, at most twice, before its payment starts",
            {
                200: Answer("The hold, with its later expires_at", schemas.Hold),
                403: error("csrf_failed"),
                404: error("Not yours or none"),
                409: error(
                    "more_time_used: it had all it may; hold_not_active: ended, or its payment started"
                ),
            },
            (ID,),
            login=True,
            unsafe=True,
        )
    },
    "/api/holds/{id}/variant": {
        "put": Operation(
            "Change a held hold to another variant (size) before its payment starts: its units given back "
            "and as many of the new one taken at once; the time left is unchanged",
            {
                200: Answer("The hold, of the new variant", schemas.Hold),
                404: error("Not yours or none"),
                409: error(
                    "variant_sold_out / sold_out: too few of it (the hold is unchanged); "
                    "hold_not_active: ended, or its payment has started"
                ),
                410: error("ended"),
                422: error("invalid_variant: no such variant (variants lists them)"),
                423: error("paused"),
                503: busy("busy: the units left are being claimed, or the line is mid-wave; see Retry-After"),
            },
            (ID,),
            login=True,
            unsafe=True,
            body=schemas.VariantBody,
        )
    },
    "/api/holds/{id}/address": {
        "put": Operation(
            "Give the shipping address of a held hold whose product ships (kept for your next drop too)",
            {
                200: Answer("The address as kept", schemas.ShippingAddress),
                400: error(
                    "invalid_address, with fields: what is wrong, field by field; not_shipped_there: "
                    "a country outside the product's shipping zones (the detail names those it ships to)"
                ),
                404: error("Not yours or none"),
                409: error(
                    "hold_not_active: expired or released; no_shipping: the product needs no address; "
                    "address_changes_price: payment has started and this address's zone charges another fee"
                ),
            },
            (ID,),
            login=True,
            unsafe=True,
            body=schemas.AddressBody,
        )
    },
    "/api/orders": {
        "get": Operation(
            "Your orders, newest first", {200: Answer("Your orders", schemas.OrderList)}, login=True
        )
    },
    "/api/orders/{id}": {
        "get": Operation(
            "One of your orders",
            {200: Answer("The order", schemas.Order), 404: error("Not yours or none")},
            (ID,),
            login=True,
        )
    },
    "/api/orders/{id}/cancel": {
        "post": Operation(
            "Cancel your order before the money is taken: its units go back on sale, you are not charged",
            {
                200: Answer("The order, cancelled (again: the same answer)", schemas.Order),
                403: error("csrf_failed"),
                404: error("Not yours or none"),
                409: error("not_cancellable: the payment was taken (ask for a refund), or nothing to cancel"),
            },
            (ID,),
            login=True,
            unsafe=True,
        )
    },
    "/api/orders/{id}/exchange": {
        "get": Operation(
            "Your order's units on the drop's face-value exchange",
            {200: Answer("The listings", schemas.OrderExchange), 404: error("Not yours or none")},
            (ID,),
            login=True,
        ),
        "post": Operation(
            "Put units of your order on the exchange at the price you paid (or less): each goes to the "
            "next buyer in line, and you are refunded (less the shop's fee) once that buyer has paid",
            {
                201: Answer("The order's listings", schemas.OrderExchange),
                403: error("csrf_failed"),
                404: error("Not yours or none"),
                409: error(
                    "exchange_closed (none, not open yet, paused or closed), or not_listable (not paid and "
                    "captured, or every unit refunded or listed already)"
                ),
                422: error("invalid (quantity beyond what you may list, price_minor above what you paid)"),
            },
            (ID,),
            login=True,
            unsafe=True,
            body=schemas.ExchangeBody,
        ),
        "delete": Operation(
            "Take back your units on the exchange that nobody has been offered yet",
            {
                200: Answer("The order's listings", schemas.OrderExchange),
                403: error("csrf_failed"),
                404: error("Not yours or none"),
                409: error("not_listable: none of the order's units is waiting on the exchange"),
            },
            (ID,),
            login=True,
            unsafe=True,
        ),
    },
    "/api/ops/orders/{id}/refund": {
        "post": Operation(
            "Refund an order, whole or some units, optionally back on sale (needs checkout.refund_order)",
            {
                201: Answer("The refund, as the provider answered it", schemas.Refund),
                200: Answer("The same Idempotency-Key again: the refund it made", schemas.Refund),
                403: error("Needs checkout.refund_order, or csrf_failed"),
                404: error("No such order"),
                409: error(
                    "not_refundable (not paid, refunded already) or capture_pending (try again shortly)"
                ),
                422: error("invalid (quantity, amount_minor, restock, reason), or idempotency_key_reused"),
            },
            (
                ID,
                Param("Idempotency-Key", "header", Annotated[str, Field(min_length=1, max_length=64)], False),
            ),
            login=True,
            unsafe=True,
            body=schemas.RefundBody,
        )
    },
    "/api/ops/drops/{slug}/invariant": {
        "get": Operation(
            "available + held + sold + refunded + exchange = quantity, from one snapshot (staff)",
            {
                200: Answer("The numbers", schemas.Invariant),
                403: error("Staff only"),
                404: error("No such drop"),
            },
            (SLUG,),
            login=True,
        )
    },
    "/api/ops/drops/{slug}/pause": {
        "post": Operation(
            "Kill switch: no claim succeeds after this returns (needs shop.pause_drop)",
            {
                200: Answer(
                    "drained false: claims begun before the pause were still running when it returned",
                    schemas.Paused,
                ),
                403: error("Needs shop.pause_drop, or csrf_failed"),
                404: error("No such drop"),
                422: error("invalid: no reason, or one too long"),
            },
            (SLUG,),
            login=True,
            unsafe=True,
            body=schemas.PauseBody,
        )
    },
    "/api/ops/drops/{slug}/resume": {
        "post": Operation(
            "Resume a paused drop (needs shop.pause_drop); the body and its reason are optional",
            {
                200: Answer("The drop's state", schemas.Resumed),
                403: error("Needs shop.pause_drop, or csrf_failed"),
                404: error("No such drop"),
                422: error("invalid: the body is not a JSON object"),
            },
            (SLUG,),
            login=True,
            unsafe=True,
        )
    },
}

INFO: Schema = {
    "title": "Floodgate",
    "version": "1",
    # Markdown on the docs page: the example in a code span, so "<code>" is not a tag
    "description": "Limited drops: reserve a unit, pay, confirm. Errors are "
    '`{"error": "<code>", "detail": "<what to do>"}` (see Error). Any other path under /api/ '
    "answers 404 and any other method 405 (with Allow), both with an Error body. The public "
    "contract, every answer and status, is docs/API.md in the repository.",
}
SECURITY_SCHEMES: Schema = {
    "bearer": {"type": "http", "scheme": "bearer"},
    "session": {"type": "apiKey", "in": "cookie", "name": "sessionid"},
}
SECURED: list[dict[str, list[str]]] = [{"bearer": []}, {"session": []}]
RETRY_AFTER: Schema = {
    "Retry-After": {"description": "Seconds to wait before trying again", "schema": {"type": "integer"}}
}


def _common(operation: Operation) -> dict[int, Answer]:
    """The answers core.api.api gives every view besides the view's own."""
    common = {
        # A malformed or unknown bearer token is refused on every call; login views also refuse none.
        401: error("Not logged in, or a bad bearer token" if operation.login else "A bad bearer token"),
        # The database said "not now" (lock or statement timeout, pool exhausted).
        503: busy("busy; see Retry-After"),
    }
    if operation.unsafe:
        common[403] = error("csrf_failed: a session needs the CSRF token")
        # A body the view (or a session's CSRF check) reads: past 16 KB for JSON, 2.5 MB for a form.
        common[413] = error("too_large: the request body is too large")
    if operation.body is not None:
        common[422] = error("invalid: the body is not a JSON object")
    return common


def _type_schema(annotation: Any) -> Schema:
    return TypeAdapter(annotation).json_schema(schema_generator=OpenApiJsonSchema)


def _parameter(param: Param) -> Schema:
    described = {"description": param.description} if param.description else {}
    return {
        "name": param.name,
        "in": param.where,
        "required": param.required,
        "schema": _type_schema(param.type),
        **described,
    }


def _operation(operation: Operation, refs: dict[type[BaseModel], Schema]) -> Schema:
    responses: Schema = {}
    for status, answer in {**_common(operation), **operation.answers}.items():
        response: Schema = {"description": answer.description}
        if answer.model is not None:
            response["content"] = {"application/json": {"schema": refs[answer.model]}}
        if answer.retry:
            response["headers"] = RETRY_AFTER
        responses[str(status)] = response
    generated: Schema = {"summary": operation.summary, "responses": responses}
    if operation.params:
        generated["parameters"] = [_parameter(param) for param in operation.params]
    if operation.login:
        generated["security"] = SECURED
    if operation.body is not None:
        body = operation.body.model_json_schema(schema_generator=OpenApiJsonSchema)
        generated["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    return generated


@functools.cache
def _document() -> Schema:
    # Error is every operation's through _common; the table names the rest.
    operations = [op for item in OPERATIONS.values() for op in item.values()]
    answers = [answer for op in operations for answer in op.answers.values()]
    named: set[type[BaseModel]] = {schemas.Error, *(a.model for a in answers if a.model is not None)}
    models = sorted(named, key=lambda model: model.__name__)
    keys, definitions = models_json_schema(
        [(model, "serialization") for model in models],
        ref_template="#/components/schemas/{model}",
        schema_generator=OpenApiJsonSchema,
    )
    refs = {model: keys[(model, "serialization")] for model in models}
    # holds sits below checkout, so its HoldOrder cannot name checkout's OrderState; here both are known
    definitions["$defs"]["HoldOrder"]["properties"]["state"] = {"$ref": "#/components/schemas/OrderState"}
    return {
        "openapi": "3.1.0",
        "info": INFO,
        "components": {"securitySchemes": SECURITY_SCHEMES, "schemas": definitions["$defs"]},
        "paths": {
            path: {method: _operation(op, refs) for method, op in item.items()}
            for path, item in OPERATIONS.items()
        },
    }


def schema() -> Schema:
    """A fresh copy each call: a caller that edits it (a test, a view) cannot change the next answer."""
    return copy.deepcopy(_document())
