"""What the saga's tests share: sales waiting for their payment's authorisation to be applied, a
buyer driving the saga over HTTP against the provider's process, and a push service on localhost."""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import importlib
import json
import os
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import http_ece
import httpx
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from cryptography.x509.oid import NameOID
from pytest_django import Settings

from checkout import refunds
from checkout import services as checkout
from checkout.models import Order, Payment, PaymentState, Refund
from checkout.providers.base import WebhookEvent as ProviderEvent
from holds import services as holds
from holds.models import Hold
from shop.models import ApiToken, Drop, Variant
from tests.conftest import PROVIDER_SECRET, STRIPE_WEBHOOK_SECRET
from tests.factories import make_buyer


@dataclass(frozen=True)
class Sale:
    hold: int
    order: int
    payment: int
    event: int


def pending_sales(drop: Drop, buyers: list[int], *, variant: Variant | None = None) -> list[Sale]:
    """A hold (of `variant`; None: the drop's only one), an order, a pending payment and its
    recorded authorisation per buyer."""
    sales = []
    for buyer in buyers:
        hold = holds.reserve(drop=drop, buyer_id=buyer, quantity=1, idempotency_key="k", variant=variant).hold
        order = Order.objects.create(
            hold=hold, buyer_id=buyer, drop=drop, quantity=1, amount_minor=4900, currency="EUR"
        )
        session = f"ses_{uuid.uuid4().hex}"
        payment = Payment.objects.create(
            order=order,
            provider="simulated",
            session_id=session,
            state=PaymentState.PENDING,
            amount_minor=4900,
            currency="EUR",
        )
        payload: dict[str, Any] = {  # the provider's JSON
            "id": f"evt_{session}",
            "type": "payment.authorized",
            "session_id": session,
            "reference": str(payment.reference),
            "amount_minor": 4900,
            "currency": "EUR",
            "reason": "",
        }
        event_pk = checkout.record_webhook(
            provider_name="simulated",
            event=ProviderEvent(
                event_id=payload["id"],
                type="payment.authorized",
                session_id=session,
                reference=payload["reference"],
                amount_minor=4900,
                currency="EUR",
            ),
            payload=payload,
        )
        assert event_pk is not None
        sales.append(Sale(hold=hold.pk, order=order.pk, payment=payment.pk, event=event_pk))
    return sales


def buyer_token(name: str) -> str:
    user = make_buyer(name)
    token = f"token-{name}-{uuid.uuid4().hex[:6]}"
    ApiToken.objects.create(user=user, digest=ApiToken.digest_of(token))
    return token


def api(base: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=10)


def provider_config(provider: str, **config: object) -> None:
    answer = httpx.post(
        f"{provider}/api/config", json=config, headers={"Authorization": f"Bearer {PROVIDER_SECRET}"}
    )
    answer.raise_for_status()


def provider_session(provider: str, session_id: str | None) -> dict:
    assert session_id, "the payment has no session at the provider"
    headers = {"Authorization": f"Bearer {PROVIDER_SECRET}"}
    return httpx.get(f"{provider}/api/sessions/{session_id}", headers=headers).json()


def reserve_and_start_paying(base: str, token: str, slug: str) -> tuple[int, dict]:
    with api(base, token) as client:
        hold = client.post(f"/api/drops/{slug}/holds", json={"quantity": 1}, headers={"Idempotency-Key": "k"})
        assert hold.status_code == 201, hold.text
        started = client.post(f"/api/holds/{hold.json()['id']}/payment")
        assert started.status_code == 202, started.text
    return hold.json()["id"], started.json()


def pay_at_provider(redirect_url: str, action: str = "pay") -> httpx.Response:
    answer = httpx.post(redirect_url, data={"action": action}, follow_redirects=False, timeout=10)
    assert answer.status_code == 303, answer.text
    return answer


def wait_until(check: Callable[[], bool], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def confirmed_order(
    drop: Drop, *, quantity: int = 2, captured: bool = True, tax_minor: int = 0, tax_rate: str = "0"
) -> Order:
    """An order sold through the saga (its authorisation applied by process_event); its payment
    marked captured, as settle_payment leaves it, unless captured=False."""
    buyer = make_buyer()
    hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=quantity, idempotency_key="k").hold
    return paid(hold, captured=captured, tax_minor=tax_minor, tax_rate=tax_rate)


def paid(hold: Hold, *, captured: bool = True, tax_minor: int = 0, tax_rate: str = "0") -> Order:
    """confirmed_order for a hold the buyer has already (a waiting room's, an offer's)."""
    drop, quantity = hold.drop, hold.quantity
    order = Order.objects.create(
        hold=hold,
        buyer_id=hold.buyer_id,
        drop=drop,
        quantity=quantity,
        amount_minor=1000 * quantity,
        currency="EUR",
        tax_minor=tax_minor,
        tax_rate=Decimal(tax_rate),
    )
    session = f"ses_{uuid.uuid4().hex}"
    payment = Payment.objects.create(
        order=order,
        provider="simulated",
        session_id=session,
        state="pending",
        amount_minor=order.amount_minor,
        currency="EUR",
    )
    event = ProviderEvent(
        event_id=f"evt_{session}",
        type="payment.authorized",
        session_id=session,
        reference=str(payment.reference),
        amount_minor=order.amount_minor,
        currency="EUR",
    )
    event_pk = checkout.record_webhook(provider_name="simulated", event=event, payload={"id": event.event_id})
    assert event_pk is not None and checkout.process_event(event_pk=event_pk) == "confirmed"
    if captured:
        Payment.objects.filter(pk=payment.pk).update(state=PaymentState.CAPTURED)
    order.refresh_from_db()
    return order


def accepted(refund: Refund) -> str:
    """Record the provider's yes the way send_refund does, for tests about our side of a refund."""
    return refunds._record(refund, "succeeded", f"re_{refund.pk}", "")


def stripe_signature(body: bytes, *, secret: str = STRIPE_WEBHOOK_SECRET, at: int | None = None) -> str:
    """Stripe's documented scheme: t=<unix>,v1=hex(HMAC-SHA256(secret, "<t>.<body>"))."""
    t = int(time.time()) if at is None else at
    mac = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


def stripe_event(kind: str, thing: dict, *, event_id: str | None = None) -> bytes:
    """An event as Stripe's API reference shows it (object "event", the thing under data.object)."""
    return json.dumps(
        {
            "id": event_id or f"evt_{uuid.uuid4().hex[:24]}",
            "object": "event",
            "api_version": "2024-06-20",
            "created": int(time.time()),
            "data": {"object": thing},
            "livemode": False,
            "pending_webhooks": 1,
            "request": {"id": None, "idempotency_key": None},
            "type": kind,
        }
    ).encode()


@contextmanager
def stripe_api_at(settings: Settings, base: str) -> Iterator[None]:
    """STRIPE_API_BASE at `base` in this process, its URLs loaded again for it (config/urls.py mounts
    the card fallback only off Stripe's own API), and back as they were after."""
    from django.urls import clear_url_caches

    before = settings.STRIPE_API_BASE
    settings.STRIPE_API_BASE = base
    importlib.reload(importlib.import_module("config.urls"))
    clear_url_caches()
    try:
        yield
    finally:
        settings.STRIPE_API_BASE = before
        importlib.reload(importlib.import_module("config.urls"))
        clear_url_caches()


# A push service on localhost ------------------------------------------------------------------
#
# No browser push service is reachable here, so the tests run one: a real HTTPS server in a
# thread (a self-signed certificate for localhost that the sender is told to trust through
# REQUESTS_CA_BUNDLE), holding each subscriber's own private key and auth secret as a browser
# would. It checks the VAPID JWT's ES256 signature against the key in the request (RFC 8292) and
# decrypts the aes128gcm body with the subscriber's keys (RFC 8291), so nothing it records was
# taken on trust.


@dataclass
class Subscriber:
    """A browser's side of a subscription: its ECDH key pair and auth secret."""

    token: str
    endpoint: str
    private_key: object
    auth: bytes

    def subscription(self) -> dict[str, Any]:
        """What the browser's PushSubscription.toJSON() would give the page."""

        point = self.private_key.public_key().public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)  # type: ignore[attr-defined]
        return {"endpoint": self.endpoint, "keys": {"p256dh": _b64(point), "auth": _b64(self.auth)}}


@dataclass(frozen=True)
class Delivery:
    token: str
    notification: dict[str, Any]  # the decrypted body
    claims: dict[str, Any]  # the verified VAPID JWT's
    vapid_key: str  # the k= of the Authorization header: the shop's public key
    headers: dict[str, str]  # their names in lower case


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class PushService:
    """The local push service: `subscriber()` makes a browser, `deliveries` what arrived (decrypted),
    `gone` the tokens answered 404 or 410, `refused` requests whose signature or encryption failed."""

    def __init__(self, folder: object) -> None:

        folder = Path(str(folder))
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256())
        )
        self.cert_path = folder / "push-service.pem"
        self.cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path = folder / "push-service.key"
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        self.subscribers: dict[str, Subscriber] = {}
        self.deliveries: list[Delivery] = []
        self.refused: list[str] = []
        self.gone: dict[str, int] = {}  # token -> 404 or 410: a subscription the service forgot
        self.lock = threading.Lock()
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                token = self.path.rsplit("/", 1)[-1]
                status = service.receive(token, {k.lower(): v for k, v in self.headers.items()}, body)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert_path, key_path)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.origin = f"https://localhost:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def subscriber(self) -> Subscriber:

        token = uuid.uuid4().hex
        found = Subscriber(
            token=token,
            endpoint=f"{self.origin}/wpush/v2/{token}",
            private_key=ec.generate_private_key(ec.SECP256R1()),
            auth=os.urandom(16),
        )
        self.subscribers[token] = found
        return found

    def receive(self, token: str, headers: dict[str, str], body: bytes) -> int:
        """Check and decrypt one push as a browser's push service and the browser would: 201 taken,
        410 a subscription it forgot, 400/401 a push it could not read or trust."""

        subscriber = self.subscribers.get(token)
        if subscriber is None:
            return 404
        if token in self.gone:
            return self.gone[token]
        try:
            scheme, _, params = headers["authorization"].partition(" ")
            fields = dict(part.strip().split("=", 1) for part in params.split(","))
            jwt, vapid_key = fields["t"], fields["k"]
            signed, _, signature = jwt.rpartition(".")
            raw = _unb64(signature)
            public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), _unb64(vapid_key))
            public.verify(
                encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big")),
                signed.encode(),
                ec.ECDSA(hashes.SHA256()),
            )
            claims = json.loads(_unb64(signed.split(".")[1]))
            assert scheme == "vapid" and claims["aud"] == self.origin and claims["exp"] > time.time()
            assert headers["content-encoding"] == "aes128gcm" and int(headers["ttl"]) > 0
            plain = http_ece.decrypt(
                body, private_key=subscriber.private_key, auth_secret=subscriber.auth, version="aes128gcm"
            )
        except (KeyError, ValueError, AssertionError, InvalidSignature) as error:
            with self.lock:
                self.refused.append(f"{token}: {error!r}")
            return 401 if isinstance(error, InvalidSignature) else 400
        delivery = Delivery(token, json.loads(plain), claims, vapid_key, headers)
        with self.lock:
            self.deliveries.append(delivery)
        return 201

    def to(self, subscriber: Subscriber) -> list[Delivery]:
        with self.lock:
            return [d for d in self.deliveries if d.token == subscriber.token]
