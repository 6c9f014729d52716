"""The webhook endpoint: anything not signed, not JSON or not known is a 400 that changes nothing."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import pytest
from django.test import Client
from django.utils import timezone

from checkout.models import WebhookEvent
from checkout.providers.signing import SIGNATURE_HEADER, sign
from tests.conftest import WEBHOOK_SECRET

if TYPE_CHECKING:
    from django.test.client import _MonkeyPatchedWSGIResponse as TestResponse

pytestmark = pytest.mark.django_db

URL = "/checkout/webhooks/simulated"
EVENT = {
    "id": "evt_1",
    "type": "payment.authorized",
    "session_id": "ses_1",
    "reference": "r",
    "amount_minor": 100,
    "currency": "EUR",
    "reason": "",
    "created": 0,
}


def post(body: bytes, signature: str | None) -> TestResponse:
    headers: dict[str, Any] = (
        {} if signature is None else {"HTTP_" + SIGNATURE_HEADER.upper().replace("-", "_"): signature}
    )
    return Client().post(URL, data=body, content_type="application/json", **headers)


@pytest.fixture(autouse=True)
def secret(settings) -> None:
    settings.PAYMENT_WEBHOOK_SECRET = WEBHOOK_SECRET


@pytest.mark.parametrize(
    ("body", "signature"),
    [
        (json.dumps(EVENT).encode(), None),
        (json.dumps(EVENT).encode(), sign(secret="not-the-secret", body=json.dumps(EVENT).encode())),
        (json.dumps(EVENT).encode(), sign(secret=WEBHOOK_SECRET, body=b"another body")),
        (
            json.dumps(EVENT).encode(),
            sign(secret=WEBHOOK_SECRET, body=json.dumps(EVENT).encode(), timestamp=int(time.time()) - 3600),
        ),
        (b"{not json", sign(secret=WEBHOOK_SECRET, body=b"{not json")),
        (
            json.dumps({**EVENT, "type": "payment.teleported"}).encode(),
            sign(secret=WEBHOOK_SECRET, body=json.dumps({**EVENT, "type": "payment.teleported"}).encode()),
        ),
        (json.dumps([1, 2]).encode(), sign(secret=WEBHOOK_SECRET, body=b"[1, 2]")),
        (b"", "t=1,v1=00"),
        (json.dumps(EVENT).encode(), "garbage"),
    ],
)
def test_bad_webhooks_are_400_and_record_nothing(body: bytes, signature: str | None) -> None:
    answer = post(body, signature)

    assert answer.status_code == 400, answer.content
    assert answer.json()["error"] == "bad_webhook" and answer.json()["detail"]
    assert not WebhookEvent.objects.exists()


def signed(raw: bytes) -> tuple[bytes, str]:
    return raw, sign(secret=WEBHOOK_SECRET, body=raw)


@pytest.mark.parametrize(
    "raw",
    [
        json.dumps({**EVENT, "id": "e" * 101}).encode(),  # longer than the event id column
        json.dumps({**EVENT, "reference": "r\x00"}).encode(),  # NUL: jsonb refuses it
        json.dumps({**EVENT, "extra": {"note": "a\x00b"}}).encode(),  # NUL in any string
        json.dumps({**EVENT, "extra\x00": 1}).encode(),  # NUL in a key
        json.dumps({**EVENT, "reason": "\ud800"}).encode(),  # a lone surrogate
        json.dumps({**EVENT, "extra": json.loads("[" * 50 + "]" * 50)}).encode(),  # deep, but parseable
        json.dumps(EVENT)[:-1].encode() + b', "extra": ' + b"[" * 3000 + b"]" * 3000 + b"}",  # RecursionError
    ],
    ids=["long id", "NUL", "NUL nested", "NUL key", "surrogate", "nesting 50", "nesting 3000"],
)
def test_signed_webhooks_postgresql_cannot_store_are_400_and_record_nothing(raw: bytes) -> None:
    answer = post(*signed(raw))

    assert answer.status_code == 400, answer.content
    assert answer.json()["error"] == "bad_webhook" and answer.json()["detail"]
    assert not WebhookEvent.objects.exists()


def test_a_repeated_event_id_keeps_the_first_event_whole_and_refuses_another_body() -> None:
    first = json.dumps(EVENT).encode()
    other = json.dumps({**EVENT, "type": "payment.failed", "reason": "declined"}).encode()
    respaced = json.dumps(EVENT, indent=2).encode()  # the same event, other bytes

    answers = [post(*signed(first)), post(*signed(other)), post(*signed(respaced))]

    assert [a.status_code for a in answers] == [200, 409, 200], [a.content for a in answers]
    assert answers[1].json()["error"] == "event_conflict" and answers[1].json()["detail"]
    stored = WebhookEvent.objects.get()
    assert (stored.type, stored.payload) == (EVENT["type"], EVENT)


def test_a_different_body_under_a_processed_event_id_is_refused_too() -> None:
    post(*signed(json.dumps(EVENT).encode()))
    WebhookEvent.objects.update(processed_at=timezone.now(), outcome="unknown_payment")

    again = post(*signed(json.dumps(EVENT).encode()))
    other = post(*signed(json.dumps({**EVENT, "amount_minor": 1}).encode()))

    assert (again.status_code, other.status_code) == (200, 409)
    assert WebhookEvent.objects.get().payload == EVENT


def test_unknown_provider_is_404_and_get_is_405() -> None:
    assert (
        Client().post("/checkout/webhooks/nobody", data=b"{}", content_type="application/json").status_code
        == 404
    )
    assert Client().get(URL).status_code == 405
