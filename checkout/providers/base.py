"""What the payment saga needs from a payment provider; a real one plugs in here.

The saga never talks HTTP itself: it asks the adapter to open a payment session, to
verify and parse a webhook, to capture or void an authorisation and to refund a capture.
Every call is idempotent on the provider's side (keyed by the session id, or for a
refund by the key the saga derives from its refund row).
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
class Refunded:
    """The provider's answer to a refund: its id, and whether the money has gone back yet."""

    refund_id: str
    state: str  # "succeeded", "pending" (a refund.* webhook will tell) or "failed"


@dataclass(frozen=True)
class WebhookEvent:
    event_id: str
    type: str  # one of EVENT_TYPES
    session_id: str
    reference: str  # the payment's reference, or for a refund.* event the refund's key
    amount_minor: int
    currency: str
    reason: str = ""  # a decline's or a refund's failure's code; a dispute's reason ("fraudulent")
    refund_id: str = ""  # refund.* events: the provider's refund id
    dispute_id: str = ""  # dispute.* events: the provider's dispute id
    state: str = ""  # dispute.* events: one of DISPUTE_STATES
    due_by: int = 0  # dispute.* events: the evidence deadline (unix seconds); 0, none
    created: int = 0  # when the provider made the event (unix seconds): orders a dispute's late events


DISPUTE_TYPES = frozenset({"dispute.opened", "dispute.updated", "dispute.closed"})
DISPUTE_STATES = frozenset({"needs_response", "under_review", "won", "lost"})
EVENT_TYPES = (
    frozenset({"payment.authorized", "payment.failed", "refund.succeeded", "refund.failed"}) | DISPUTE_TYPES
)


class PaymentProvider(Protocol):
    name: str

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
    ) -> Session: ...

    def parse_webhook(self, *, body: bytes, headers: dict[str, str]) -> WebhookEvent:
        """Verify the signature and parse; raises BadWebhook."""
        ...

    def capture(self, *, session_id: str) -> None: ...

    def void(self, *, session_id: str) -> None: ...

    def refund(self, *, session_id: str, amount_minor: int, currency: str, key: str) -> Refunded:
        """Refund part or all of a captured session; the same key is the same refund, however often
        it is sent. Raises ProviderError (retry) or PermanentProviderError (e.g. more than captured)."""
        ...
