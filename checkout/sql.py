"""Raw statements of the payment saga."""

from __future__ import annotations

# Store a verified provider event once per (provider, event id). 1 row: new, or seen but
# not yet processed (its task may have been lost); 0 rows: already processed.
RECORD_EVENT = """
INSERT INTO checkout_webhookevent (provider, event_id, type, payload, received_at, outcome)
VALUES (%(provider)s, %(event)s, %(type)s, %(payload)s, now(), '')
ON CONFLICT (provider, event_id) DO UPDATE SET type = EXCLUDED.type
  WHERE checkout_webhookevent.processed_at IS NULL
RETURNING id
"""

MARK_PROCESSED = """
UPDATE checkout_webhookevent SET processed_at = now(), outcome = %(outcome)s
 WHERE id = %(event)s AND processed_at IS NULL
"""
