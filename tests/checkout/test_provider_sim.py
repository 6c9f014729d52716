"""The simulated provider as its own daphne process, spoken to through SimulatedProvider and raw HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from checkout.providers import get_provider, signing
from checkout.providers.base import BadWebhook, PermanentProviderError, ProviderError, WebhookEvent
from checkout.providers.simulated import SimulatedProvider
from devtools.ports import free_port
from tests.conftest import ROOT, start_process

pytestmark = pytest.mark.servers  # the simulated provider as a process

SECRET = "sim-secret-test"
AUTH = {"Authorization": f"Bearer {SECRET}"}
RETURN_URL = "http://shop.example/checkout/done?payment=17"


@dataclass
class Delivery:
    at: float
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """A real HTTP endpoint for webhooks that records what arrives."""

    url: str
    deliveries: list[Delivery] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)  # answers to give first, then 200
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def wait_for(self, n: int, timeout: float = 10) -> list[Delivery]:
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.deliveries) >= n, timeout), (
                f"{len(self.deliveries)} of {n} webhooks arrived"
            )
            return list(self.deliveries)


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    """A real daphne process serving devtools.provider_sim:app."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "PROVIDER_SECRET": SECRET,
        "PROVIDER_WEBHOOK_SECRET": SECRET,
        "PROVIDER_PUBLIC_URL": url,
        "PROVIDER_LATENCY_MS": "50",
        "PROVIDER_FAILURE_RATE": "0",
    }
    daphne = str(Path(sys.executable).parent / "daphne")
    process, log = start_process(
        f"provider-sim-{port}", [daphne, "-b", "127.0.0.1", "-p", str(port), "devtools.provider_sim:app"], env
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=0.5).text == "ok":
                break
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"the provider simulator did not start:\n{log.read_text()}")
        time.sleep(0.1)
    yield url
    process.terminate()
    process.wait(10)


@pytest.fixture
def sim(sim_url: str) -> str:
    """The simulator with the test defaults back in place."""
    reset = {"latency_ms": 50, "failure_rate": 0, "duplicates": 1, "late_seconds": 0}
    httpx.post(f"{sim_url}/api/config", json=reset, headers=AUTH).raise_for_status()
    return sim_url


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    port = free_port()
    box = Receiver(url=f"http://127.0.0.1:{port}/webhooks/payments")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with box.arrived:
                status = box.statuses.pop(0) if box.statuses else 200
                if status == 200:
                    box.deliveries.append(Delivery(time.monotonic(), dict(self.headers.items()), body))
                    box.arrived.notify_all()
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield box
    server.shutdown()
    server.server_close()


@pytest.fixture
def provider(sim: str, settings) -> SimulatedProvider:
    settings.PAYMENT_PROVIDER_URL = sim
    settings.PAYMENT_PROVIDER_SECRET = SECRET
    settings.PAYMENT_WEBHOOK_SECRET = SECRET
    return SimulatedProvider()


def configure(sim: str, **changes: float) -> dict[str, float]:
    response = httpx.post(f"{sim}/api/config", json=changes, headers=AUTH)
    assert response.status_code == 200, response.text
    return response.json()


def open_session(provider: SimulatedProvider, receiver: Receiver, reference: str = "order-17"):
    return provider.create_session(
        reference=reference,
        amount_minor=123456,
        currency="EUR",
        callback_url=receiver.url,
        return_url=RETURN_URL,
        description="Floodgate order 17: 2 x Nachtzug",
    )


def submit(redirect_url: str, action: str) -> httpx.Response:
    return httpx.post(redirect_url, data={"action": action, "card": "4242 4242 4242 4242"}, timeout=10)


def session_state(sim: str, session_id: str) -> dict[str, object]:
    return httpx.get(f"{sim}/api/sessions/{session_id}", headers=AUTH).json()


def parse(provider: SimulatedProvider, delivery: Delivery) -> WebhookEvent:
    return provider.parse_webhook(body=delivery.body, headers=delivery.headers)


def test_paying_redirects_to_the_shop_and_sends_one_signed_webhook(
    sim: str, provider: SimulatedProvider, receiver: Receiver
) -> None:
    # given
    session = open_session(provider, receiver)
    page = httpx.get(session.redirect_url)

    # when
    answer = submit(session.redirect_url, "pay")

    # then
    assert session.redirect_url == f"{sim}/pay/{session.session_id}"
    assert page.status_code == 200
    assert 'id="pay"' in page.text and 'id="decline"' in page.text
    assert "order-17" in page.text and "1,234.56 EUR" in page.text and "4242 4242 4242 4242" in page.text
    # it says whom and what the buyer pays, and has a tab icon of its own
    assert "<dt>For</dt><dd>Floodgate order 17: 2 x Nachtzug</dd>" in page.text
    assert '<link rel="icon" href="data:image/svg+xml,' in page.text
    assert answer.status_code == 303
    assert answer.headers["location"] == RETURN_URL
    [delivery] = receiver.wait_for(1)
    event = parse(provider, delivery)
    assert event.type == "payment.authorized"
    assert (event.session_id, event.reference, event.amount_minor, event.currency, event.reason) == (
        session.session_id,
        "order-17",
        123456,
        "EUR",
        "",
    )
    assert event.event_id.startswith("evt_")
    assert session_state(sim, session.session_id)["state"] == "authorized"


def test_duplicates_send_n_copies_of_one_event_all_signed(
    sim: str, provider: SimulatedProvider, receiver: Receiver
) -> None:
    # given
    configure(sim, duplicates=3)
    session = open_session(provider, receiver)

    # when
    submit(session.redirect_url, "pay")

    # then
    deliveries = receiver.wait_for(3)
    time.sleep(0.5)  # room for a fourth copy that must not come
    assert len(receiver.deliveries) == 3
    events = [parse(provider, delivery) for delivery in deliveries]
    assert len({event.event_id for event in events}) == 1
    assert {event.type for event in events} == {"payment.authorized"}
    assert session_state(sim, session.session_id)["webhooks_sent"] == 3


def test_late_seconds_holds_the_webhook_back(
    sim: str, provider: SimulatedProvider, receiver: Receiver
) -> None:
    # given
    configure(sim, late_seconds=1)
    session = open_session(provider, receiver)

    # when
    started = time.monotonic()
    answer = submit(session.redirect_url, "pay")
    answered = time.monotonic()

    # then
    assert answer.status_code == 303
    assert answered - started < 1, "the redirect must not wait for the webhook"
    [delivery] = receiver.wait_for(1)
    assert delivery.at - started >= 1
    assert parse(provider, delivery).type == "payment.authorized"


def test_declining_sends_payment_failed_and_nothing_can_be_captured(
    sim: str, provider: SimulatedProvider, receiver: Receiver
) -> None:
    # given
    session = open_session(provider, receiver)

    # when
    answer = submit(session.redirect_url, "decline")

    # then
    assert answer.status_code == 303
    event = parse(provider, receiver.wait_for(1)[0])
    assert (event.type, event.reason) == ("payment.failed", "card_declined")
    with pytest.raises(ProviderError, match="failed"):
        provider.capture(session_id=session.session_id)


def test_a_failure_rate_of_one_declines_a_pay(
    sim: str, provider: SimulatedProvider, receiver: Receiver
) -> None:
    configure(sim, failure_rate=1)
    session = open_session(provider, receiver)

    submit(session.redirect_url, "pay")

    event = parse(provider, receiver.wait_for(1)[0])
    assert event.type == "payment.failed"
    assert event.reason


def test_paying_twice_authorises_once(sim: str, provider: SimulatedProvider, receiver: Receiver) -> None:
    session = open_session(provider, receiver)

    first = submit(session.redirect_url, "pay")
    second = submit(session.redirect_url, "decline")

    assert (first.status_code, second.status_code) == (303, 303)
    assert second.headers["location"] == RETURN_URL
    receiver.wait_for(1)
    time.sleep(0.5)
    assert len(receiver.deliveries) == 1
    assert session_state(sim, session.session_id)["state"] == "authorized"


def test_capture_is_idempotent_and_a_captured_payment_cannot_be_voided(
    sim: str, provider: SimulatedProvider, receiver: Receiver
) -> None:
    # given
    session = open_session(provider, receiver)
    submit(session.redirect_url, "pay")
    receiver.wait_for(1)

    # when
    provider.capture(session_id=session.session_id)
    provider.capture(session_id=session.session_id)

    # then
    seen = session_state(sim, session.session_id)
    assert (seen["state"], seen["captures"]) == ("captured", 2)
    with pytest.raises(ProviderError, match="cannot void a session that is captured"):
        provider.void(session_id=session.session_id)


def test_a_refund_is_once_per_key_within_the_capture_and_sends_a_signed_refund_webhook(
    sim: str, provider: SimulatedProvider, receiver: Receiver
) -> None:
    # given: a captured session of 1,234.56 EUR
    session = open_session(provider, receiver)
    submit(session.redirect_url, "pay")
    receiver.wait_for(1)
    provider.capture(session_id=session.session_id)

    # when: one refund asked for twice, then the rest, then a cent more
    first = provider.refund(session_id=session.session_id, amount_minor=1000, currency="EUR", key="rf-1")
    again = provider.refund(session_id=session.session_id, amount_minor=1000, currency="EUR", key="rf-1")
    rest = provider.refund(session_id=session.session_id, amount_minor=122456, currency="EUR", key="rf-2")

    # then
    assert first == again and first.state == "succeeded" and rest.refund_id != first.refund_id
    with pytest.raises(PermanentProviderError, match="0 is left of the capture"):
        provider.refund(session_id=session.session_id, amount_minor=1, currency="EUR", key="rf-3")
    with pytest.raises(PermanentProviderError, match="was used for 1000"):
        provider.refund(session_id=session.session_id, amount_minor=999, currency="EUR", key="rf-1")
    with pytest.raises(PermanentProviderError, match="currency"):
        provider.refund(session_id=session.session_id, amount_minor=1, currency="USD", key="rf-4")
    seen = session_state(sim, session.session_id)
    assert (seen["refunds"], seen["refund_calls"], seen["refunded_minor"]) == (2, 3, 123456)
    refunds = [parse(provider, d) for d in receiver.wait_for(3)[1:]]  # one webhook per refund
    assert sorted((e.type, e.reference, e.amount_minor) for e in refunds) == [
        ("refund.succeeded", "rf-1", 1000),
        ("refund.succeeded", "rf-2", 122456),
    ]
    assert {e.refund_id for e in refunds} == {first.refund_id, rest.refund_id}
    time.sleep(0.3)
    assert len(receiver.deliveries) == 3  # the repeat sent none


def test_a_session_not_captured_cannot_be_refunded(
    sim: str, provider: SimulatedProvider, receiver: Receiver
) -> None:
    session = open_session(provider, receiver)
    submit(session.redirect_url, "pay")
    receiver.wait_for(1)
    with pytest.raises(PermanentProviderError, match="cannot refund a session that is authorized"):
        provider.refund(session_id=session.session_id, amount_minor=1, currency="EUR", key="rf-1")
    answer = httpx.post(f"{sim}/api/sessions/{session.session_id}/refund", content=b"[]", headers=AUTH)
    assert answer.status_code == 400
    assert session_state(sim, session.session_id)["refund_calls"] == 0


def test_void_is_idempotent_and_a_voided_payment_cannot_be_captured(
    sim: str, provider: SimulatedProvider, receiver: Receiver
) -> None:
    session = open_session(provider, receiver)
    submit(session.redirect_url, "pay")
    receiver.wait_for(1)

    provider.void(session_id=session.session_id)
    provider.void(session_id=session.session_id)

    assert session_state(sim, session.session_id)["state"] == "voided"
    with pytest.raises(ProviderError, match="cannot capture a session that is voided"):
        provider.capture(session_id=session.session_id)


def test_capturing_a_pending_or_unknown_session_is_refused(
    sim: str, provider: SimulatedProvider, receiver: Receiver
) -> None:
    session = open_session(provider, receiver)

    with pytest.raises(ProviderError, match="pending"):
        provider.capture(session_id=session.session_id)
    with pytest.raises(ProviderError, match="404"):
        provider.void(session_id="ses_unknown")


def test_a_webhook_answered_500_is_retried(sim: str, provider: SimulatedProvider, receiver: Receiver) -> None:
    receiver.statuses.extend([500, 503])
    session = open_session(provider, receiver)

    submit(session.redirect_url, "pay")

    [delivery] = receiver.wait_for(1, timeout=15)
    assert parse(provider, delivery).session_id == session.session_id
    assert not receiver.statuses


def test_a_wrong_api_key_is_401(sim: str, receiver: Receiver) -> None:
    wrong = SimulatedProvider(base_url=sim, secret="not-the-secret")

    raw = httpx.post(f"{sim}/api/sessions", json={}, headers={"Authorization": "Bearer nope"})

    assert raw.status_code == 401
    assert raw.json()["error"] == "unauthorized"
    with pytest.raises(ProviderError, match="401"):
        open_session(wrong, receiver)


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "JSON object"),
        (b"\xff\xfe", "not valid JSON"),
        (b'{"reference": "r", "amount_minor": -5, "currency": "EUR"}', "amount_minor"),
        (b'{"reference": "r", "amount_minor": true, "currency": "EUR"}', "amount_minor"),
        (b'{"reference": "r", "amount_minor": 5, "currency": "euro"}', "currency"),
        (
            b'{"reference": "r", "amount_minor": 5, "currency": "EUR", "callback_url": "ftp://x",'
            b' "return_url": "http://x/"}',
            "callback_url",
        ),
        (
            b'{"reference": "r", "amount_minor": 5, "currency": "EUR", "callback_url": "http://x/",'
            b' "return_url": "http://x/", "description": ["a"]}',
            "description",
        ),
        (
            b'{"reference": "r", "amount_minor": 5, "currency": "EUR", "callback_url": "http://x/",'
            b' "return_url": "http://x/", "description": "a\\u0000b"}',
            "description",
        ),
    ],
)
def test_garbage_session_requests_are_400(sim: str, body: bytes, detail: str) -> None:
    answer = httpx.post(f"{sim}/api/sessions", content=body, headers=AUTH)

    assert answer.status_code == 400
    assert set(answer.json()) == {"error", "detail"}
    assert detail in answer.json()["detail"]


def test_the_adapter_reports_a_refused_session(provider: SimulatedProvider, receiver: Receiver) -> None:
    with pytest.raises(ProviderError, match="amount_minor"):
        provider.create_session(
            reference="r", amount_minor=0, currency="EUR", callback_url=receiver.url, return_url=RETURN_URL
        )


def test_unknown_pages_and_sessions_are_404(sim: str) -> None:
    page = httpx.get(f"{sim}/pay/ses_doesnotexist")
    form = httpx.post(f"{sim}/pay/ses_doesnotexist", data={"action": "pay"})
    api = httpx.get(f"{sim}/api/sessions/ses_doesnotexist", headers=AUTH)

    assert page.status_code == form.status_code == 404
    assert page.headers["content-type"].startswith("text/html")
    assert "does not exist" in page.text
    assert (api.status_code, api.json()["error"]) == (404, "not_found")


def test_a_pay_form_without_an_action_is_400(provider: SimulatedProvider, receiver: Receiver) -> None:
    session = open_session(provider, receiver)

    answer = httpx.post(session.redirect_url, data={"action": "steal"})

    assert answer.status_code == 400
    assert "action=pay" in answer.text


def test_the_config_api_validates_and_changes_nothing_on_error(sim: str) -> None:
    bad = httpx.post(f"{sim}/api/config", json={"duplicates": 2, "failure_rate": 3}, headers=AUTH)
    unknown = httpx.post(f"{sim}/api/config", json={"colour": "red"}, headers=AUTH)
    current = httpx.get(f"{sim}/api/config", headers=AUTH).json()

    assert (bad.status_code, unknown.status_code) == (400, 400)
    assert "failure_rate must be between 0 and 1" in bad.json()["detail"]
    assert current["duplicates"] == 1


def test_an_unreachable_provider_is_a_provider_error(receiver: Receiver) -> None:
    gone = SimulatedProvider(base_url=f"http://127.0.0.1:{free_port()}", secret=SECRET)

    with pytest.raises(ProviderError, match="unreachable"):
        open_session(gone, receiver)


def signed_event(**overrides: object) -> bytes:
    event = {
        "id": "evt_1",
        "type": "payment.authorized",
        "session_id": "ses_1",
        "reference": "order-1",
        "amount_minor": 500,
        "currency": "EUR",
        "reason": "",
        "created": int(time.time()),
    }
    return json.dumps(event | overrides).encode()


def header(body: bytes, *, secret: str = SECRET, timestamp: int | None = None) -> dict[str, str]:
    return {signing.SIGNATURE_HEADER: signing.sign(secret=secret, body=body, timestamp=timestamp)}


def test_a_well_signed_webhook_parses_whatever_the_header_case() -> None:
    body = signed_event()
    adapter = SimulatedProvider(base_url="http://unused", secret=SECRET, webhook_secret=SECRET)

    event = adapter.parse_webhook(
        body=body, headers={"x-floodgate-signature": header(body)[signing.SIGNATURE_HEADER]}
    )

    assert (event.event_id, event.type, event.amount_minor) == ("evt_1", "payment.authorized", 500)


@pytest.mark.parametrize(
    "case",  # built when the test runs: signatures are only fresh for 300 s
    [
        lambda: (signed_event(), header(signed_event(), secret="forged"), "does not match"),
        lambda: (signed_event(), {}, "missing"),
        lambda: (signed_event(), {signing.SIGNATURE_HEADER: "v1=abc"}, "needs t="),
        lambda: (signed_event(), {signing.SIGNATURE_HEADER: "t=soon,v1=abc"}, "not an integer"),
        lambda: (signed_event(), header(signed_event(), timestamp=int(time.time()) - 301), "tolerance"),
        lambda: (b"{garbage", header(b"{garbage"), "not JSON"),
        lambda: (b"\xff", header(b"\xff"), "not JSON"),
        lambda: (b"[]", header(b"[]"), "JSON object"),
        lambda: (
            signed_event(type="payment.refunded"),
            header(signed_event(type="payment.refunded")),
            "unknown",
        ),
        lambda: (signed_event(type=["x"]), header(signed_event(type=["x"])), "unknown"),
        lambda: (signed_event(amount_minor="5"), header(signed_event(amount_minor="5")), "amount_minor"),
        lambda: (signed_event(session_id=""), header(signed_event(session_id="")), "session_id"),
    ],
    ids=[
        "forged",
        "missing",
        "no-timestamp",
        "bad-timestamp",
        "stale",
        "garbage-json",
        "not-utf8",
        "not-object",
        "unknown-type",
        "unhashable-type",
        "string-amount",
        "empty-session",
    ],
)
def test_bad_webhooks_are_refused(case: Callable[[], tuple[bytes, dict[str, str], str]]) -> None:
    body, headers, message = case()
    adapter = SimulatedProvider(base_url="http://unused", secret=SECRET, webhook_secret=SECRET)

    with pytest.raises(BadWebhook, match=message):
        adapter.parse_webhook(body=body, headers=headers)


def test_the_tolerance_is_configurable() -> None:
    body = signed_event()
    old = header(body, timestamp=int(time.time()) - 600)

    SimulatedProvider(
        base_url="http://unused", secret=SECRET, webhook_secret=SECRET, tolerance_seconds=900
    ).parse_webhook(body=body, headers=old)


def test_the_registry_knows_the_simulated_provider() -> None:
    assert isinstance(get_provider("simulated"), SimulatedProvider)
    with pytest.raises(KeyError, match="unknown payment provider"):
        get_provider("paypal")


def test_the_simulator_does_not_import_django() -> None:
    code = "import sys, devtools.provider_sim; assert 'django' not in sys.modules, 'django imported'"

    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)

    assert done.returncode == 0, done.stderr


def test_the_payment_page_shows_what_the_card_statement_will_say(
    provider: SimulatedProvider, sim: str, receiver: Receiver
) -> None:
    session = provider.create_session(
        reference="order-18",
        amount_minor=4900,
        currency="EUR",
        callback_url=receiver.url,
        return_url=RETURN_URL,
        statement_descriptor="HARBOUR LA",
    )

    page = httpx.get(session.redirect_url, timeout=10).text

    assert '<dd id="statement">HARBOUR LA</dd>' in page
    for bad in ["harbour", "<b>SHOP</b>", "X" * 23, "12345", 7]:
        answer = httpx.post(
            f"{sim}/api/sessions",
            json={
                "reference": "order-19",
                "amount_minor": 100,
                "currency": "EUR",
                "callback_url": receiver.url,
                "return_url": RETURN_URL,
                "statement_descriptor": bad,
            },
            headers=AUTH,
        )
        assert answer.status_code == 400 and "statement_descriptor" in answer.text, bad
