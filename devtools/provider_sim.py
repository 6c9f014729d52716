"""A simulated payment provider, run as its own process: `daphne -p 8701 devtools.provider_sim:app`.

It behaves like a real one so the saga meets real failure modes: authorisation
is slow and sometimes declined, webhooks are signed, arrive late, more than
once, and are retried on errors. Raw ASGI with in-memory state; it must not
import Django (it is a separate service that only shares the signing code).

Environment, read once at start: PROVIDER_SECRET, PROVIDER_WEBHOOK_SECRET, PROVIDER_LATENCY_MS,
PROVIDER_FAILURE_RATE, PROVIDER_DUPLICATES, PROVIDER_LATE_SECONDS,
PROVIDER_PUBLIC_URL. `POST /api/config` changes the behaviour ones at runtime.
"""

from __future__ import annotations

import asyncio
import html
import json
import logging
import os
import random
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from checkout.providers.signing import SIGNATURE_HEADER, sign

log = logging.getLogger("floodgate.provider_sim")

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

MAX_BODY_BYTES = 64 * 1024
# Oldest sessions are forgotten past this, so a load test cannot grow the process without bound.
MAX_SESSIONS = 100_000
DELIVERY_ATTEMPTS = 5
DELIVERY_TIMEOUT = httpx.Timeout(5.0, connect=2.0)
TEST_CARD = "4242 4242 4242 4242"
RANDOM_DECLINE_REASONS = ("card_declined", "insufficient_funds", "do_not_honor")
# Currencies whose minor unit is not a hundredth (ISO 4217).
CURRENCY_EXPONENTS = {
    "JPY": 0,
    "KRW": 0,
    "ISK": 0,
    "CLP": 0,
    "VND": 0,
    "BHD": 3,
    "KWD": 3,
    "JOD": 3,
    "OMR": 3,
}
# Repeating a finished capture or void succeeds without effect; anything else is a conflict.
SETTLEMENTS = {
    "capture": {"authorized": "captured", "captured": "captured"},
    "void": {"authorized": "voided", "voided": "voided"},
}
# name -> (type, lowest, highest, environment variable, default)
TUNABLES: dict[str, tuple[type, float, float, str, float]] = {
    "latency_ms": (int, 0, 60_000, "PROVIDER_LATENCY_MS", 300),
    "failure_rate": (float, 0.0, 1.0, "PROVIDER_FAILURE_RATE", 0.1),
    "duplicates": (int, 0, 20, "PROVIDER_DUPLICATES", 1),
    "late_seconds": (float, 0.0, 3600.0, "PROVIDER_LATE_SECONDS", 0),
}
CURRENCY = re.compile(r"[A-Z]{3}")
# What a card statement can show (a subset of Stripe's rules, as the shop sends it), empty for none.
STATEMENT_DESCRIPTOR = re.compile(r"(?=[^A-Z]*[A-Z])[A-Z0-9 .,&+/-]{1,22}|")
SESSION_PATH = re.compile(
    r"/api/sessions/([A-Za-z0-9_]{1,64})(?:/(capture|void|refund|dispute|dispute/close))?"
)
# Stripe's dispute reasons; a dispute's evidence is due this many days after it opens unless asked.
DISPUTE_REASONS = frozenset(
    {
        "bank_cannot_process",
        "credit_not_processed",
        "duplicate",
        "fraudulent",
        "general",
        "product_not_received",
        "product_unacceptable",
        "subscription_canceled",
        "unrecognized",
    }
)
EVIDENCE_DAYS = 7
DISPUTE_OUTCOMES = ("won", "lost")
REFUND_KEY = re.compile(r"[\x21-\x7e]{1,200}")
PAY_PATH = re.compile(r"/pay/([^/]*)")


class HttpError(Exception):
    """Ends a request with a 4xx answer: JSON for the API, a page for /pay."""

    def __init__(self, status: int, error: str, detail: str) -> None:
        super().__init__(detail)
        self.status, self.error, self.detail = status, error, detail


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Config:
    secret: str  # the API key callers present
    webhook_secret: str  # signs webhooks: a leaked API key cannot forge a payment
    public_url: str
    latency_ms: int
    failure_rate: float
    duplicates: int
    late_seconds: float

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Config:
        """Read the environment; a bad value stops the process at start instead of at the first payment."""
        values: dict[str, int | float] = {}
        for name, (_kind, _low, _high, variable, default) in TUNABLES.items():
            raw = env.get(variable, "").strip()
            try:
                values[name] = checked(name, float(raw) if raw else default)
            except ValueError as exc:
                raise SystemExit(f"provider_sim: {variable}={raw!r}: {exc}") from None
        return cls(
            secret=env.get("PROVIDER_SECRET") or "sim-secret-dev",
            webhook_secret=env.get("PROVIDER_WEBHOOK_SECRET") or "sim-webhook-secret-dev",
            public_url=(env.get("PROVIDER_PUBLIC_URL") or "http://127.0.0.1:8701").rstrip("/"),
            latency_ms=int(values["latency_ms"]),
            failure_rate=float(values["failure_rate"]),
            duplicates=int(values["duplicates"]),
            late_seconds=float(values["late_seconds"]),
        )

    def tunables(self) -> dict[str, int | float]:
        return {name: getattr(self, name) for name in TUNABLES}


def checked(name: str, value: object) -> int | float:
    """Return value as the tunable's type if it is a number in range; raises ValueError."""
    kind, low, high = TUNABLES[name][:3]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number")
    if kind is int and not float(value).is_integer():
        raise ValueError(f"{name} must be a whole number")
    if not low <= value <= high:  # also false for NaN
        raise ValueError(f"{name} must be between {low:g} and {high:g}")
    return int(value) if kind is int else float(value)


@dataclass
class Dispute:
    """A buyer's bank disputing a captured session: needs_response, then won or lost."""

    dispute_id: str
    amount_minor: int
    reason: str
    due_by: int  # the evidence deadline, unix seconds
    state: str = "needs_response"

    def public(self) -> dict[str, object]:
        return {
            "dispute_id": self.dispute_id,
            "state": self.state,
            "amount_minor": self.amount_minor,
            "reason": self.reason,
            "due_by": self.due_by,
        }


@dataclass
class PaymentSession:
    session_id: str
    reference: str
    amount_minor: int
    currency: str
    callback_url: str
    return_url: str
    description: str = ""  # what the shop says the buyer pays for ("Floodgate order 12: 1 x Nachtzug")
    statement_descriptor: str = ""  # what the buyer's card statement will say (the shop's name)
    state: str = "pending"  # pending -> authorized | failed; authorized -> captured | voided
    reason: str = ""
    # Set before the latency wait, so a double submit cannot authorise twice.
    attempted: bool = False
    captures: int = 0  # accepted capture calls, repeats included
    voids: int = 0
    webhooks_sent: int = 0  # deliveries the receiver acknowledged with 2xx
    # key -> (refund id, amount): the same key is the same refund, however often it is asked for.
    refunds: dict[str, tuple[str, int]] = field(default_factory=dict)
    refund_calls: int = 0  # accepted refund calls, repeats included
    dispute: Dispute | None = None

    @property
    def refunded_minor(self) -> int:
        return sum(amount for _id, amount in self.refunds.values())

    def public(self) -> dict[str, object]:
        return {
            "session_id": self.session_id,
            "state": self.state,
            "reason": self.reason,
            "reference": self.reference,
            "amount_minor": self.amount_minor,
            "currency": self.currency,
            "captures": self.captures,
            "voids": self.voids,
            "webhooks_sent": self.webhooks_sent,
            "refunds": len(self.refunds),
            "refund_calls": self.refund_calls,
            "refunded_minor": self.refunded_minor,
            "dispute": self.dispute.public() if self.dispute else None,
        }


class Simulator:
    """The ASGI application: routes requests and owns the sessions and background deliveries."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.sessions: dict[str, PaymentSession] = {}
        # Strong references: the event loop keeps only weak ones to running tasks.
        self.tasks: set[asyncio.Task[None]] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.lifespan(receive, send)
        elif scope["type"] == "http":
            await self.http(scope, receive, send)
        elif scope["type"] == "websocket":
            await receive()
            await send({"type": "websocket.close", "code": 1003})

    async def lifespan(self, receive: Receive, send: Send) -> None:
        # Daphne does not speak lifespan; other servers (uvicorn, hypercorn) do.
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                log.info("provider simulator up: %s", self.config.tunables())
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def shutdown(self) -> None:
        """Cancel undelivered webhooks: the state is in memory, so they are lost like the sessions."""
        if self.tasks:
            log.warning("dropping %s pending webhook deliveries at shutdown", len(self.tasks))
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]
        try:
            body = await read_body(receive)
            response = await self.route(scope["method"], path, dict(scope_headers(scope)), body)
        except HttpError as exc:
            response = error_page(exc) if path.startswith("/pay/") else error_json(exc)
        except Exception:
            log.exception("provider simulator failed on %s %s", scope["method"], path)
            response = error_json(HttpError(500, "internal", "the simulator failed; see its log"))
        await send(
            {
                "type": "http.response.start",
                "status": response.status,
                "headers": [
                    (b"content-type", response.content_type.encode()),
                    (b"content-length", str(len(response.body)).encode()),
                    (b"cache-control", b"no-store"),
                    *((k.encode(), v.encode()) for k, v in response.headers),
                ],
            }
        )
        await send({"type": "http.response.body", "body": response.body})

    async def route(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Response:
        if path == "/healthz":
            allow(method, "GET")
            return Response(200, b"ok", "text/plain; charset=utf-8")
        if path.startswith("/api/"):
            self.authorize(headers)
            if path == "/api/sessions":
                allow(method, "POST")
                return self.create_session(parse_json(body))
            if path == "/api/config":
                allow(method, "GET", "POST")
                return self.configure(parse_json(body) if method == "POST" else {})
            if match := SESSION_PATH.fullmatch(path):
                session_id, action = match.groups()
                allow(method, "POST" if action else "GET")
                session = self.sessions.get(session_id)
                if session is None:
                    raise HttpError(404, "not_found", f"no session {session_id}")
                if action == "refund":
                    return self.refund(session, parse_json(body))
                if action == "dispute":
                    return self.open_dispute(session, parse_json(body))
                if action == "dispute/close":
                    return self.close_dispute(session, parse_json(body))
                return self.settle(session, action) if action else json_response(200, session.public())
        elif match := PAY_PATH.fullmatch(path):
            allow(method, "GET", "POST")
            session = self.sessions.get(match.group(1))
            if session is None:
                raise HttpError(404, "not_found", "This payment session does not exist or has expired.")
            return payment_page(session) if method == "GET" else await self.pay(session, body)
        raise HttpError(404, "not_found", f"nothing at {path}")

    def authorize(self, headers: dict[str, str]) -> None:
        given = headers.get("authorization", "").encode()
        if not secrets.compare_digest(given, f"Bearer {self.config.secret}".encode()):
            raise HttpError(401, "unauthorized", "missing or wrong API key (Authorization: Bearer <secret>)")

    def create_session(self, data: dict[str, object]) -> Response:
        reference, amount, currency = data.get("reference"), data.get("amount_minor"), data.get("currency")
        if not isinstance(reference, str) or not 1 <= len(reference) <= 200 or not reference.isprintable():
            raise HttpError(
                400, "invalid_request", "reference must be a printable string of 1 to 200 characters"
            )
        if isinstance(amount, bool) or not isinstance(amount, int) or not 0 < amount <= 10**12:
            raise HttpError(400, "invalid_request", "amount_minor must be a positive integer (minor units)")
        if not isinstance(currency, str) or not CURRENCY.fullmatch(currency):
            raise HttpError(400, "invalid_request", "currency must be a three-letter ISO code such as EUR")
        urls = {name: data.get(name) for name in ("callback_url", "return_url")}
        for name, url in urls.items():
            if not isinstance(url, str) or not is_web_url(url):
                raise HttpError(400, "invalid_request", f"{name} must be an absolute http(s) URL")
        description = data.get("description", "")
        if not isinstance(description, str) or len(description) > 200 or not description.isprintable():
            raise HttpError(
                400, "invalid_request", "description must be printable text of at most 200 characters"
            )
        descriptor = data.get("statement_descriptor", "")
        if not isinstance(descriptor, str) or not STATEMENT_DESCRIPTOR.fullmatch(descriptor):
            raise HttpError(
                400,
                "invalid_request",
                "statement_descriptor must be at most 22 Latin capitals, digits, spaces or . , & + / -",
            )
        session = PaymentSession(
            session_id=f"ses_{secrets.token_hex(12)}",
            description=description,
            statement_descriptor=descriptor,
            reference=reference,
            amount_minor=amount,
            currency=currency,
            callback_url=str(urls["callback_url"]),
            return_url=str(urls["return_url"]),
        )
        self.sessions[session.session_id] = session
        while len(self.sessions) > MAX_SESSIONS:
            del self.sessions[next(iter(self.sessions))]
        redirect_url = f"{self.config.public_url}/pay/{session.session_id}"
        return json_response(201, {"session_id": session.session_id, "redirect_url": redirect_url})

    def configure(self, data: dict[str, object]) -> Response:
        unknown = set(data) - set(TUNABLES)
        if unknown:
            raise HttpError(400, "invalid_request", f"unknown settings: {', '.join(sorted(unknown))}")
        try:
            changes = {name: checked(name, value) for name, value in data.items()}
        except ValueError as exc:
            raise HttpError(400, "invalid_request", str(exc)) from None
        for name, value in changes.items():  # validated first, so a bad request changes nothing
            setattr(self.config, name, value)
        if changes:
            log.info("configuration changed: %s", changes)
        return json_response(200, self.config.tunables())

    def settle(self, session: PaymentSession, action: str) -> Response:
        target = SETTLEMENTS[action].get(session.state)
        if target is None:
            raise HttpError(409, "conflict", f"cannot {action} a session that is {session.state}")
        session.state = target
        if action == "capture":
            session.captures += 1
        else:
            session.voids += 1
        return json_response(200, {"state": session.state})

    def refund(self, session: PaymentSession, data: dict[str, object]) -> Response:
        """Refund part of a capture once per key; a signed refund.succeeded webhook follows a new one."""
        key, amount, currency = data.get("key"), data.get("amount_minor"), data.get("currency")
        if not isinstance(key, str) or not REFUND_KEY.fullmatch(key):
            raise HttpError(400, "invalid_request", "key must be 1 to 200 printable ASCII characters")
        if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
            raise HttpError(400, "invalid_request", "amount_minor must be a positive integer (minor units)")
        if currency != session.currency:
            raise HttpError(400, "invalid_request", f"currency must be the session's, {session.currency}")
        known = session.refunds.get(key)
        if known is not None:
            if known[1] != amount:
                raise HttpError(409, "conflict", f"refund key {key} was used for {known[1]}, not {amount}")
            session.refund_calls += 1
            return json_response(200, {"refund_id": known[0], "state": "succeeded"})
        if session.state != "captured":
            raise HttpError(409, "conflict", f"cannot refund a session that is {session.state}")
        if session.refunded_minor + amount > session.amount_minor:
            left = session.amount_minor - session.refunded_minor
            raise HttpError(409, "conflict", f"cannot refund {amount}: {left} is left of the capture")
        refund_id = f"re_{secrets.token_hex(12)}"
        session.refunds[key] = (refund_id, amount)
        session.refund_calls += 1
        event = {
            "id": f"evt_{secrets.token_hex(12)}",
            "type": "refund.succeeded",
            "session_id": session.session_id,
            "reference": key,
            # This refund's amount (Stripe's charge.refunded says the charge's total instead).
            "amount_minor": amount,
            "currency": session.currency,
            "reason": "",
            "refund_id": refund_id,
            "created": int(time.time()),
        }
        self.spawn(self.deliver(session, json.dumps(event, separators=(",", ":")).encode()))
        return json_response(201, {"refund_id": refund_id, "state": "succeeded"})

    def open_dispute(self, session: PaymentSession, data: dict[str, object]) -> Response:
        """The buyer's bank disputes a captured session (test mode: asked by the caller); a signed
        dispute.opened webhook follows. Body: reason, amount_minor, evidence_days (all optional)."""
        reason = data.get("reason", "fraudulent")
        amount = data.get("amount_minor", session.amount_minor)
        days = data.get("evidence_days", EVIDENCE_DAYS)
        if not isinstance(reason, str) or reason not in DISPUTE_REASONS:
            raise HttpError(
                400, "invalid_request", f"reason must be one of {', '.join(sorted(DISPUTE_REASONS))}"
            )
        if isinstance(amount, bool) or not isinstance(amount, int) or not 0 < amount <= session.amount_minor:
            raise HttpError(400, "invalid_request", "amount_minor must be positive and at most the session's")
        if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= 60:
            raise HttpError(400, "invalid_request", "evidence_days must be a whole number from 1 to 60")
        if session.state != "captured":
            raise HttpError(
                409, "conflict", f"only a captured session can be disputed; this one is {session.state}"
            )
        if session.dispute is not None:
            raise HttpError(
                409, "conflict", f"this session is disputed already ({session.dispute.dispute_id})"
            )
        session.dispute = Dispute(
            dispute_id=f"dp_{secrets.token_hex(12)}",
            amount_minor=amount,
            reason=reason,
            due_by=int(time.time()) + days * 86400,
        )
        self.spawn(self.deliver(session, dispute_event(session, session.dispute, "dispute.opened")))
        return json_response(201, session.dispute.public())

    def close_dispute(self, session: PaymentSession, data: dict[str, object]) -> Response:
        """Decide the session's dispute: body {"outcome": "won" | "lost"}; a signed dispute.closed
        webhook follows. The same outcome again is answered without another webhook."""
        outcome = data.get("outcome")
        if not isinstance(outcome, str) or outcome not in DISPUTE_OUTCOMES:
            raise HttpError(400, "invalid_request", "outcome must be won or lost")
        dispute = session.dispute
        if dispute is None:
            raise HttpError(409, "conflict", "this session has no dispute to close")
        if dispute.state == outcome:
            return json_response(200, dispute.public())
        if dispute.state in DISPUTE_OUTCOMES:
            raise HttpError(409, "conflict", f"the dispute is {dispute.state} already")
        dispute.state = outcome
        self.spawn(self.deliver(session, dispute_event(session, dispute, "dispute.closed")))
        return json_response(200, dispute.public())

    async def pay(self, session: PaymentSession, body: bytes) -> Response:
        form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        action = (form.get("action") or [""])[0]
        if action not in ("pay", "decline"):
            raise HttpError(400, "invalid_request", "The form must say action=pay or action=decline.")
        if not session.attempted:
            session.attempted = True
            # Shielded: a browser that gives up mid-wait must not leave the session half decided.
            await asyncio.shield(self.spawn(self.authorise(session, decline=action == "decline")))
        return Response(303, b"", "text/plain", [("location", session.return_url)])

    async def authorise(self, session: PaymentSession, *, decline: bool) -> None:
        await asyncio.sleep(self.config.latency_ms / 1000)
        if decline:
            session.state, session.reason = "failed", "card_declined"
        elif random.random() < self.config.failure_rate:
            session.state, session.reason = "failed", random.choice(RANDOM_DECLINE_REASONS)
        else:
            session.state = "authorized"
        event = {
            "id": f"evt_{secrets.token_hex(12)}",
            "type": f"payment.{session.state}",
            "session_id": session.session_id,
            "reference": session.reference,
            "amount_minor": session.amount_minor,
            "currency": session.currency,
            "reason": session.reason,
            "created": int(time.time()),
        }
        log.info("session %s %s %s", session.session_id, session.state, session.reason or "-")
        # Not awaited: the buyer's redirect never waits for the merchant's webhook endpoint.
        self.spawn(self.deliver(session, json.dumps(event, separators=(",", ":")).encode()))

    def spawn(self, coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def deliver(self, session: PaymentSession, body: bytes) -> None:
        copies, late = self.config.duplicates, self.config.late_seconds
        await asyncio.sleep(late)
        # trust_env off: a provider calls the merchant directly, whatever proxy this machine sets.
        async with httpx.AsyncClient(timeout=DELIVERY_TIMEOUT, trust_env=False) as client:
            await asyncio.gather(*(self.deliver_once(client, session, body) for _ in range(copies)))

    async def deliver_once(self, client: httpx.AsyncClient, session: PaymentSession, body: bytes) -> None:
        """POST one copy, retrying connection errors and 5xx with exponential backoff."""
        for attempt in range(1, DELIVERY_ATTEMPTS + 1):
            headers = {
                "content-type": "application/json",
                "user-agent": "floodgate-provider-sim",
                SIGNATURE_HEADER: sign(secret=self.config.webhook_secret, body=body),  # signed per attempt
            }
            try:
                response = await client.post(session.callback_url, content=body, headers=headers)
            except httpx.HTTPError as exc:
                outcome = type(exc).__name__
            else:
                if response.is_success:
                    session.webhooks_sent += 1
                    return
                if response.status_code < 500:
                    log.warning("webhook for %s refused with %s", session.session_id, response.status_code)
                    return
                outcome = f"HTTP {response.status_code}"
            if attempt < DELIVERY_ATTEMPTS:
                await asyncio.sleep(0.5 * 2 ** (attempt - 1) * random.uniform(0.8, 1.2))
        log.warning("webhook for %s given up after %s attempts: %s", session.session_id, attempt, outcome)


def dispute_event(session: PaymentSession, dispute: Dispute, kind: str) -> bytes:
    """A signed-to-be dispute webhook's body: the dispute's facts and the session's reference."""
    event = {
        "id": f"evt_{secrets.token_hex(12)}",
        "type": kind,
        "session_id": session.session_id,
        "reference": session.reference,
        "amount_minor": dispute.amount_minor,
        "currency": session.currency,
        "reason": dispute.reason,
        "dispute_id": dispute.dispute_id,
        "state": dispute.state,
        "due_by": dispute.due_by,
        "created": int(time.time()),
    }
    return json.dumps(event, separators=(",", ":")).encode()


async def read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise HttpError(400, "disconnected", "the client went away")
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise HttpError(413, "too_large", f"the body is over {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def scope_headers(scope: Scope) -> list[tuple[str, str]]:
    return [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope["headers"]]


def allow(method: str, *allowed: str) -> None:
    if method not in allowed:
        raise HttpError(405, "method_not_allowed", f"use {' or '.join(allowed)}")


def parse_json(body: bytes) -> dict[str, object]:
    try:
        data = json.loads(body)
    except ValueError:  # UnicodeDecodeError included
        raise HttpError(400, "invalid_json", "the body is not valid JSON") from None
    if not isinstance(data, dict):
        raise HttpError(400, "invalid_json", "the body must be a JSON object")
    return data


def is_web_url(url: str) -> bool:
    if len(url) > 2048:
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def json_response(status: int, data: Mapping[str, object]) -> Response:
    return Response(status, json.dumps(data).encode())


def error_json(exc: HttpError) -> Response:
    headers = [("www-authenticate", "Bearer")] if exc.status == 401 else []
    return Response(
        exc.status, json.dumps({"error": exc.error, "detail": exc.detail}).encode(), headers=headers
    )


def format_amount(amount_minor: int, currency: str) -> str:
    """Format minor units as e.g. "1,234.50 EUR" (or "1,234 JPY")."""
    exponent = CURRENCY_EXPONENTS.get(currency, 2)
    if exponent == 0:
        return f"{amount_minor:,} {currency}"
    major, minor = divmod(amount_minor, 10**exponent)
    return f"{major:,}.{minor:0{exponent}d} {currency}"


# A card in the brand's blue, inline: the page needs no second request for its tab icon.
ICON = (
    '<link rel="icon" href="data:image/svg+xml,'
    "%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 32 32'%3E"
    "%3Crect width='32' height='32' rx='7' fill='%231d5bd8'/%3E"
    "%3Cpath d='M7 12h18v11H7z M7 16h18' stroke='%23fff' stroke-width='2.5' fill='none'/%3E%3C/svg%3E\">"
)

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} - Floodgate Pay (simulated)</title>
{icon}
<style>
  * {{ box-sizing: border-box; }}
  body {{ margin: 0; min-height: 100vh; display: flex; align-items: center; justify-content: center;
         font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
         background: #f1f3f6; color: #1b1f24; padding: 16px; }}
  main {{ width: 100%; max-width: 420px; background: #fff; border-radius: 14px; padding: 28px 24px;
         box-shadow: 0 6px 24px rgba(20, 30, 50, .10); }}
  .brand {{ font-size: 13px; letter-spacing: .08em; text-transform: uppercase; color: #5b6573; margin: 0; }}
  h1 {{ font-size: 22px; margin: 4px 0 20px; }}
  dl {{ margin: 0 0 20px; display: grid; grid-template-columns: auto 1fr; gap: 6px 16px; }}
  dt {{ color: #5b6573; }}
  dd {{ margin: 0; text-align: right; font-weight: 600; overflow-wrap: anywhere; }}
  .amount {{ font-size: 20px; }}
  label {{ display: block; font-size: 14px; color: #5b6573; margin-bottom: 6px; }}
  input {{ width: 100%; font: inherit; font-variant-numeric: tabular-nums; padding: 12px;
          border: 1px solid #c9d0da; border-radius: 8px; margin-bottom: 20px; }}
  .buttons {{ display: flex; gap: 12px; }}
  button, a.button {{ flex: 1; font: inherit; font-weight: 600; padding: 14px; border-radius: 8px;
          border: 0; cursor: pointer; text-align: center; text-decoration: none; }}
  #pay, a.button {{ background: #1d5bd8; color: #fff; }}
  #decline {{ background: #eef0f3; color: #9b1c1c; }}
  .reference {{ font-size: 12px; color: #5b6573; overflow-wrap: anywhere; margin: 0 0 16px; }}
  .note {{ font-size: 13px; color: #5b6573; margin: 16px 0 0; text-align: center; }}
</style>
</head>
<body>
<main>
<p class="brand">Floodgate Pay &middot; test mode</p>
{content}
</main>
</body>
</html>
"""


def page(status: int, title: str, content: str) -> Response:
    body = PAGE.format(title=html.escape(title), icon=ICON, content=content).encode()
    headers = [("x-frame-options", "DENY"), ("referrer-policy", "no-referrer")]
    return Response(status, body, "text/html; charset=utf-8", headers)


def payment_page(session: PaymentSession) -> Response:
    amount = html.escape(format_amount(session.amount_minor, session.currency))
    # What the buyer pays for leads; the reference is the shop's, for support, in small print.
    paying_for = f"<dt>For</dt><dd>{html.escape(session.description)}</dd>" if session.description else ""
    if session.statement_descriptor:
        paying_for += (
            f'<dt>On your statement</dt><dd id="statement">{html.escape(session.statement_descriptor)}</dd>'
        )
    summary = (
        f'<dl>{paying_for}<dt>Amount</dt><dd class="amount">{amount}</dd></dl>'
        f'<p class="reference">Reference {html.escape(session.reference)}</p>'
    )
    if session.state != "pending":
        return page(
            200,
            "Payment already processed",
            f"<h1>This payment is {html.escape(session.state)}</h1>{summary}"
            f'<a class="button" href="{html.escape(session.return_url)}">Return to the shop</a>',
        )
    return page(
        200,
        f"Pay {format_amount(session.amount_minor, session.currency)}",
        f"<h1>Complete your payment</h1>{summary}"
        '<form method="post">'
        '<label for="card">Card number</label>'
        f'<input id="card" name="card" inputmode="numeric" autocomplete="cc-number" value="{TEST_CARD}">'
        '<div class="buttons">'
        '<button type="submit" id="pay" name="action" value="pay">Pay</button>'
        '<button type="submit" id="decline" name="action" value="decline">Decline</button>'
        "</div></form>"
        '<p class="note">Simulated provider: no money moves.</p>',
    )


def error_page(exc: HttpError) -> Response:
    titles = {404: "Payment not found", 405: "Not allowed", 413: "Too large"}
    title = titles.get(exc.status, "Bad request")
    return page(exc.status, title, f"<h1>{html.escape(title)}</h1><p>{html.escape(exc.detail)}</p>")


app = Simulator(Config.from_env(os.environ))
