"""Disputes (chargebacks): what the provider's dispute events say, recorded on the order once.

A dispute is opened by the buyer's bank at the provider, days or weeks after the sale; the shop
can only answer it there, before its evidence deadline. So the saga records it (state, amount,
reason, deadline), tells the merchant by e-mail when it opens and when it is decided, and shows
it in the admin and on the dashboard. Nothing here moves units or money: the provider does.

Each event is applied once (the webhook event row, checkout.services.process_event); a dispute is
one row per provider dispute id (sql.OPEN_DISPUTE), and a decided one never changes again nor is
moved back by a late event (sql.UPDATE_DISPUTE).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from django.db import connection
from django.db.backends.utils import CursorWrapper

from checkout import outbox, sql
from checkout.models import DISPUTE_DECIDED, Dispute, Payment

log = logging.getLogger(__name__)

LAST_SECOND = 253_402_300_800  # 10000-01-01: past it a time cannot be stored (or made)


def apply_event_in(cursor: CursorWrapper, *, payment: Payment, provider: str, facts: dict[str, Any]) -> str:
    """Record one dispute event of this payment; returns the outcome for the event row.

    Runs inside process_event's transaction, which holds the event and payment rows.
    """
    assert connection.in_atomic_block, "apply_event_in runs inside process_event's transaction"
    params: dict[str, Any] = {
        "order": payment.order_id,
        "payment": payment.pk,
        "provider": provider,
        "dispute": str(facts.get("dispute_id") or ""),
        "state": str(facts.get("state") or ""),
        "amount": int(facts.get("amount_minor") or 0),
        "currency": str(facts.get("currency") or payment.currency),
        "reason": str(facts.get("reason") or "")[:100],
        "due": _moment(facts.get("due_by")),
        # an event without its time (none of ours) sorts as the oldest: it never undoes a dated one
        "at": _moment(facts.get("created")) or datetime.fromtimestamp(0, UTC),
    }
    cursor.execute(sql.OPEN_DISPUTE, params)
    row = cursor.fetchone()
    if row is not None:
        dispute = Dispute.objects.get(pk=row[0])
        outbox.announce_dispute(dispute, news="opened")
        if row[1] in DISPUTE_DECIDED:  # its first event we hear of is its decision
            outbox.announce_dispute(dispute, news="decided")
        log.warning("order %s: dispute %s opened (%s)", payment.order_id, params["dispute"], row[1])
        return f"dispute_opened_{row[1]}"
    cursor.execute(sql.UPDATE_DISPUTE, params)
    row = cursor.fetchone()
    if row is None:
        return "dispute_unchanged"  # decided already, or an event older than the last applied
    if row[1] in DISPUTE_DECIDED:
        outbox.announce_dispute(Dispute.objects.get(pk=row[0]), news="decided")
        log.warning("order %s: dispute %s %s", payment.order_id, params["dispute"], row[1])
    return f"dispute_{row[1]}"


def _moment(unix: object) -> datetime | None:
    """A provider's unix seconds as a time; 0, missing or not a number: none."""
    if isinstance(unix, bool) or not isinstance(unix, int) or not 0 < unix < LAST_SECOND:
        return None
    return datetime.fromtimestamp(unix, UTC)
