"""Raw statements of the payment saga."""

from __future__ import annotations

from inventory import sql as stock

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

# When a drop's reminders go (d = shop_drop): its start, or for a drop with a waiting room the
# room's opening (%(room_lead)s seconds before the start, admission.work.ROOM_OPENS), since who joins
# before the start is drawn with everyone else and who waits for the start comes after them all.
REMINDED_AT = (
    "(d.starts_at - CASE WHEN d.waiting_room THEN make_interval(secs => %(room_lead)s) ELSE interval '0' END)"
)

# A buyer's reminder of a drop, only while its REMINDED_AT is ahead (the database's clock) and it
# is no rehearsal's copy. No row back: already asked (the unique (drop, buyer) kept the first;
# the caller looks it up) or the drop is open, over, or unknown. Locks nothing beyond the new row.
ASK_REMINDER = f"""
INSERT INTO checkout_reminder (drop_id, buyer_id, created_at)
SELECT d.id, %(buyer)s, now() FROM shop_drop d
 WHERE d.id = %(drop)s AND now() < {REMINDED_AT} AND d.rehearsal_of_id IS NULL
ON CONFLICT (drop_id, buyer_id) DO NOTHING
RETURNING id
"""

# The reminders of drops that are open now (past REMINDED_AT, not ended; paused counts: the page
# says so), up to a batch, each marked sent once: SKIP LOCKED leaves the rows another sender holds to
# it, and the UPDATE's `sent_at IS NULL` is rechecked on the row it locks. The caller writes the
# e-mails' outbox rows in the same transaction. Rows back: the reminders this caller sends.
TAKE_DUE_REMINDERS = f"""
WITH due AS (
  SELECT r.id FROM checkout_reminder r JOIN shop_drop d ON d.id = r.drop_id
   WHERE r.sent_at IS NULL AND {REMINDED_AT} <= now() AND now() < d.ends_at
   ORDER BY r.id LIMIT %(limit)s
     FOR UPDATE OF r SKIP LOCKED
)
UPDATE checkout_reminder r SET sent_at = now()
  FROM due WHERE r.id = due.id AND r.sent_at IS NULL
RETURNING r.id, r.drop_id, r.buyer_id
"""

# A reminder batch waits at most this long for another transaction (one writing the same
# outbox key): past it the batch rolls back and its task is retried, holding nothing meanwhile.
REMINDER_LOCK_TIMEOUT = "SET LOCAL lock_timeout = '2s'"

# A raffle's entrants to tell their result by e-mail, once each (key raffle-<ticket>; admission's
# ticket, the offer hold made for it under 'offer:<ticket>', sale/offers.py): `won` for an entry
# that got a unit (its hold: where to pay, by when), `lost` for a ranked entry that never did once
# the raffle is decided (every unit sold and none held or on its way back, or the drop over).
# Rows: (ticket, drop, buyer, result, hold or NULL), at most `limit`. Read only; the outbox's
# unique (topic, key) keeps a message to one per entrant whoever writes it.
RAFFLE_RESULTS_DUE = f"""
WITH raffle AS MATERIALIZED (
    SELECT d.id,
           d.ends_at <= now()
           OR ({stock.AVAILABLE} = 0
               AND NOT EXISTS (SELECT 1 FROM holds_hold hh WHERE hh.drop_id = d.id AND hh.state = 'held'))
           AS decided
      FROM shop_drop d JOIN admission_queue q ON q.drop_id = d.id AND q.drawn_at IS NOT NULL
     WHERE d.raffle AND d.ends_at > now() - interval '1 day'
)
SELECT t.id, t.drop_id, t.buyer_id, CASE WHEN h.id IS NOT NULL THEN 'won' ELSE 'lost' END, h.id
  FROM raffle r
  JOIN admission_ticket t ON t.drop_id = r.id AND t.number IS NOT NULL
  LEFT JOIN holds_hold h ON h.drop_id = t.drop_id AND h.buyer_id = t.buyer_id
        AND h.idempotency_key = 'offer:' || t.id AND h.request_digest = ''
 WHERE (h.id IS NOT NULL OR r.decided)
   AND NOT EXISTS (SELECT 1 FROM checkout_outboxmessage o
                    WHERE o.topic = %(topic)s AND o.key = 'raffle-' || t.id)
 ORDER BY t.drop_id, t.number
 LIMIT %(limit)s
"""

# Record a dispute the first time any of its events is applied (created, or a later one first:
# events may come out of order). Locks only the new row. 1 row: new, the merchant is told;
# 0 rows: known already (UPDATE_DISPUTE then). Protects: one row per provider dispute
# (checkout_dispute_once), so duplicate and racing deliveries record it once.
OPEN_DISPUTE = """
INSERT INTO checkout_dispute (order_id, payment_id, provider, dispute_id, state, amount_minor, currency,
                              reason, evidence_due_at, opened_at, closed_at, last_event_at, updated_at)
VALUES (%(order)s, %(payment)s, %(provider)s, %(dispute)s, %(state)s, %(amount)s, %(currency)s,
        %(reason)s, %(due)s, now(), CASE WHEN %(state)s IN ('won', 'lost') THEN now() END, %(at)s, now())
ON CONFLICT (provider, dispute_id) DO NOTHING
RETURNING id, state
"""

# Move a known dispute to what a later event says. Locks the dispute row. 1 row: applied (a state
# of won or lost closes it: the merchant is told); 0 rows: decided already, or the event is older
# than the last one applied (late). Protects: a decided dispute stays as decided, and a late event
# never undoes a newer one (checkout_dispute_closed_when_decided keeps closed_at with the state).
UPDATE_DISPUTE = """
UPDATE checkout_dispute
   SET state = %(state)s, amount_minor = %(amount)s, reason = %(reason)s,
       evidence_due_at = COALESCE(%(due)s, evidence_due_at),
       closed_at = CASE WHEN %(state)s IN ('won', 'lost') THEN now() END,
       last_event_at = %(at)s, updated_at = now()
 WHERE provider = %(provider)s AND dispute_id = %(dispute)s
   AND state NOT IN ('won', 'lost') AND last_event_at <= %(at)s
RETURNING id, state
"""

# The next number of one gapless sequence ('invoice', 'credit_note'): the counter row is created on
# first use (a fresh shop, a flushed test database) and otherwise incremented, and either way stays
# locked until the calling transaction ends. Concurrent confirmations queue on it and get
# consecutive numbers; a rollback gives the number back. A PostgreSQL SEQUENCE cannot do this: it
# never hands a number back, so every rolled-back confirmation would leave a gap. Run it last in
# its transaction: the row is the hottest in the shop while a drop sells.
# Always 1 row: the number taken.
NEXT_NUMBER = """
INSERT INTO checkout_invoicecounter (sequence, last_number) VALUES (%(sequence)s, 1)
ON CONFLICT (sequence) DO UPDATE SET last_number = checkout_invoicecounter.last_number + 1
RETURNING last_number
"""

# A browser's push subscription stored for the buyer who sent it, in one statement: the same
# endpoint again (a fresh subscribe, or another buyer signed in on that browser) takes the new keys
# and buyer. Locks the endpoint's row. Row: (id, true when new). Protects: one row per endpoint
# (checkout_pushsubscription_once), so a browser is never pushed to twice for one moment.
SUBSCRIBE_PUSH = """
INSERT INTO checkout_pushsubscription (buyer_id, endpoint, p256dh, auth, created_at)
VALUES (%(buyer)s, %(endpoint)s, %(p256dh)s, %(auth)s, now())
ON CONFLICT (endpoint) DO UPDATE
   SET buyer_id = EXCLUDED.buyer_id, p256dh = EXCLUDED.p256dh, auth = EXCLUDED.auth
RETURNING id, (xmax = 0)
"""

# The turn pushes due and not yet written, for subscribed buyers only (the join starts from the
# few subscriptions): `admitted` for a ticket inside its line's admitted mark whose buyer has not
# come to buy (no hold of theirs in the drop), and `offered` for a returned unit held for a ticket
# (sale/offers.py's key 'offer:<ticket>') still held. A raffle's offers are its results (push.RAFFLE,
# written with its e-mails). Rows: (moment, subscription, ticket or hold, drop, buyer), at most
# `limit`. Read only; the outbox's unique (topic, key) keeps a push to one per moment and
# subscription whoever writes it.
TURN_PUSHES_DUE = """
(SELECT 'admitted', s.id, t.id, t.drop_id, t.buyer_id
   FROM checkout_pushsubscription s
   JOIN admission_ticket t ON t.buyer_id = s.buyer_id AND t.number IS NOT NULL
   JOIN admission_queue q ON q.drop_id = t.drop_id AND t.number <= q.admitted_through
   JOIN shop_drop d ON d.id = t.drop_id AND NOT d.raffle AND d.ends_at > now()
  WHERE NOT EXISTS (SELECT 1 FROM holds_hold h WHERE h.drop_id = t.drop_id AND h.buyer_id = t.buyer_id)
    AND NOT EXISTS (SELECT 1 FROM checkout_outboxmessage o
                     WHERE o.topic = %(topic)s AND o.key = 'admitted-' || t.id || '-' || s.id)
  LIMIT %(limit)s)
UNION ALL
(SELECT 'offered', s.id, h.id, h.drop_id, h.buyer_id
   FROM checkout_pushsubscription s
   JOIN holds_hold h ON h.buyer_id = s.buyer_id AND h.state = 'held'
        AND h.idempotency_key LIKE 'offer:%%' AND h.request_digest = ''
   JOIN shop_drop d ON d.id = h.drop_id AND NOT d.raffle
  WHERE NOT EXISTS (SELECT 1 FROM checkout_outboxmessage o
                     WHERE o.topic = %(topic)s AND o.key = 'offered-' || h.id || '-' || s.id)
  LIMIT %(limit)s)
"""
