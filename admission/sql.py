"""Raw statements of the waiting room, each the whole decision it names."""

from __future__ import annotations

from holds import sql as holds
from inventory.sql import variant_available
from shop.sql import STATE

# Join before the draw: insert tickets without a number (one per buyer of the batch) only while
# the entry list is open.
# FOR SHARE on the queue row makes the list's close (FOR UPDATE) wait for joins in flight, and
# a join that waited re-checks entries_closed_at: no early joiner is left out of the draw or
# put in twice. (The list closes at the start; the draw may follow it a few seconds later, when
# its beacon round exists: drawing.close_entries, drawing.draw.)
JOIN_BEFORE_DRAW = """
INSERT INTO admission_ticket (drop_id, buyer_id, joined_at)
SELECT q.drop_id, b.buyer, now()
  FROM admission_queue q
 CROSS JOIN unnest(%(buyers)s::bigint[]) AS b(buyer)
 WHERE q.drop_id = %(drop)s AND q.entries_closed_at IS NULL
   FOR SHARE OF q
ON CONFLICT (drop_id, buyer_id) DO NOTHING
RETURNING id, buyer_id, joined_at
"""

# Join after the draw with a number from the Redis counter. A number already taken (the
# counter was rebuilt while a join was in flight) fails UNIQUE (drop, number): retried.
JOIN_AFTER_DRAW = """
INSERT INTO admission_ticket (drop_id, buyer_id, number, joined_at)
VALUES (%(drop)s, %(buyer)s, %(number)s, now())
ON CONFLICT (drop_id, buyer_id) DO NOTHING
RETURNING id, joined_at
"""

# The lowest number the counter may hand out next: past every number in the table and past
# the admitted mark (a number inside it would be admitted at once, ahead of the line).
# max(number) is one read of the (drop, number) unique index.
NUMBER_FLOOR = """
SELECT GREATEST(
         (SELECT max(t.number) FROM admission_ticket t WHERE t.drop_id = q.drop_id),
         q.drawn_entries, q.admitted_through)
  FROM admission_queue q
 WHERE q.drop_id = %(drop)s
"""

# Give the early joiners their places from the draw, all in one statement.
NUMBER_DRAWN = """
UPDATE admission_ticket t
   SET number = drawn.number
  FROM unnest(%(ids)s::bigint[], %(numbers)s::int[]) AS drawn(id, number)
 WHERE t.id = drawn.id AND t.drop_id = %(drop)s AND t.number IS NULL
"""

# Admitted within the grace period (services.run_wave) and not yet come to buy: they may
# still, so a wave counts them against the stock it admits for.
ADMITTED_NOT_COME = """
SELECT count(*)
  FROM admission_ticket t
 WHERE t.drop_id = %(drop)s AND t.number > %(since)s AND t.number <= %(through)s
   AND NOT EXISTS (SELECT 1 FROM holds_hold h WHERE h.drop_id = t.drop_id AND h.buyer_id = t.buyer_id)
"""

# A ticket's offer is the hold made for it under this key (sale/offers.py); one per ticket, ever.
OFFER_KEY = "offer:{ticket}"

# The line's next tickets for returned units, in number order: drawn, the buyer's account
# active, and no hold of theirs in this drop ever (an offer is a hold; a buyer who held a unit,
# bought it or let it go, has had their turn). No "past the offer mark": a number handed out
# before a later one may commit after it, and must not be passed. Read under the WAVE lock.
NEXT_WAITING = """
SELECT t.id, t.number, t.buyer_id
  FROM admission_ticket t JOIN auth_user u ON u.id = t.buyer_id AND u.is_active
 WHERE t.drop_id = %(drop)s AND t.number IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM holds_hold h WHERE h.drop_id = t.drop_id AND h.buyer_id = t.buyer_id)
 ORDER BY t.number
 LIMIT %(limit)s
"""

# The offer made to a ticket, if any: (hold, state, expires_at, whether paying has started, the
# size of the unit that came back: '' for a drop of one variant).
# An offer has no request digest (a buyer's own hold always has one, whatever key they chose).
OFFER_OF = """
SELECT h.id, h.state, h.expires_at, h.extended, COALESCE(v.name, '')
  FROM holds_hold h LEFT JOIN shop_variant v ON v.id = h.variant_id
 WHERE h.drop_id = %(drop)s AND h.buyer_id = %(buyer)s AND h.idempotency_key = %(key)s
   AND h.request_digest = ''
"""

# Everything a snapshot of a drop needs, for every drop on sale or about to be, in one read
# (the last column: admitted tickets whose buyer has not had a unit yet, who will likely take
# what is left before anyone behind them).
# The state is computed with the database's clock, like the claim statements. "Available" is
# what a claim could get (holds.CLAIMABLE); what is returning to the line is counted apart.
SNAPSHOTS = f"""
SELECT d.id, d.slug, {STATE},
       {holds.CLAIMABLE},
       COALESCE((SELECT sum(h.quantity) FROM holds_hold h
                  WHERE h.drop_id = d.id AND h.state = 'held' AND h.expires_at > now()), 0),
       COALESCE(q.admitted_through, 0),
       (SELECT max(t.number) FROM admission_ticket t WHERE t.drop_id = d.id),
       (SELECT count(*) FROM admission_ticket t WHERE t.drop_id = d.id AND t.number IS NULL),
       q.seed_sha256, CASE WHEN q.drawn_at IS NOT NULL THEN q.seed END,
       (SELECT COALESCE(sum(w.admitted), 0) FROM admission_wave w
         WHERE w.drop_id = d.id AND w.at > now() - interval '2 minutes'),
       {holds.RETURNING}, COALESCE(q.offered_through, 0),
       (SELECT COALESCE(json_agg(json_build_array(v.id, v.name, v.position, v.quantity, v.price_minor,
                                                  {variant_available("v")}) ORDER BY v.position), '[]')
          FROM shop_variant v WHERE v.drop_id = d.id),
       (SELECT count(*) FROM admission_ticket a
         WHERE a.drop_id = d.id AND a.number <= COALESCE(q.admitted_through, 0)
           AND NOT EXISTS (SELECT 1 FROM holds_hold ah
                            WHERE ah.drop_id = a.drop_id AND ah.buyer_id = a.buyer_id)),
       q.drawn_entries, q.entries_sha256, q.beacon
  FROM shop_drop d LEFT JOIN admission_queue q ON q.drop_id = d.id
 WHERE d.id = ANY(%(drops)s)
"""

# The drawn line's cut entries (admission.state.Cuts), per drop: the drawn entry with the highest
# number inside the admitted mark, and the one with the lowest number from the first unlikely
# number on. Only drawn numbers (1..drawn) count: a later joiner's page knows its number already.
# Two reads of the (drop, number) unique index each.
CUTS = """
SELECT c.drop_id,
       (SELECT t.id FROM admission_ticket t
         WHERE t.drop_id = c.drop_id AND t.number <= LEAST(c.admitted, c.drawn)
         ORDER BY t.number DESC LIMIT 1),
       u.id, u.number
  FROM unnest(%(drops)s::bigint[], %(admitted)s::int[], %(unlikely)s::int[], %(drawn)s::int[])
       AS c(drop_id, admitted, unlikely, drawn)
  LEFT JOIN LATERAL (SELECT t.id, t.number FROM admission_ticket t
                      WHERE t.drop_id = c.drop_id AND t.number >= c.unlikely AND t.number <= c.drawn
                      ORDER BY t.number LIMIT 1) u ON true
"""

# The tickets of these (drop, buyer) pairs: (drop, buyer, entry, number). The edge answers a poll
# that carries only a bearer token from them (admission/edge.py, Edge._ticket_by_bearer).
TICKETS_OF = """
SELECT t.drop_id, t.buyer_id, t.id, t.number
  FROM unnest(%(drops)s::bigint[], %(buyers)s::bigint[]) AS k(drop_id, buyer_id)
  JOIN admission_ticket t ON t.drop_id = k.drop_id AND t.buyer_id = k.buyer_id
"""
