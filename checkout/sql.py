"""Raw statements of the payment saga."""

from __future__ import annotations

# Store a verified provider event once per (provider, event id); the first delivery is kept
# whole (the no-op update only returns the row). 1 row: new, or the same event seen but not
# yet processed (its task may have been lost); 0 rows: already processed, or a different
# body under a known id (SAME_EVENT tells which).
RECORD_EVENT = """
INSERT INTO checkout_webhookevent (provider, event_id, type, payload, facts, received_at, outcome)
VALUES (%(provider)s, %(event)s, %(type)s, %(payload)s, %(facts)s, now(), '')
ON CONFLICT (provider, event_id) DO UPDATE SET type = checkout_webhookevent.type
  WHERE checkout_webhookevent.processed_at IS NULL
    AND checkout_webhookevent.type = EXCLUDED.type AND checkout_webhookevent.payload = EXCLUDED.payload
RETURNING id, received_at
"""

# Whether the stored event of this id has this type and payload (jsonb equality: key order
# and spacing do not matter). No row: not stored (cannot happen after RECORD_EVENT's conflict).
SAME_EVENT = """
SELECT type = %(type)s AND payload = %(payload)s FROM checkout_webhookevent
 WHERE provider = %(provider)s AND event_id = %(event)s
"""

MARK_PROCESSED = """
UPDATE checkout_webhookevent SET processed_at = now(), outcome = %(outcome)s
 WHERE id = %(event)s AND processed_at IS NULL
"""

# PENDING -> FAILED for orders whose hold ended (released, expired, or past its time)
# before any payment decision. Conditional on the order's state: a confirm that won
# the race keeps its order. Rows changed: orders failed.
FAIL_ABANDONED_ORDERS = """
UPDATE checkout_order o
   SET state = 'failed', failure_reason = %(reason)s, updated_at = now()
  FROM holds_hold h
 WHERE h.id = o.hold_id AND o.state = 'pending'
   AND (h.state IN ('released', 'expired') OR (h.state = 'held' AND h.expires_at <= now()))
"""
