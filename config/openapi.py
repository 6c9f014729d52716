"""The OpenAPI 3.1 description of `/api/`, served at `/api/openapi.json`.

Kept by hand next to plain Django views, and held to them: the test suite checks every /api/
answer it sees against this document (tests/api_schema.py), so an answer that gains, loses or
retypes a field, or a status that is not listed here, fails a test. Objects therefore list every
field they always carry as required and allow no others (additionalProperties: false).
"""

from __future__ import annotations

import copy
from typing import Any

Schema = dict[str, Any]

DROP_STATES = ["scheduled", "live", "paused", "ended"]
HOLD_STATES = ["held", "sold", "released", "expired"]
ORDER_STATES = ["pending", "confirmed", "failed"]
PAYMENT_STATES = [
    "created",
    "pending",
    "capture_pending",
    "captured",
    "void_pending",
    "voided",
    "failed",
    "capture_failed",
    "void_failed",
]
QUEUE_STATES = ["scheduled", "admitting", "all_held", "sold_out", "paused", "closed"]

INTEGER: Schema = {"type": "integer"}
COUNT: Schema = {"type": "integer", "minimum": 0}
STRING: Schema = {"type": "string"}
BOOLEAN: Schema = {"type": "boolean"}
DATE_TIME: Schema = {"type": "string", "format": "date-time"}


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _object(properties: Schema, *, optional: tuple[str, ...] = (), **more: Any) -> Schema:
    """A closed object: every property required unless named optional, no others allowed."""
    return {
        "type": "object",
        "required": [name for name in properties if name not in optional],
        "properties": properties,
        "additionalProperties": False,
        **more,
    }


RETRY_AFTER = {
    "Retry-After": {"description": "Seconds to wait before trying again", "schema": {"type": "integer"}}
}


def _json(description: str, schema: Schema, *, retry: bool = False) -> Schema:
    answer: Schema = {"description": description, "content": {"application/json": {"schema": schema}}}
    if retry:
        answer["headers"] = RETRY_AFTER
    return answer


def _error(description: str, *, retry: bool = False) -> Schema:
    return _json(description, _ref("Error"), retry=retry)


SLUG = {"name": "slug", "in": "path", "required": True, "schema": {"type": "string"}}
ID = {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}
SECURED: list[dict[str, list[str]]] = [{"bearer": []}, {"session": []}]


def _operation(
    summary: str,
    responses: Schema,
    *,
    parameters: list[Schema] | None = None,
    login: bool = False,
    unsafe: bool = False,
    body: Schema | None = None,
) -> Schema:
    """One operation with the answers core.api.api gives every view besides the view's own."""
    common: Schema = {
        # A malformed or unknown bearer token is refused on every call; login views also refuse none.
        "401": _error("Not logged in, or a bad bearer token" if login else "A bad bearer token"),
        # The database said "not now" (lock or statement timeout, pool exhausted).
        "503": _error("busy; see Retry-After", retry=True),
    }
    if unsafe:
        common["403"] = _error("csrf_failed: a session needs the CSRF token")
        # A body the view (or a session's CSRF check) reads: past 16 KB for JSON, 2.5 MB for a form.
        common["413"] = _error("too_large: the request body is too large")
    if body is not None:
        common["422"] = _error("invalid: the body is not a JSON object")
    operation: Schema = {"summary": summary, "responses": {**common, **responses}}
    if parameters:
        operation["parameters"] = parameters
    if login:
        operation["security"] = SECURED
    if body is not None:
        operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    return operation


COMPONENTS: Schema = {
    "securitySchemes": {
        "bearer": {"type": "http", "scheme": "bearer"},
        "session": {"type": "apiKey", "in": "cookie", "name": "sessionid"},
    },
    "schemas": {
        "Error": _object(
            {
                "error": {"type": "string", "description": "A stable code, e.g. sold_out"},
                "detail": {"type": "string", "description": "What to do, for a person"},
                "remaining": {**COUNT, "description": "sold_out: how many are left to ask for"},
                "hold": {
                    "type": ["integer", "null"],
                    "description": "hold_exists: the buyer's active hold (null: one is being made)",
                },
                "queue": {"const": True, "description": "not_admitted: go through the waiting room"},
                "starts_at": {**DATE_TIME, "description": "not_started: when the drop opens"},
                "challenge": {"type": "string", "description": "proof_of_work_required: what to solve"},
                "bits": {**COUNT, "description": "proof_of_work_required: leading zero bits asked"},
            },
            optional=("remaining", "hold", "queue", "starts_at", "challenge", "bits"),
        ),
        "Drop": _object(
            {
                "slug": STRING,
                "title": STRING,
                "state": {"enum": DROP_STATES},
                "quantity": COUNT,
                "remaining": {**COUNT, "description": "may be approximate"},
                "sold_out": BOOLEAN,
                "starts_at": DATE_TIME,
                "ends_at": DATE_TIME,
                "waiting_room": BOOLEAN,
                "price_minor": COUNT,
                "currency": STRING,
                "per_buyer_limit": {"type": "integer", "minimum": 1},
            }
        ),
        "Hold": _object(
            {
                "id": INTEGER,
                "drop": {"type": "string", "description": "The drop's slug"},
                "state": {"enum": HOLD_STATES},
                "quantity": {"type": "integer", "minimum": 1},
                "expires_at": DATE_TIME,
                "extended": {"type": "boolean", "description": "Paying extends a hold once"},
                "units": {
                    "type": "array",
                    "items": STRING,
                    "description": "Unit labels (seats); empty for identical units",
                },
                "order": {
                    "description": "The order once payment has started",
                    "oneOf": [
                        {"type": "null"},
                        _object({"id": INTEGER, "state": {"enum": ORDER_STATES}}),
                    ],
                },
            }
        ),
        "Order": _object(
            {
                "id": INTEGER,
                "hold": INTEGER,
                "drop": {"type": "string", "description": "The drop's slug"},
                "state": {"enum": ORDER_STATES},
                "quantity": {"type": "integer", "minimum": 1},
                "amount_minor": COUNT,
                "currency": STRING,
                "failure_reason": {"type": "string", "description": "Empty unless failed"},
                "refunded": BOOLEAN,
                "created_at": DATE_TIME,
            }
        ),
        "Invariant": _object(
            {
                "quantity": COUNT,
                "available": COUNT,
                "held": COUNT,
                "sold": COUNT,
                "expired_unreclaimed": COUNT,
                "expired_holds": COUNT,
                "drift": {"type": "integer", "description": "quantity - (available + held + sold); 0"},
            }
        ),
        "Place": _object(
            {
                "ticket": {"type": ["integer", "null"], "description": "Place in line; null until the draw"},
                "entry": {"type": "integer", "description": "Entry number (the draw sorts these)"},
                "position": {"type": ["integer", "null"], "minimum": 0, "description": "1 = next; 0 = in"},
                "admitted": BOOLEAN,
                "admission_token": {
                    "type": ["string", "null"],
                    "description": "Send as X-Admission-Token when reserving; short-lived: GET again",
                },
                "eta_seconds": {"type": ["integer", "null"], "minimum": 0},
                "drawn": BOOLEAN,
                "unlikely": {
                    "type": "boolean",
                    "description": "As many ahead as units left and held, or more: unlikely to get one",
                },
                "admitted_through": COUNT,
                "state": {"enum": QUEUE_STATES},
                "remaining": COUNT,
                "returning": {**COUNT, "description": "Units given back, being offered to the next tickets"},
                "held": COUNT,
                "offered_through": {
                    **COUNT,
                    "description": "Tickets up to this one have been offered a returned unit (or had one)",
                },
                "offer": {
                    "type": ["object", "null"],
                    "description": "A returned unit held for you: pay for its hold before expires_at, or it "
                    "goes to the next ticket (state lapsed)",
                    "properties": {
                        "hold": INTEGER,
                        "state": {"enum": ["held", "sold", "lapsed"]},
                        "expires_at": DATE_TIME,
                        "paying": BOOLEAN,
                    },
                    "required": ["hold", "state", "expires_at", "paying"],
                    "additionalProperties": False,
                },
                "last_ticket": COUNT,
                "waiting": COUNT,
                "pace_per_minute": {"type": "number", "minimum": 0},
                "seed_sha256": {"type": ["string", "null"]},
                "seed": {"type": ["string", "null"], "description": "Revealed after the draw"},
                "queue_ticket": {
                    "type": ["string", "null"],
                    "description": "Send back as X-Queue-Ticket on GET (the page's cookie carries it): "
                    "the edge answers that poll from its snapshot",
                },
            }
        ),
        "Draw": _object(
            {
                "seed_sha256": STRING,
                "drawn": BOOLEAN,
                "seed": STRING,
                "drawn_at": DATE_TIME,
                "entries": {
                    "type": "array",
                    "items": INTEGER,
                    "description": "The closed entry list, ascending",
                },
                "entries_sha256": {
                    "type": "string",
                    "description": "SHA-256 of the entries, ascending, joined by ','; fixed at the draw",
                },
                "beacon": {
                    "type": "string",
                    "description": "The public randomness beacon value mixed in ('' if none)",
                },
                "order": {
                    "type": "array",
                    "items": INTEGER,
                    "description": "The entries by the ticket numbers they hold (the first has ticket 1)",
                },
                "rule": STRING,
            },
            optional=("seed", "drawn_at", "entries", "entries_sha256", "beacon", "order", "rule"),
            # The seed and entries come with the draw, never before it.
            **{
                "if": {"properties": {"drawn": {"const": True}}},
                "then": {
                    "required": ["seed", "drawn_at", "entries", "entries_sha256", "beacon", "order", "rule"]
                },
                "else": {
                    "not": {
                        "anyOf": [
                            {"required": [k]}
                            for k in (
                                "seed",
                                "drawn_at",
                                "entries",
                                "entries_sha256",
                                "beacon",
                                "order",
                                "rule",
                            )
                        ]
                    }
                },
            },
        ),
        "PaymentStarted": _object(
            {
                "payment": INTEGER,
                "state": {"enum": PAYMENT_STATES},
                "redirect_url": {"type": "string", "description": "Send the buyer here to pay"},
                "order": _ref("Order"),
            }
        ),
    },
}

QUEUE_ERRORS: Schema = {
    "404": _error("No such drop (or, for GET, not in its queue: not_in_queue)"),
    "409": _error(
        "no_waiting_room; sold_out (POST, a new buyer: sold out with none held, the line is closed)"
    ),
    "410": _error("ended: the queue is closed"),
}

PATHS: Schema = {
    "/api/": {
        "get": _operation(
            "Where to start",
            {"200": _json("Links", _object({"openapi": STRING, "drops": STRING, "catalogue": STRING}))},
        )
    },
    "/api/openapi.json": {
        "get": _operation(
            "This document",
            {
                "200": _json(
                    "OpenAPI 3.1",
                    _object(
                        {
                            "openapi": {"const": "3.1.0"},
                            "info": {"type": "object"},
                            "components": {"type": "object"},
                            "paths": {"type": "object"},
                        }
                    ),
                )
            },
        )
    },
    "/api/me": {
        "get": _operation(
            "Who the credentials belong to",
            {"200": _json("The user", _object({"username": STRING}))},
            login=True,
        )
    },
    "/api/drops": {
        "get": _operation(
            "Every drop: live, upcoming, sold out, then ended (most recent first); HEAD too",
            {"200": _json("The drops", _object({"drops": {"type": "array", "items": _ref("Drop")}}))},
        )
    },
    "/api/drops/{slug}": {
        "get": _operation(
            "A drop and how much of it is left (HEAD too)",
            {"200": _json("The drop", _ref("Drop")), "404": _error("No such drop")},
            parameters=[SLUG],
        )
    },
    "/api/drops/{slug}/holds": {
        "post": _operation(
            "Reserve units: they are yours until expires_at",
            {
                "201": _json("Reserved", _ref("Hold")),
                "200": _json("The same Idempotency-Key again: the hold it made", _ref("Hold")),
                "400": _error("invalid_idempotency_key: missing or malformed Idempotency-Key"),
                "403": _error("not_admitted (waiting-room drops), or csrf_failed"),
                "404": _error("No such drop"),
                "409": _error("sold_out (with remaining), unit_taken or hold_exists (with hold)"),
                "410": _error("ended"),
                "422": _error(
                    "invalid_quantity, limit_reached, invalid (body, unit), or idempotency_key_reused "
                    "(the key was used for another quantity or unit)"
                ),
                "423": _error("paused"),
                "425": _error("not_started"),
                "429": _error("rate_limited; see Retry-After", retry=True),
                "503": _error(
                    "busy: the database, Redis or this process' claim slots; see Retry-After", retry=True
                ),
            },
            parameters=[
                SLUG,
                {
                    "name": "Idempotency-Key",
                    "in": "header",
                    "required": True,
                    "schema": {"type": "string", "minLength": 1, "maxLength": 64},
                },
                {"name": "X-Admission-Token", "in": "header", "required": False, "schema": STRING},
            ],
            login=True,
            unsafe=True,
            body={
                "type": "object",
                "required": ["quantity"],
                "properties": {"quantity": {"type": "integer", "minimum": 1}, "unit": STRING},
            },
        )
    },
    "/api/drops/{slug}/queue": {
        "post": _operation(
            "Join the waiting room; joining again returns the same ticket",
            {
                "200": _json("Your place", _ref("Place")),
                **QUEUE_ERRORS,
                "428": _error(
                    "proof_of_work_required: a new place in this drop's line needs a nonce whose "
                    "sha256('<challenge>:<nonce>') starts with `bits` zero bits, sent as X-Join-Proof"
                ),
                "429": _error("rate_limited; see Retry-After", retry=True),
                "503": _error("busy (Redis down or the line is catching up); see Retry-After", retry=True),
            },
            parameters=[
                SLUG,
                {
                    "name": "X-Join-Proof",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "string", "pattern": "^[0-9a-z]{1,32}$"},
                    "description": "The proof of work's nonce, for drops that ask one (see 428)",
                },
            ],
            login=True,
            unsafe=True,
        ),
        "get": _operation(
            "Your place in the waiting room (a fresh admission token once admitted)",
            {"200": _json("Your place", _ref("Place")), **QUEUE_ERRORS},
            parameters=[
                SLUG,
                {
                    "name": "X-Queue-Ticket",
                    "in": "header",
                    "required": False,
                    "schema": STRING,
                    "description": "The queue_ticket of an earlier answer, sent with the same credential",
                },
            ],
            login=True,
        ),
    },
    "/api/drops/{slug}/queue/draw": {
        "get": _operation(
            "Check the draw: the seed's hash before the start; seed and entries after",
            {
                "200": _json(
                    "Sort the entries by sha256('<seed>:<entry>'); the first gets ticket 1", _ref("Draw")
                ),
                "404": _error("No such drop"),
                "409": _error("no_waiting_room"),
            },
            parameters=[SLUG],
        )
    },
    "/api/holds/{id}": {
        "get": _operation(
            "One of your holds",
            {"200": _json("The hold", _ref("Hold")), "404": _error("Not yours or none")},
            parameters=[ID],
            login=True,
        ),
        "delete": _operation(
            "Release a hold; its units go back to stock once",
            {"200": _json("The hold after release", _ref("Hold")), "404": _error("Not yours or none")},
            parameters=[ID],
            login=True,
            unsafe=True,
        ),
    },
    "/api/holds/{id}/payment": {
        "post": _operation(
            "Start paying a hold: extends it once; send the buyer to redirect_url",
            {
                "202": _json("The payment and its order", _ref("PaymentStarted")),
                "404": _error("Not yours or none"),
                "409": _error("hold_not_active: expired or released"),
                "503": _error("busy, payment_unavailable or payment_opening; see Retry-After", retry=True),
            },
            parameters=[ID],
            login=True,
            unsafe=True,
        )
    },
    "/api/orders": {
        "get": _operation(
            "Your orders, newest first",
            {"200": _json("Your orders", _object({"orders": {"type": "array", "items": _ref("Order")}}))},
            login=True,
        )
    },
    "/api/orders/{id}": {
        "get": _operation(
            "One of your orders",
            {"200": _json("The order", _ref("Order")), "404": _error("Not yours or none")},
            parameters=[ID],
            login=True,
        )
    },
    "/api/ops/drops/{slug}/invariant": {
        "get": _operation(
            "available + held + sold = quantity, from one snapshot (staff)",
            {
                "200": _json("The numbers", _ref("Invariant")),
                "403": _error("Staff only"),
                "404": _error("No such drop"),
            },
            parameters=[SLUG],
            login=True,
        )
    },
    "/api/ops/drops/{slug}/pause": {
        "post": _operation(
            "Kill switch: no claim succeeds after this returns (needs shop.pause_drop)",
            {
                "200": _json(
                    "drained false: claims begun before the pause were still running when it returned",
                    _object({"state": {"enum": DROP_STATES}, "changed": BOOLEAN, "drained": BOOLEAN}),
                ),
                "403": _error("Needs shop.pause_drop, or csrf_failed"),
                "404": _error("No such drop"),
                "422": _error("invalid: no reason, or one too long"),
            },
            parameters=[SLUG],
            login=True,
            unsafe=True,
            body={
                "type": "object",
                "required": ["reason"],
                "properties": {"reason": {"type": "string", "minLength": 1}},
            },
        )
    },
    "/api/ops/drops/{slug}/resume": {
        "post": _operation(
            "Resume a paused drop (needs shop.pause_drop); the body and its reason are optional",
            {
                "200": _json(
                    "The drop's state", _object({"state": {"enum": DROP_STATES}, "changed": BOOLEAN})
                ),
                "403": _error("Needs shop.pause_drop, or csrf_failed"),
                "404": _error("No such drop"),
                "422": _error("invalid: the body is not a JSON object"),
            },
            parameters=[SLUG],
            login=True,
            unsafe=True,
        )
    },
}


def schema() -> Schema:
    """A fresh copy each call: a caller that edits it (a test, a view) cannot change the next answer."""
    doc: Schema = {
        "openapi": "3.1.0",
        "info": {
            "title": "Floodgate",
            "version": "1",
            # Markdown on the docs page: the example in a code span, so "<code>" is not a tag
            "description": "Limited drops: reserve a unit, pay, confirm. Errors are "
            '`{"error": "<code>", "detail": "<what to do>"}` (see Error). Any other path under /api/ '
            "answers 404 and any other method 405 (with Allow), both with an Error body. The public "
            "contract, every answer and status, is docs/API.md in the repository.",
        },
        "components": COMPONENTS,
        "paths": PATHS,
    }
    return copy.deepcopy(doc)
