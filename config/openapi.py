"""The OpenAPI 3.1 description of `/api/`, served at `/api/openapi.json`."""

from __future__ import annotations


def _error(description: str) -> dict[str, object]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


def _ok(description: str, ref: str) -> dict[str, object]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{ref}"}}},
    }


SLUG = {"name": "slug", "in": "path", "required": True, "schema": {"type": "string"}}
HOLD_ID = {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}
SECURED = [{"bearer": []}, {"session": []}]


def schema() -> dict[str, object]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Floodgate",
            "version": "1",
            "description": "Limited drops: reserve a unit, pay, confirm. Errors are "
            '{"error": "<code>", "detail": "<what to do>"}.',
        },
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "session": {"type": "apiKey", "in": "cookie", "name": "sessionid"},
            },
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error", "detail"],
                    "properties": {"error": {"type": "string"}, "detail": {"type": "string"}},
                },
                "Drop": {
                    "type": "object",
                    "required": [
                        "slug",
                        "title",
                        "state",
                        "quantity",
                        "remaining",
                        "starts_at",
                        "ends_at",
                        "waiting_room",
                    ],
                    "properties": {
                        "slug": {"type": "string"},
                        "title": {"type": "string"},
                        "state": {"enum": ["scheduled", "live", "paused", "ended"]},
                        "quantity": {"type": "integer"},
                        "remaining": {"type": "integer", "description": "may be approximate"},
                        "sold_out": {"type": "boolean"},
                        "starts_at": {"type": "string", "format": "date-time"},
                        "ends_at": {"type": "string", "format": "date-time"},
                        "waiting_room": {"type": "boolean"},
                        "price_minor": {"type": "integer"},
                        "currency": {"type": "string"},
                        "per_buyer_limit": {"type": "integer"},
                    },
                },
                "Order": {
                    "type": "object",
                    "required": ["id", "state", "quantity", "amount_minor", "currency"],
                    "properties": {
                        "id": {"type": "integer"},
                        "hold": {"type": "integer"},
                        "drop": {"type": "string"},
                        "state": {"enum": ["pending", "confirmed", "failed"]},
                        "quantity": {"type": "integer"},
                        "amount_minor": {"type": "integer"},
                        "currency": {"type": "string"},
                        "failure_reason": {"type": "string"},
                        "refunded": {"type": "boolean"},
                        "created_at": {"type": "string", "format": "date-time"},
                    },
                },
                "Invariant": {
                    "type": "object",
                    "required": ["quantity", "available", "held", "sold", "expired_unreclaimed", "drift"],
                    "properties": {
                        k: {"type": "integer"}
                        for k in [
                            "quantity",
                            "available",
                            "held",
                            "sold",
                            "expired_unreclaimed",
                            "expired_holds",
                            "drift",
                        ]
                    },
                },
                "Hold": {
                    "type": "object",
                    "required": ["id", "state", "quantity", "expires_at"],
                    "properties": {
                        "id": {"type": "integer"},
                        "state": {"enum": ["held", "sold", "released", "expired"]},
                        "quantity": {"type": "integer"},
                        "expires_at": {"type": "string", "format": "date-time"},
                        "units": {"type": "array", "items": {"type": "string"}},
                        "order": {"type": ["object", "null"]},
                    },
                },
            },
        },
        "paths": {
            "/api/drops/{slug}": {
                "get": {
                    "summary": "A drop and how much of it is left",
                    "parameters": [SLUG],
                    "responses": {"200": _ok("The drop", "Drop"), "404": _error("No such drop")},
                }
            },
            "/api/drops/{slug}/holds": {
                "post": {
                    "summary": "Reserve units: they are yours until expires_at",
                    "security": SECURED,
                    "parameters": [
                        SLUG,
                        {
                            "name": "Idempotency-Key",
                            "in": "header",
                            "required": True,
                            "schema": {"type": "string", "minLength": 1, "maxLength": 64},
                        },
                        {
                            "name": "X-Admission-Token",
                            "in": "header",
                            "required": False,
                            "schema": {"type": "string"},
                        },
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["quantity"],
                                    "properties": {
                                        "quantity": {"type": "integer", "minimum": 1},
                                        "unit": {"type": "string"},
                                    },
                                }
                            }
                        },
                    },
                    "responses": {
                        "201": _ok("Reserved", "Hold"),
                        "200": _ok("The same Idempotency-Key again: the hold it made", "Hold"),
                        "400": _error("Missing or malformed Idempotency-Key"),
                        "401": _error("Not logged in"),
                        "403": _error("not_admitted"),
                        "404": _error("No such drop"),
                        "409": _error("sold_out, unit_taken or hold_exists"),
                        "410": _error("ended"),
                        "422": _error("Bad quantity, or the per-buyer limit is reached"),
                        "423": _error("paused"),
                        "425": _error("not_started"),
                        "429": _error("Too many requests; see Retry-After"),
                        "503": _error("Busy; see Retry-After"),
                    },
                }
            },
            "/api/holds/{id}": {
                "get": {
                    "summary": "One of your holds",
                    "security": SECURED,
                    "parameters": [HOLD_ID],
                    "responses": {"200": _ok("The hold", "Hold"), "404": _error("Not yours or none")},
                },
                "delete": {
                    "summary": "Release a hold; its units go back to stock once",
                    "security": SECURED,
                    "parameters": [HOLD_ID],
                    "responses": {
                        "200": _ok("The hold after release", "Hold"),
                        "404": _error("Not yours or none"),
                    },
                },
            },
            **MORE_PATHS,
        },
    }


_PLACE = {
    "type": "object",
    "required": ["ticket", "position", "admitted", "admission_token"],
    "properties": {
        "ticket": {"type": ["integer", "null"], "description": "Place in line; null until the draw"},
        "entry": {"type": "integer", "description": "Entry number (the draw sorts these)"},
        "position": {"type": ["integer", "null"], "description": "1 = next; 0 = admitted"},
        "admitted": {"type": "boolean"},
        "admission_token": {
            "type": ["string", "null"],
            "description": "Send as X-Admission-Token when reserving; short-lived: GET again for a fresh one",
        },
        "admitted_through": {"type": "integer"},
        "state": {"enum": ["scheduled", "admitting", "all_held", "sold_out", "paused", "closed"]},
        "remaining": {"type": "integer"},
        "held": {"type": "integer"},
        "waiting": {"type": "integer"},
        "pace_per_minute": {"type": "number"},
        "eta_seconds": {"type": ["integer", "null"]},
        "seed_sha256": {"type": ["string", "null"]},
        "seed": {"type": ["string", "null"], "description": "Revealed after the draw"},
        "drawn": {"type": "boolean"},
        "queue_ticket": {
            "type": ["string", "null"],
            "description": "Send back as X-Queue-Ticket on GET (the page's cookie carries it)",
        },
    },
}
_QUEUE_ERRORS = {
    "401": _error("Not logged in"),
    "404": _error("No such drop (or, for GET, not in its queue: not_in_queue)"),
    "409": _error("no_waiting_room"),
    "410": _error("ended: the queue is closed"),
    "429": _error("Too many requests; see Retry-After"),
    "503": _error("Busy; see Retry-After"),
}

MORE_PATHS: dict[str, object] = {
    "/api/drops/{slug}/queue": {
        "post": {
            "summary": "Join the waiting room; joining again returns the same ticket",
            "security": SECURED,
            "parameters": [SLUG],
            "responses": {
                "200": {"description": "Your place", "content": {"application/json": {"schema": _PLACE}}},
                **_QUEUE_ERRORS,
            },
        },
        "get": {
            "summary": "Your place in the waiting room (a fresh admission token once admitted)",
            "security": SECURED,
            "parameters": [
                SLUG,
                {
                    "name": "X-Queue-Ticket",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "string"},
                    "description": "The queue_ticket of an earlier answer, with the same credential",
                },
            ],
            "responses": {
                "200": {"description": "Your place", "content": {"application/json": {"schema": _PLACE}}},
                **_QUEUE_ERRORS,
            },
        },
    },
    "/api/drops/{slug}/queue/draw": {
        "get": {
            "summary": "Check the draw: seed hash before the start; seed and entries after",
            "parameters": [SLUG],
            "responses": {
                "200": {
                    "description": "Sort the entries by sha256('<seed>:<entry>'); the first gets ticket 1",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "seed_sha256": {"type": "string"},
                                    "drawn": {"type": "boolean"},
                                    "seed": {"type": "string"},
                                    "entries": {"type": "array", "items": {"type": "integer"}},
                                },
                            }
                        }
                    },
                },
                "404": _error("No such drop"),
                "409": _error("no_waiting_room"),
            },
        }
    },
    "/api/holds/{id}/payment": {
        "post": {
            "summary": "Start paying a hold: extends it once; send the buyer to redirect_url",
            "security": SECURED,
            "parameters": [HOLD_ID],
            "responses": {
                "202": {"description": "{payment, state, redirect_url, order}"},
                "404": _error("Not yours or none"),
                "409": _error("hold_not_active: expired or released"),
                "503": _error("payment_unavailable or payment_opening; see Retry-After"),
            },
        }
    },
    "/api/orders": {
        "get": {
            "summary": "Your orders, newest first",
            "security": SECURED,
            "responses": {"200": {"description": '{"orders": [Order]}'}},
        }
    },
    "/api/orders/{id}": {
        "get": {
            "summary": "One of your orders",
            "security": SECURED,
            "parameters": [HOLD_ID],
            "responses": {"200": _ok("The order", "Order"), "404": _error("Not yours or none")},
        }
    },
    "/api/me": {
        "get": {
            "summary": "Who the credentials belong to",
            "security": SECURED,
            "responses": {"200": {"description": '{"username"}'}, "401": _error("No valid credentials")},
        }
    },
    "/api/ops/drops/{slug}/invariant": {
        "get": {
            "summary": "available + held + sold = quantity, from one snapshot (staff)",
            "security": SECURED,
            "parameters": [SLUG],
            "responses": {"200": _ok("The numbers", "Invariant"), "403": _error("Staff only")},
        }
    },
    "/api/ops/drops/{slug}/pause": {
        "post": {
            "summary": "Kill switch: no claim succeeds after this returns (needs shop.pause_drop)",
            "security": SECURED,
            "parameters": [SLUG],
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "required": ["reason"],
                            "properties": {"reason": {"type": "string"}},
                        }
                    }
                },
            },
            "responses": {
                "200": {"description": "{state, changed, drained}"},
                "403": _error("Needs shop.pause_drop"),
                "422": _error("No reason given"),
            },
        }
    },
    "/api/ops/drops/{slug}/resume": {
        "post": {
            "summary": "Resume a paused drop (needs shop.pause_drop)",
            "security": SECURED,
            "parameters": [SLUG],
            "responses": {"200": {"description": "{state, changed}"}, "403": _error("Needs shop.pause_drop")},
        }
    },
}
