"""A proxy in front of localstripe that honours Idempotency-Key as Stripe documents it.

localstripe ignores the header, so on its own it cannot show that a retried request charges once.
This proxy keeps, per API key and Idempotency-Key, the first POST's body and answer:

- the same key with the same body is answered the stored answer, with `Idempotent-Replayed: true`,
  without reaching localstripe again;
- the same key with another body is refused, 400 `idempotency_error`, and reaches nothing;
- the same key while its first request is still running is refused, 409 `idempotency_key_in_use`
  (Stripe-Should-Retry: true), and no answer is stored for the refused one;
- GET and DELETE are idempotent anyway: their keys are ignored, as Stripe ignores them.

It can also lose answers: `lose(path)` forwards the next POST to that path (so localstripe acts on
it and the answer is stored) and then closes the connection without answering, as a network cut
after Stripe did the work would. With `honour_keys=False` it only loses answers: the control.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

from devtools.ports import free_port

HOP_BY_HOP = {"host", "content-length", "connection", "keep-alive", "transfer-encoding"}


@dataclass(frozen=True)
class Stored:
    body: bytes  # the request's body, compared with a retry's
    status: int
    answer: bytes


@dataclass
class Seen:
    method: str
    path: str
    key: str
    outcome: str  # "forwarded", "replayed", "mismatch", "in_use", "lost"


@dataclass
class State:
    upstream: str
    honour_keys: bool = True
    stored: dict[tuple[str, str], Stored] = field(default_factory=dict)
    running: set[tuple[str, str]] = field(default_factory=set)
    to_lose: list[str] = field(default_factory=list)  # paths whose next POST answer is dropped
    seen: list[Seen] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def outcomes(self, method: str, path: str) -> list[str]:
        return [s.outcome for s in self.seen if (s.method, s.path) == (method, path)]


class KeyedReplay:
    """The running proxy: its address, and what it saw."""

    def __init__(self, state: State, url: str) -> None:
        self.state, self.url = state, url

    def lose(self, path: str) -> None:
        """Drop the answer to the next POST to path (after localstripe acted on it)."""
        with self.state.lock:
            self.state.to_lose.append(path)

    def outcomes(self, method: str, path: str) -> list[str]:
        return self.state.outcomes(method, path)


def handler_for(state: State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self.forward(self.body(), key="")

        def do_DELETE(self) -> None:
            self.forward(self.body(), key="")

        def do_POST(self) -> None:
            body = self.body()
            key = self.headers.get("Idempotency-Key") or ""
            if not key or not state.honour_keys:
                self.forward(body, key=key)
                return
            scope = (self.headers.get("Authorization") or "", key)
            with state.lock:
                stored = state.stored.get(scope)
                busy = scope in state.running
                if stored is None and not busy:
                    state.running.add(scope)
            if stored is not None:
                if stored.body != body:
                    self.record(key, "mismatch")
                    self.answer(400, idempotency_error(key), replayed=False)
                else:
                    self.record(key, "replayed")
                    self.answer(stored.status, stored.answer, replayed=True)
                return
            if busy:
                self.record(key, "in_use")
                self.answer(409, key_in_use(key), replayed=False, retry=True)
                return
            try:
                self.forward(body, key=key, scope=scope)
            finally:
                with state.lock:
                    state.running.discard(scope)

        def body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("content-length") or 0))

        def forward(self, body: bytes, *, key: str, scope: tuple[str, str] | None = None) -> None:
            upstream = httpx.request(
                self.command,
                state.upstream + self.path,
                content=body,
                headers={k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP},
                timeout=30,
            )
            with state.lock:
                if scope is not None:  # Stripe keeps the answer of a request it began to run
                    state.stored[scope] = Stored(body, upstream.status_code, upstream.content)
                lose = self.command == "POST" and self.path in state.to_lose
                if lose:
                    state.to_lose.remove(self.path)
            if lose:
                self.record(key, "lost")
                self.close_connection = True  # no answer: the client sees the connection end
                return
            self.record(key, "forwarded")
            self.answer(upstream.status_code, upstream.content, replayed=False)

        def record(self, key: str, outcome: str) -> None:
            with state.lock:
                state.seen.append(Seen(self.command, self.path, key, outcome))

        def answer(self, status: int, body: bytes, *, replayed: bool, retry: bool = False) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            if replayed:
                self.send_header("Idempotent-Replayed", "true")
            if retry:
                self.send_header("Stripe-Should-Retry", "true")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


def idempotency_error(key: str) -> bytes:
    return httpx.Response(
        400,
        json={
            "error": {
                "type": "idempotency_error",
                "message": f"Keys for idempotent requests can only be used with the same parameters they "
                f"were first used with. Try using a key other than '{key}' if you meant to execute a "
                "different request.",
            }
        },
    ).content


def key_in_use(key: str) -> bytes:
    return httpx.Response(
        409,
        json={
            "error": {
                "type": "invalid_request_error",
                "code": "idempotency_key_in_use",
                "message": f"There is currently another in-progress request using the Idempotency-Key "
                f"'{key}'. Try again later.",
            }
        },
    ).content


@contextmanager
def keyed_replay(upstream: str, *, honour_keys: bool = True) -> Iterator[KeyedReplay]:
    """Run the proxy in front of upstream (localstripe) on a free port of this machine."""
    state = State(upstream=upstream.rstrip("/"), honour_keys=honour_keys)
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), handler_for(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield KeyedReplay(state, f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
        server.server_close()
