"""Adapter for the simulated provider (`devtools/provider_sim.py`), spoken to over HTTP like a real one."""

from __future__ import annotations

import json
import logging
from urllib.parse import quote

import httpx
from django.conf import settings

from checkout.providers import signing
from checkout.providers.base import (
    DISPUTE_STATES,
    DISPUTE_TYPES,
    EVENT_TYPES,
    BadWebhook,
    PermanentProviderError,
    ProviderError,
    Refunded,
    Session,
    WebhookEvent,
)

log = logging.getLogger(__name__)

# Short: a caller holds a hold (and a buyer) while waiting; ProviderError lets it retry later.
TIMEOUT = httpx.Timeout(5.0, connect=2.0)


class SimulatedProvider:
    name = "simulated"

    def __init__(
        self,
        *,
        base_url: str | None = None,
        secret: str | None = None,
        webhook_secret: str | None = None,
        tolerance_seconds: int | None = None,
    ) -> None:
        self.base_url = str(
            base_url or getattr(settings, "PAYMENT_PROVIDER_URL", "http://127.0.0.1:8701")
        ).rstrip("/")
        self.secret = str(secret or getattr(settings, "PAYMENT_PROVIDER_SECRET", "sim-secret-dev"))
        self.webhook_secret = str(
            webhook_secret or getattr(settings, "PAYMENT_WEBHOOK_SECRET", "sim-webhook-secret-dev")
        )
        self.tolerance_seconds: int = (
            tolerance_seconds
            if tolerance_seconds is not None
            else getattr(settings, "PAYMENT_WEBHOOK_TOLERANCE_SECONDS", signing.DEFAULT_TOLERANCE_SECONDS)
        )

    def create_session(
        self,
        *,
        reference: str,
        amount_minor: int,
        currency: str,
        callback_url: str,
        return_url: str,
        description: str = "",
        statement_descriptor: str = "",
    ) -> Session:
        """Open a hosted payment session; raises ProviderError when refused or unreachable."""
        payload = {
            "reference": reference,
            "amount_minor": amount_minor,
            "currency": currency,
            "callback_url": callback_url,
            "return_url": return_url,
            "description": description,  # what the buyer's payment page says they pay for
            "statement_descriptor": statement_descriptor,  # what the card statement will say
        }
        response = self._call("POST", "/api/sessions", payload)
        if response.status_code != 201:
            raise ProviderError(f"the provider refused the session: {_detail(response)}")
        data = _json_object(response)
        session_id, redirect_url = data.get("session_id"), data.get("redirect_url")
        if not isinstance(session_id, str) or not isinstance(redirect_url, str):
            raise ProviderError("the provider answered a session without session_id or redirect_url")
        return Session(session_id=session_id, redirect_url=redirect_url)

    def capture(self, *, session_id: str) -> None:
        """Capture an authorisation (idempotent); raises ProviderError, also when it was voided."""
        self._settle("capture", session_id)

    def void(self, *, session_id: str) -> None:
        """Void an authorisation (idempotent); raises ProviderError, also when it was captured."""
        self._settle("void", session_id)

    def refund(self, *, session_id: str, amount_minor: int, currency: str, key: str) -> Refunded:
        """Refund part of a capture, once per key; raises PermanentProviderError on a 4xx (more than
        is left of the capture, a session not captured, the key used for another amount)."""
        payload = {"amount_minor": amount_minor, "currency": currency, "key": key}
        response = self._call("POST", f"/api/sessions/{quote(session_id, safe='')}/refund", payload)
        if 400 <= response.status_code < 500:
            raise PermanentProviderError(f"the provider refused to refund {session_id}: {_detail(response)}")
        if response.status_code not in (200, 201):
            raise ProviderError(f"the provider refused to refund {session_id}: {_detail(response)}")
        data = _json_object(response)
        refund_id, state = data.get("refund_id"), data.get("state")
        if not isinstance(refund_id, str) or state not in {"succeeded", "pending", "failed"}:
            raise ProviderError("the provider answered a refund without refund_id or state")
        return Refunded(refund_id=refund_id, state=str(state))

    def parse_webhook(self, *, body: bytes, headers: dict[str, str]) -> WebhookEvent:
        """Verify the signature and its age, then parse the event; raises BadWebhook."""
        header = next((v for k, v in headers.items() if k.lower() == signing.SIGNATURE_HEADER.lower()), None)
        signing.verify(
            secret=self.webhook_secret, body=body, header=header, tolerance_seconds=self.tolerance_seconds
        )
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError too
            raise BadWebhook("the webhook body is not JSON (or nests too deep)") from None
        if not isinstance(data, dict):
            raise BadWebhook("the webhook body is not a JSON object")
        event_type = data.get("type")
        # The isinstance check first: a list or dict is unhashable and would break the set lookup.
        if not isinstance(event_type, str) or event_type not in EVENT_TYPES:
            raise BadWebhook(f"unknown webhook event type {event_type!r}")
        for field in ("id", "session_id", "reference", "currency"):
            if not isinstance(data.get(field), str) or not data[field]:
                raise BadWebhook(f"the webhook field {field!r} must be a non-empty string")
        amount = data.get("amount_minor")
        if not isinstance(amount, int) or isinstance(amount, bool):
            raise BadWebhook("the webhook field 'amount_minor' must be an integer")
        reason, refund_id = data.get("reason", ""), data.get("refund_id", "")
        if not isinstance(reason, str) or not isinstance(refund_id, str):
            raise BadWebhook("the webhook fields 'reason' and 'refund_id' must be strings")
        dispute_id, state = data.get("dispute_id", ""), data.get("state", "")
        due_by, created = data.get("due_by", 0), data.get("created", 0)
        if event_type in DISPUTE_TYPES and (
            not isinstance(dispute_id, str) or not dispute_id or not isinstance(state, str)
        ):
            raise BadWebhook("a dispute event needs the strings 'dispute_id' and 'state'")
        if event_type in DISPUTE_TYPES and state not in DISPUTE_STATES:
            raise BadWebhook(f"a dispute's state must be one of {', '.join(sorted(DISPUTE_STATES))}")
        for name, number in (("due_by", due_by), ("created", created)):
            if not isinstance(number, int) or isinstance(number, bool):
                raise BadWebhook(f"the webhook field {name!r} must be an integer")
        return WebhookEvent(
            event_id=data["id"],
            type=event_type,
            session_id=data["session_id"],
            reference=data["reference"],
            amount_minor=amount,
            currency=data["currency"],
            reason=reason,
            refund_id=refund_id,
            dispute_id=str(dispute_id),
            state=str(state),
            due_by=due_by,
            created=created,
        )

    def _settle(self, action: str, session_id: str) -> None:
        response = self._call("POST", f"/api/sessions/{quote(session_id, safe='')}/{action}", None)
        if 400 <= response.status_code < 500:
            raise PermanentProviderError(
                f"the provider refused to {action} session {session_id}: {_detail(response)}"
            )
        if response.status_code != 200:
            raise ProviderError(f"the provider refused to {action} session {session_id}: {_detail(response)}")

    def _call(self, method: str, path: str, payload: dict[str, object] | None) -> httpx.Response:
        url = f"{self.base_url}{path}"
        try:
            response = httpx.request(
                method,
                url,
                json=payload,
                headers={"Authorization": f"Bearer {self.secret}"},
                timeout=TIMEOUT,
            )
        except httpx.HTTPError as exc:
            log.warning("payment provider %s %s failed: %s", method, url, exc)
            raise ProviderError(f"the payment provider is unreachable ({type(exc).__name__})") from exc
        if response.status_code >= 500:
            log.warning("payment provider %s %s answered %s", method, url, response.status_code)
            raise ProviderError(f"the payment provider failed with HTTP {response.status_code}")
        return response


def _json_object(response: httpx.Response) -> dict[str, object]:
    try:
        data = response.json()
    except ValueError:
        raise ProviderError(f"the provider answered HTTP {response.status_code} without JSON") from None
    if not isinstance(data, dict):
        raise ProviderError(f"the provider answered HTTP {response.status_code} with a non-object")
    return data


def _detail(response: httpx.Response) -> str:
    """The provider's own words for a refusal, for the error message."""
    try:
        data = response.json()
    except ValueError:
        return f"HTTP {response.status_code}"
    if isinstance(data, dict):
        words = data.get("detail") or data.get("error")
        if words:
            return f"HTTP {response.status_code} {words}"
    return f"HTTP {response.status_code}"
