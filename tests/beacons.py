"""Real drand rounds, recorded, and a relay on localhost that serves them as api.drand.sh does.

The rounds are public data of the League of Entropy's chains, as the drand-verify package (PyPI,
0.2.1) gives them in its README's examples; the chains' hashes, public keys, genesis times and
periods are in admission/beacon.py (from the drand-client npm package's defaults, 1.4.2). This
machine cannot reach a drand relay: the tests serve these instead, over real HTTP.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from admission import beacon

# quicknet (bls-unchained-g1-rfc9380), round 657413, published 2023-09-15 11:00:03 UTC.
QUICKNET_ROUND = 657413
QUICKNET_SIGNATURE = (
    "b713718a38ae728dfd477991af2822e08d2f305e47718cef9f7848ce4050e7be41076862b98fad56e91a6b85b89cd97b"
)
QUICKNET_RANDOMNESS = "fc1873a13f3545aeade8401532ef5519920652eee6b0d2b19ca12643b87b3587"

# mainnet (pedersen-bls-chained), round 3311596: its signature covers the previous round's.
MAINNET_ROUND = 3311596
MAINNET_PREVIOUS_SIGNATURE = (
    "8ed588f2a7716fb1349e2d9803da5db0005e98a83783c353d4a08f183236a9ad91d70ddb01266f4b7c576983db464b43"
    "0e65680b9e0098552758afd6c1e6afcb77e3f62fe1b93d42d1cb63abbb2205512fe12fbf74ea9c5ac3b8f5c1e283a1d8"
)
MAINNET_SIGNATURE = (
    "a696b9409ababce45749c3a4ec369074453dd4a79967734e1390d969c8ad8d98897d217b9121e92c8ddebbddda8d92f9"
    "00e3bd6bf9deb166863b1a19390d743f82774001487594c5c09e581db7365f02b70a2c8cc41ce32446ef08e4890c4754"
)
MAINNET_RANDOMNESS = "647c07b2abbf7ff2afb4d670214f565e5cd9f9c91bfdcecb59a21f3c78d73920"


def forged(signature: str) -> str:
    """The same signature with its last hex digit changed: well-formed, and wrong."""
    return signature[:-1] + ("0" if signature[-1] != "0" else "1")


@dataclass
class Relay:
    """What the relay serves: {(chain hash, round): body}; anything else is 404, as for a round
    not published yet. `asked` records the paths requested."""

    url: str
    rounds: dict[tuple[str, int], dict[str, object]] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)

    def serve(self, chain: beacon.Chain, number: int, signature: str, previous: str = "") -> None:
        body: dict[str, object] = {"round": number, "signature": signature}
        if previous:
            body["previous_signature"] = previous
        self.rounds[(chain.hash, number)] = body


@contextmanager
def relay() -> Iterator[Relay]:
    """A drand HTTP relay on 127.0.0.1 (GET /<chain hash>/public/<round>) for the test's length."""
    served = Relay(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served.asked.append(self.path)
            parts = self.path.strip("/").split("/")
            body = None
            if len(parts) == 3 and parts[1] == "public" and parts[2].isdigit():
                body = served.rounds.get((parts[0], int(parts[2])))
            raw = json.dumps(body or {"error": "not found"}).encode()
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    served.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
