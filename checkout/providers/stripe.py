"""Adapter for Stripe through its official library: a manual-capture PaymentIntent per payment.

The saga's steps map onto Stripe's: create_session creates the intent (authorisation happens when
the buyer confirms it on our page, templates/checkout/stripe_pay.html), capture captures it, void
cancels it, refund creates a Refund. Webhooks are verified with Stripe's signature scheme
(`Stripe-Signature`, stripe.Webhook.construct_event) and mapped onto the saga's event types.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import stripe
from django.conf import settings
from django.urls import reverse

from checkout.providers.base import (
    BadWebhook,
    PermanentProviderError,
    ProviderError,
    Refunded,
    Session,
    WebhookEvent,
)

log = logging.getLogger(__name__)

# Connect and read timeouts: a caller holds a buyer while waiting; ProviderError lets it retry later.
TIMEOUT = (3.0, 10.0)
# A lost answer is retried by the library with the same Idempotency-Key, so Stripe does it once.
MAX_NETWORK_RETRIES = 2
DEFAULT_TOLERANCE_SECONDS = 300
INTENT_ID = re.compile(r"pi_[A-Za-z0-9]{1,64}")
SETUP_ID = re.compile(r"seti_[A-Za-z0-9]{1,64}")
# Stripe's events that the saga hears about; any other correctly signed type is answered 2xx and
# ignored (an endpoint answering 4xx is retried, then disabled by Stripe).
AUTHORISED_STATES = frozenset({"requires_capture", "succeeded"})
# last_payment_error.code of an intent whose 3-D Secure challenge failed (Stripe's error codes);
# the saga hears it as the reason "not_authenticated" and tells the buyer so.
NOT_AUTHENTICATED = "payment_intent_authentication_failure"
REFUND_STATES = {"succeeded": "succeeded", "pending": "pending", "requires_action": "pending"}
# Stripe's dispute events and statuses in the saga's words. An inquiry ("warning_...") is answered
# as a dispute is; one closed without becoming a chargeback keeps the money, as a won dispute does.
DISPUTE_EVENTS = {
    "charge.dispute.created": "dispute.opened",
    "charge.dispute.updated": "dispute.updated",
    "charge.dispute.funds_withdrawn": "dispute.updated",
    "charge.dispute.funds_reinstated": "dispute.updated",
    "charge.dispute.closed": "dispute.closed",
}
DISPUTE_STATUSES = {
    "warning_needs_response": "needs_response",
    "needs_response": "needs_response",
    "warning_under_review": "under_review",
    "under_review": "under_review",
    "warning_closed": "won",
    "won": "won",
    "lost": "lost",
}


@dataclass(frozen=True)
class CardConfirmed:
    """What confirming a card did: declined (the bank's words), a 3-D Secure challenge to pass
    first, or (neither) authorised."""

    declined: str = ""
    challenge: bool = False


class StripeProvider:
    name = "stripe"

    def __init__(
        self,
        *,
        secret_key: str | None = None,
        webhook_secret: str | None = None,
        api_base: str | None = None,
        tolerance_seconds: int | None = None,
    ) -> None:
        self.webhook_secret = str(webhook_secret or getattr(settings, "STRIPE_WEBHOOK_SECRET", ""))
        self.tolerance_seconds: int = (
            tolerance_seconds
            if tolerance_seconds is not None
            else getattr(settings, "PAYMENT_WEBHOOK_TOLERANCE_SECONDS", DEFAULT_TOLERANCE_SECONDS)
        )
        key = str(secret_key or getattr(settings, "STRIPE_SECRET_KEY", ""))
        base = str(api_base or getattr(settings, "STRIPE_API_BASE", "") or stripe.DEFAULT_API_BASE)
        self.on_stripe = urlsplit(base).netloc.lower() == urlsplit(stripe.DEFAULT_API_BASE).netloc
        self.client = stripe.StripeClient(
            key or "sk_unset",  # a call then fails with AuthenticationError: permanent, and logged
            base_addresses={"api": base.rstrip("/")},
            max_network_retries=MAX_NETWORK_RETRIES,
            http_client=stripe.RequestsClient(timeout=TIMEOUT),
        )

    # -- the saga's calls -------------------------------------------------------------------------

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
        """Create the manual-capture intent; the buyer confirms it on our own page (redirect_url).

        callback_url is not sent: Stripe's webhook endpoint is configured in its dashboard.
        """
        params = self.intent_params(
            reference=reference,
            amount_minor=amount_minor,
            currency=currency,
            description=description,
            statement_descriptor=statement_descriptor,
        )
        # Derived from our payment's reference: a retry (ours or the library's) never charges twice.
        intent = self._call(
            "create the payment intent",
            lambda: self.client.v1.payment_intents.create(
                params=params,  # type: ignore[arg-type]
                options={"idempotency_key": f"floodgate-intent-{reference}"},
            ),
        )
        session_id = str(intent.id)
        path = reverse("stripe-pay", kwargs={"intent_id": session_id})
        return Session(session_id=session_id, redirect_url=settings.PUBLIC_BASE_URL.rstrip("/") + path)

    def intent_params(
        self, *, reference: str, amount_minor: int, currency: str, description: str, statement_descriptor: str
    ) -> dict[str, Any]:
        """The PaymentIntent as create_session asks Stripe for it."""
        params: dict[str, Any] = {
            "amount": amount_minor,
            "currency": currency.lower(),
            "capture_method": "manual",
            "payment_method_types": ["card"],
            # The merchant's dashboard shows what was paid for (the buyer sees our own pay page).
            "metadata": {"reference": reference, "description": description},
        }
        if statement_descriptor and self.on_stripe:
            # Card intents take a suffix to the account's prefix (a whole `statement_descriptor` is
            # refused for cards); localstripe knows neither field and refuses the intent.
            params["statement_descriptor_suffix"] = statement_descriptor
        return params

    def capture(self, *, session_id: str) -> None:
        """Capture (idempotent: an already captured intent is a success; a canceled one is permanent)."""
        intent = self.retrieve(session_id)
        if intent.status == "succeeded":
            return
        if intent.status != "requires_capture":
            raise PermanentProviderError(f"cannot capture payment intent {session_id}: it is {intent.status}")
        try:
            self._call(
                f"capture {session_id}",
                lambda: self.client.v1.payment_intents.capture(
                    session_id, options={"idempotency_key": f"floodgate-capture-{session_id}"}
                ),
            )
        except PermanentProviderError:
            # Captured meanwhile (a concurrent run): that is the outcome asked for.
            if self.retrieve(session_id).status != "succeeded":
                raise

    def void(self, *, session_id: str) -> None:
        """Cancel the authorisation (idempotent: an already canceled intent is a success)."""
        intent = self.retrieve(session_id)
        if intent.status == "canceled":
            return
        if intent.status in {"succeeded", "processing"}:
            raise PermanentProviderError(f"cannot void payment intent {session_id}: it is {intent.status}")
        try:
            self._call(
                f"cancel {session_id}",
                lambda: self.client.v1.payment_intents.cancel(
                    session_id, options={"idempotency_key": f"floodgate-cancel-{session_id}"}
                ),
            )
        except PermanentProviderError:
            if self.retrieve(session_id).status != "canceled":
                raise

    def refund(self, *, session_id: str, amount_minor: int, currency: str, key: str) -> Refunded:
        """Refund part of a captured intent once per key.

        The Idempotency-Key covers a retry within Stripe's 24 hours; the key is also kept in the
        refund's metadata and looked up first, so a retry days later (or against a server that
        ignores the header) finds the refund it made instead of making another.
        """
        intent = self.retrieve(session_id)
        if intent.status != "succeeded":
            raise PermanentProviderError(f"cannot refund payment intent {session_id}: it is {intent.status}")
        existing = self._refund_with_key(session_id, key)
        if existing is None:
            self._check_refundable(intent, amount_minor)
            params: dict[str, Any] = {
                "payment_intent": session_id,
                "amount": amount_minor,
                "metadata": {"key": key},
            }
            existing = self._call(
                f"refund {session_id}",
                lambda: self.client.v1.refunds.create(
                    params=params,  # type: ignore[arg-type]
                    options={"idempotency_key": f"floodgate-refund-{key}"},
                ),
            )
        if str(existing.currency).upper() != currency.upper():
            raise PermanentProviderError(
                f"refund {existing.id} is in {existing.currency}, not {currency}: settle it by hand"
            )
        return Refunded(refund_id=str(existing.id), state=REFUND_STATES.get(str(existing.status), "failed"))

    def parse_webhook(self, *, body: bytes, headers: dict[str, str]) -> WebhookEvent:
        """Verify Stripe's signature and age, then map the event; raises BadWebhook.

        A correctly signed event of a type the saga does not use maps to type "ignored": the
        view answers it 2xx and records nothing.
        """
        header = next((v for k, v in headers.items() if k.lower() == "stripe-signature"), None)
        if not header:
            raise BadWebhook("the Stripe-Signature header is missing")
        if not self.webhook_secret:
            raise BadWebhook("STRIPE_WEBHOOK_SECRET is not set: no webhook can be verified")
        try:
            # Stripe's own check of the Stripe-Signature header: HMAC of "t.body", and t's age.
            stripe.Webhook.construct_event(  # type: ignore[no-untyped-call]
                body, header, self.webhook_secret, self.tolerance_seconds
            )
            data = json.loads(body)
        except stripe.SignatureVerificationError as error:
            raise BadWebhook(f"the Stripe signature does not verify: {error.user_message or error}") from None
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError too
            raise BadWebhook("the webhook body is not JSON (or nests too deep)") from None
        return event_from(data)

    # -- for our payment page (checkout/views.py) ---------------------------------------------------

    def retrieve(self, session_id: str) -> stripe.PaymentIntent:
        if not INTENT_ID.fullmatch(session_id):
            raise PermanentProviderError(f"{session_id!r} is not a payment intent id")
        intent: stripe.PaymentIntent = self._call(
            f"read {session_id}", lambda: self.client.v1.payment_intents.retrieve(session_id)
        )
        return intent

    def confirm_with_token(self, session_id: str, token_id: str) -> CardConfirmed:
        """Attach the card of a Stripe.js token and confirm: only for localstripe's Stripe.js stand-in,
        which has no confirmPayment (real Stripe.js confirms in the browser). Says whether the card
        was declined or its bank wants a 3-D Secure challenge first; raises PermanentProviderError
        on an unknown token or an intent past paying, ProviderError when Stripe is unreachable."""
        token = self._call(f"read token {token_id}", lambda: self.client.v1.tokens.retrieve(token_id))
        card = token.get("card")
        card_id = card.get("id") if card is not None else None
        if not isinstance(card_id, str):
            raise PermanentProviderError("the token carries no card")
        # localstripe's confirm refuses a payment_method argument ("Not implemented"): set it first.
        self._call(
            f"attach a card to {session_id}",
            lambda: self.client.v1.payment_intents.update(session_id, params={"payment_method": card_id}),
        )
        return self._confirm(session_id)

    def _confirm(self, session_id: str) -> CardConfirmed:
        try:
            intent = self._call(
                f"confirm {session_id}", lambda: self.client.v1.payment_intents.confirm(session_id)
            )
        except PermanentProviderError as error:
            if isinstance(error.__cause__, stripe.CardError):
                return CardConfirmed(declined=str(error.__cause__.user_message or "Your card was declined."))
            raise
        return CardConfirmed(challenge=intent.status == "requires_action")

    # -- saved cards (checkout/cards.py): a SetupIntent saves a card the buyer pays with in one press ---

    def create_customer(self, *, buyer_id: int) -> str:
        """A customer for the buyer (their saved cards hang on it); keyed, so a retry makes one."""
        customer = self._call(
            "create a customer",
            lambda: self.client.v1.customers.create(
                params={"metadata": {"buyer": str(buyer_id)}},
                options={"idempotency_key": f"floodgate-customer-{buyer_id}"},
            ),
        )
        return str(customer.id)

    def create_setup(self, *, customer_id: str, buyer_id: int) -> tuple[str, str]:
        """A SetupIntent for the buyer's page: (its id, its client secret). Stripe.js sends the card
        to Stripe with the secret; we learn only the payment method's id and its last four digits."""
        params: dict[str, Any] = {
            "customer": customer_id,
            "usage": "on_session",  # paid with the buyer present: 3-D Secure may still ask
            "payment_method_types": ["card"],
            "metadata": {"buyer": str(buyer_id)},
        }
        setup = self._call(
            "create a setup intent",
            lambda: self.client.v1.setup_intents.create(params=params),  # type: ignore[arg-type]
        )
        return str(setup.id), str(setup.client_secret)

    def finished_setup(self, setup_id: str) -> dict[str, Any]:
        """A SetupIntent as Stripe has it (status, customer, payment_method, metadata)."""
        if not SETUP_ID.fullmatch(setup_id):
            raise PermanentProviderError(f"{setup_id!r} is not a setup intent id")
        setup = self._call(f"read {setup_id}", lambda: self.client.v1.setup_intents.retrieve(setup_id))
        return dict(setup)

    def attach_card(self, *, payment_method_id: str, customer_id: str) -> dict[str, Any]:
        """Attach the card to the customer (Stripe does it on a SetupIntent with a customer, localstripe
        does not; attaching again to the same customer changes nothing) and return its details."""
        method = self._call(
            f"read {payment_method_id}",
            lambda: self.client.v1.payment_methods.retrieve(payment_method_id),
        )
        if method.get("customer") not in (None, customer_id):
            raise PermanentProviderError(f"{payment_method_id} belongs to another customer")
        if method.get("customer") is None:
            method = self._call(
                f"attach {payment_method_id}",
                lambda: self.client.v1.payment_methods.attach(
                    payment_method_id, params={"customer": customer_id}
                ),
            )
        card = method.get("card")
        return dict(card) if card is not None else {}

    def detach_card(self, *, payment_method_id: str) -> None:
        """Detach a saved card from its customer: it can no longer be charged through us."""
        self._call(
            f"detach {payment_method_id}",
            lambda: self.client.v1.payment_methods.detach(payment_method_id),
        )

    def confirm_saved(self, session_id: str, *, payment_method_id: str, customer_id: str) -> CardConfirmed:
        """Confirm the intent with a saved card, the buyer present (off_session false: their bank may
        still ask for 3-D Secure, which our pay page then runs). localstripe's confirm refuses a
        payment_method argument, so it is set first, as in confirm_with_token."""
        self._call(
            f"set the saved card of {session_id}",
            lambda: self.client.v1.payment_intents.update(
                session_id, params={"payment_method": payment_method_id, "customer": customer_id}
            ),
        )
        return self._confirm(session_id)

    # -- plumbing -----------------------------------------------------------------------------------

    def _check_refundable(self, intent: stripe.PaymentIntent, amount_minor: int) -> None:
        """Refuse for good a refund of more than is left of the capture, as Stripe does (localstripe
        does not check)."""
        session_id = intent.id
        charge = intent.get("latest_charge")
        if isinstance(charge, str):  # Stripe answers the id; localstripe the charge itself
            charge_id = charge
            charge = self._call(f"read {charge_id}", lambda: self.client.v1.charges.retrieve(charge_id))
        if charge is None:
            raise PermanentProviderError(f"payment intent {session_id} has no charge to refund")
        captured = charge.get("amount_captured")
        if captured is None:
            captured = charge.get("amount", 0) if charge.get("captured") else 0
        left = int(captured) - int(charge.get("amount_refunded") or 0)
        if amount_minor > left:
            raise PermanentProviderError(
                f"cannot refund {amount_minor} of payment intent {session_id}: {left} is left of its capture"
            )

    def _refund_with_key(self, session_id: str, key: str) -> stripe.Refund | None:
        refunds = self._call(
            f"list the refunds of {session_id}",
            lambda: self.client.v1.refunds.list(params={"payment_intent": session_id, "limit": 100}),
        )
        return next((r for r in refunds.data if (r.metadata or {}).get("key") == key), None)

    def _call(self, what: str, call: Any) -> Any:
        """Run one library call, sorting Stripe's errors into retry-later and refused-for-good."""
        try:
            return call()
        except (stripe.APIConnectionError, stripe.RateLimitError) as error:
            log.warning("stripe: %s failed: %s", what, error)
            raise ProviderError(f"Stripe did not answer to {what} ({type(error).__name__})") from error
        except stripe.StripeError as error:
            status = error.http_status or 0
            if status >= 500 or status in {409, 429} or isinstance(error, stripe.APIError):
                log.warning("stripe: %s failed with HTTP %s: %s", what, status, error)
                raise ProviderError(f"Stripe failed to {what} (HTTP {status})") from error
            log.error("stripe: %s refused with HTTP %s: %s", what, status, error)
            raise PermanentProviderError(
                f"Stripe refused to {what} (HTTP {status}): {error.user_message or error}"
            ) from error


def event_from(data: object) -> WebhookEvent:
    """Map a verified Stripe event (its JSON) onto the saga's event; raises BadWebhook."""
    if not isinstance(data, dict):
        raise BadWebhook("the webhook body is not a JSON object")
    event_id, kind = data.get("id"), data.get("type")
    payload = data.get("data")
    thing = payload.get("object") if isinstance(payload, dict) else None
    if (
        not isinstance(event_id, str)
        or not event_id
        or not isinstance(kind, str)
        or not isinstance(thing, dict)
    ):
        raise BadWebhook("a Stripe event needs id, type and data.object")
    if kind in {"payment_intent.amount_capturable_updated", "payment_intent.succeeded"}:
        # Real Stripe says amount_capturable_updated when a manual-capture intent is authorised and
        # succeeded when it is captured; a second authorisation after capture is ignored by the saga.
        if thing.get("status") not in AUTHORISED_STATES:
            return _ignored(event_id, kind)
        return _intent_event(event_id, "payment.authorized", thing)
    if kind == "payment_intent.payment_failed":
        error = thing.get("last_payment_error")
        code = error.get("code") if isinstance(error, dict) else None
        reason = "not_authenticated" if code == NOT_AUTHENTICATED else str(code or "declined")
        return _intent_event(event_id, "payment.failed", thing, reason=reason)
    if kind == "charge.refunded":
        refunds = thing.get("refunds")
        listed = refunds.get("data") if isinstance(refunds, dict) else None
        latest = listed[0] if isinstance(listed, list) and listed and isinstance(listed[0], dict) else {}
        return WebhookEvent(
            event_id=event_id,
            type="refund.succeeded",
            session_id=_text(thing, "payment_intent"),
            reference=_metadata_key(latest),
            # amount_refunded is the charge's total refunded so far (cumulative), not this refund's.
            amount_minor=_amount(thing, "amount_refunded"),
            currency=_text(thing, "currency").upper(),
            refund_id=str(latest.get("id") or ""),
        )
    if kind == "refund.failed":
        return WebhookEvent(
            event_id=event_id,
            type="refund.failed",
            session_id=_text(thing, "payment_intent"),
            reference=_metadata_key(thing),
            amount_minor=_amount(thing, "amount"),
            currency=_text(thing, "currency").upper(),
            reason=str(thing.get("failure_reason") or "failed"),
            refund_id=_text(thing, "id"),
        )
    if kind in DISPUTE_EVENTS:
        created = data.get("created")
        return _dispute_event(event_id, kind, thing, created=created if isinstance(created, int) else 0)
    return _ignored(event_id, kind)


def _dispute_event(event_id: str, kind: str, dispute: dict[str, Any], *, created: int) -> WebhookEvent:
    """A Dispute object's facts; its payment is found by the intent (a charge without one: unknown)."""
    state = DISPUTE_STATUSES.get(str(dispute.get("status")))
    if state is None:
        log.warning("stripe: dispute event %s with an unknown status %r", event_id, dispute.get("status"))
        return _ignored(event_id, kind)
    intent = dispute.get("payment_intent")
    evidence = dispute.get("evidence_details")
    due_by = evidence.get("due_by") if isinstance(evidence, dict) else None
    return WebhookEvent(
        event_id=event_id,
        type=DISPUTE_EVENTS[kind],
        session_id=intent if isinstance(intent, str) and intent else _text(dispute, "charge"),
        reference="",
        amount_minor=_amount(dispute, "amount"),
        currency=_text(dispute, "currency").upper(),
        reason=str(dispute.get("reason") or "general"),
        dispute_id=_text(dispute, "id"),
        state=state,
        due_by=due_by if isinstance(due_by, int) and not isinstance(due_by, bool) else 0,
        created=created,
    )


def _intent_event(event_id: str, kind: str, intent: dict[str, Any], *, reason: str = "") -> WebhookEvent:
    metadata = intent.get("metadata")
    reference = metadata.get("reference") if isinstance(metadata, dict) else None
    if not isinstance(reference, str) or not reference:
        # An intent Floodgate did not create (another integration on the same account): not ours.
        return _ignored(event_id, kind)
    return WebhookEvent(
        event_id=event_id,
        type=kind,
        session_id=_text(intent, "id"),
        reference=reference,
        amount_minor=_amount(intent, "amount"),
        currency=_text(intent, "currency").upper(),
        reason=reason,
    )


def _ignored(event_id: str, kind: str) -> WebhookEvent:
    return WebhookEvent(
        event_id=event_id,
        type="ignored",
        session_id="",
        reference="",
        amount_minor=0,
        currency="",
        reason=kind,
    )


def _text(thing: dict[str, Any], field: str) -> str:
    value = thing.get(field)
    if not isinstance(value, str) or not value:
        raise BadWebhook(f"the Stripe object's {field!r} must be a non-empty string")
    return value


def _amount(thing: dict[str, Any], field: str) -> int:
    value = thing.get(field)
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadWebhook(f"the Stripe object's {field!r} must be an integer")
    return value


def _metadata_key(thing: dict[str, Any]) -> str:
    metadata = thing.get("metadata")
    key = metadata.get("key") if isinstance(metadata, dict) else None
    return key if isinstance(key, str) else ""
