"""Sign and verify webhook bodies: `X-Floodgate-Signature: t=<unix>,v1=<hex>`.

The MAC is HMAC-SHA256 over f"{t}.{body}" with the shared secret; putting the
timestamp under the MAC lets the receiver refuse replays of old deliveries.
Stdlib only: the simulated provider's process imports this and must not load Django.
"""

from __future__ import annotations

import hashlib
import hmac
import time

from checkout.providers.base import BadWebhook

SIGNATURE_HEADER = "X-Floodgate-Signature"
DEFAULT_TOLERANCE_SECONDS = 300


def mac(*, secret: str, timestamp: int, body: bytes) -> str:
    """Return the hex HMAC-SHA256 of f"{timestamp}.{body}"."""
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def sign(*, secret: str, body: bytes, timestamp: int | None = None) -> str:
    """Return the signature header value for body, signed now unless timestamp is given."""
    t = int(time.time()) if timestamp is None else timestamp
    return f"t={t},v1={mac(secret=secret, timestamp=t, body=body)}"


def verify(
    *,
    secret: str,
    body: bytes,
    header: str | None,
    tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
    now: float | None = None,
) -> int:
    """Check the signature header against body; return its timestamp or raise BadWebhook."""
    if not header:
        raise BadWebhook(f"the {SIGNATURE_HEADER} header is missing")
    timestamp: int | None = None
    candidates: list[str] = []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t":
            try:
                timestamp = int(value)
            except ValueError:
                raise BadWebhook(f"the {SIGNATURE_HEADER} timestamp is not an integer") from None
        elif key == "v1":
            candidates.append(value)
    if timestamp is None or not candidates:
        raise BadWebhook(f"the {SIGNATURE_HEADER} header needs t=<unix> and v1=<hex>")
    expected = mac(secret=secret, timestamp=timestamp, body=body)
    # Several v1 values are allowed so the secret can be rotated without a gap.
    if not any(hmac.compare_digest(expected.encode(), candidate.encode()) for candidate in candidates):
        raise BadWebhook("the webhook signature does not match its body")
    # Checked after the MAC, so an attacker cannot probe the clock with forged headers.
    age = (time.time() if now is None else now) - timestamp
    if abs(age) > tolerance_seconds:
        raise BadWebhook(
            f"the webhook was signed {int(age)} s ago, outside the {tolerance_seconds} s tolerance"
        )
    return timestamp
