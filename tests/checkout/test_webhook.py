"""The webhook endpoint: anything not signed, not JSON or not known is a 400 that changes nothing."""

from __future__ import annotations

import json
import time

import pytest
from django.test import Client

from checkout.models import WebhookEvent
from checkout.providers.signing import SIGNATURE_HEADER, sign
from tests.conftest import WEBHOOK_SECRET

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


def post(body: bytes, signature: str | None) -> object:
    headers = {} if signature is None else {"HTTP_" + SIGNATURE_HEADER.upper().replace("-", "_"): signature}
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


def test_unknown_provider_is_404_and_get_is_405() -> None:
    assert (
        Client().post("/checkout/webhooks/nobody", data=b"{}", content_type="application/json").status_code
        == 404
    )
    assert Client().get(URL).status_code == 405
