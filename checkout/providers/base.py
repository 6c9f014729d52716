"""What the payment saga needs from a payment provider; a real one plugs in here.

The saga never talks HTTP itself: it asks the adapter to open a hosted payment
session, to verify and parse a webhook, and to capture or void an authorisation.
Every call is idempotent on the provider's side (keyed by the session id).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class ProviderError(Exception):
    """The provider could not be reached or refused the call; safe to retry later."""


class PermanentProviderError(ProviderError):
    """The provider refused for good (e.g. capture of a voided or unknown session): do not retry."""


class BadWebhook(Exception):
    """A webhook whose signature, JSON or event type is wrong: answered 400, nothing recorded."""


@dataclass(frozen=True)
class Session:
    session_id: str
    redirect_url: str


@dataclass(frozen=True)
class WebhookEvent:
    event_id: str
    type: str  # "payment.authorized" or "payment.failed"
    session_id: str
    reference: str
    amount_minor: int
    currency: str
    reason: str = ""


EVENT_TYPES = frozenset({"payment.authorized", "payment.failed"})


class PaymentProvider(Protocol):
    name: str

    def create_session(
        self, *, reference: str, amount_minor: int, currency: str, callback_url: str, return_url: str
    ) -> Session: ...

    def parse_webhook(self, *, body: bytes, headers: dict[str, str]) -> WebhookEvent:
        """Verify the signature and parse; raises BadWebhook."""
        ...

    def capture(self, *, session_id: str) -> None: ...

    def void(self, *, session_id: str) -> None: ...
