"""The face-value exchange's statements (sale/exchange.py, checkout/exchange.py): a listing's unit moves
from its seller to the next ticket in line through conditional UPDATEs, each naming its drop.

Lock order: the seller's order (checkout), then listing rows, then hold rows (the seller's and the
offers'). Listing a unit locks the seller's hold and inserts new listing rows, which nobody waits on.
"""

from __future__ import annotations

from holds.sql import ON_EXCHANGE
from inventory import sql as stock

# Whether drop `d` (shop_drop) trades on its exchange now, by the database's clock: one is set, it has
# not closed, the drop is not paused, and the sale is over (ended, or nothing left to claim or offer).
EXCHANGE_OPEN = f"""(d.exchange_closes_at IS NOT NULL AND now() < d.exchange_closes_at AND NOT d.paused
     AND (now() >= d.ends_at OR {stock.AVAILABLE} = 0))"""

# Whether the drop's exchange trades now (d = the drop). One row: (open, closed for good).
EXCHANGE_STATE = f"""
SELECT {EXCHANGE_OPEN}, d.exchange_closes_at IS NULL OR now() >= d.exchange_closes_at
  FROM shop_drop d WHERE d.id = %(drop)s
"""

# Put `n` units of the seller's sold hold on the exchange at `price` less `fee` each: the hold's listed
# count and the new listing rows in one statement, only while the exchange trades and the units are
# the seller's (`most`: the order's units not refunded or asked to be, read under the order's lock).
# Rows: the listings made; none: refused (the caller says why). Protects: a unit is listed once
# (holds_hold_exchange_within_sold), and never one refunded or asked to be.
LIST_UNITS = f"""
WITH seller AS (
    UPDATE holds_hold h SET listed = h.listed + %(n)s
      FROM shop_drop d
     WHERE h.id = %(hold)s AND h.drop_id = %(drop)s AND h.buyer_id = %(buyer)s AND h.state = 'sold'
       AND h.listed + %(n)s <= %(most)s AND h.refunded + h.listed + %(n)s <= h.quantity
       AND d.id = h.drop_id AND {EXCHANGE_OPEN}
    RETURNING h.id, h.drop_id
)
INSERT INTO holds_listing (drop_id, seller_hold_id, state, price_minor, fee_minor, created_at)
SELECT seller.drop_id, seller.id, 'listed', %(price)s, %(fee)s, now()
  FROM seller, generate_series(1, %(n)s)
RETURNING id
"""

# The seller takes back the units of their hold still waiting for a ticket (not one offered: that
# buyer may be paying). Locks the listings, then the hold. One row: the units taken back.
WITHDRAW = """
WITH gone AS (
    UPDATE holds_listing l SET state = 'withdrawn', ended_at = now()
     WHERE l.id IN (SELECT id FROM holds_listing
                     WHERE drop_id = %(drop)s AND seller_hold_id = %(hold)s AND state = 'listed'
                     ORDER BY id FOR UPDATE)
    RETURNING l.id
), back AS (
    UPDATE holds_hold h SET listed = h.listed - (SELECT count(*) FROM gone)
     WHERE h.id = %(hold)s AND h.drop_id = %(drop)s AND (SELECT count(*) FROM gone) > 0
    RETURNING h.id
)
SELECT (SELECT count(*) FROM gone)
"""

# An offer that ended unpaid (lapsed or released) gives its listing back to the line's next ticket.
# Runs under the drop's WAVE lock, before the next offers. Rows: the listings back.
RELIST_LAPSED = """
UPDATE holds_listing l SET state = 'listed', hold_id = NULL
 WHERE l.drop_id = %(drop)s AND l.state = 'offered'
   AND EXISTS (SELECT 1 FROM holds_hold h
                WHERE h.drop_id = l.drop_id AND h.id = l.hold_id AND h.state IN ('expired', 'released'))
RETURNING l.id
"""

# The listings waiting for a ticket, oldest first, locked: (listing, the seller's variant, price).
WAITING_LISTINGS = """
SELECT l.id, s.variant_id, l.price_minor FROM holds_listing l JOIN holds_hold s ON s.id = l.seller_hold_id
 WHERE l.drop_id = %(drop)s AND l.state = 'listed'
 ORDER BY l.id LIMIT %(limit)s
   FOR UPDATE OF l
"""

# An offer of one listed unit to each of the line's next tickets, in ticket order (sale/offers.py's
# INSERT_OFFERS, for the exchange): a hold of 1 unit of the seller's variant at the listing's price
# under the ticket's offer key, for the drop's offer_seconds, taking no stock (no bucket), only while
# the exchange trades and the buyer is under the per-buyer limit. A buyer who meanwhile holds a unit
# conflicts: no offer. Rows: (hold, buyer) made.
INSERT_OFFERS = f"""
INSERT INTO holds_hold
       (drop_id, variant_id, buyer_id, quantity, bucket_index, state, idempotency_key, request_digest,
        created_at, expires_at, extended, exchange, exchange_price_minor)
SELECT d.id, o.variant, o.buyer, 1, NULL, 'held', o.key, '',
       now(), now() + make_interval(secs => d.offer_seconds), false, true, o.price
  FROM unnest(%(buyers)s::bigint[], %(keys)s::text[], %(variants)s::bigint[], %(prices)s::int[])
       WITH ORDINALITY AS o(buyer, key, variant, price, ord)
  JOIN shop_drop d ON d.id = %(drop)s AND {EXCHANGE_OPEN}
 WHERE (SELECT COALESCE(sum(b.quantity - b.refunded), 0) FROM holds_hold b
         WHERE b.drop_id = d.id AND b.buyer_id = o.buyer AND b.state IN ('held', 'sold')) < d.per_buyer_limit
 ORDER BY o.ord
ON CONFLICT DO NOTHING
RETURNING id, buyer_id
"""

# The listings offered: each to its new hold, only while still listed (this transaction locked them).
# Protects: a listed unit is offered to one ticket at a time. Rows: the listings offered.
OFFER_LISTINGS = """
UPDATE holds_listing l SET state = 'offered', hold_id = v.hold
  FROM unnest(%(listings)s::bigint[], %(holds)s::bigint[]) AS v(listing, hold)
 WHERE l.drop_id = %(drop)s AND l.id = v.listing AND l.state = 'listed'
RETURNING l.id
"""

# The exchange closed (or the merchant took it away): what nobody took stays the seller's (their
# hold's listed count goes down).
# Listings first, then the sellers' holds. Rows: (seller's hold, units kept).
KEEP_UNSOLD = f"""
WITH kept AS (
    UPDATE holds_listing l SET state = 'kept', hold_id = NULL, ended_at = now()
      FROM shop_drop d
     WHERE l.drop_id = %(drop)s AND d.id = l.drop_id AND {ON_EXCHANGE}
       AND (d.exchange_closes_at IS NULL OR d.exchange_closes_at <= now())
    RETURNING l.seller_hold_id
), counted AS (
    SELECT seller_hold_id AS id, count(*) AS n FROM kept GROUP BY seller_hold_id
)
UPDATE holds_hold h SET listed = h.listed - counted.n
  FROM counted WHERE h.drop_id = %(drop)s AND h.id = counted.id
RETURNING h.id, counted.n
"""

# The new buyer's payment was captured: the listing their hold bought is paid out, and the unit leaves
# its seller's hold as refunded and resold, in one statement. After the seller's order and payment
# rows are locked (checkout's order). One row: (listing, seller's hold, price, fee); none: not an
# exchange sale, or paid out already. Protects: a seller is paid once per unit (also the refund's
# one-to-one listing).
PAY_OUT = """
WITH paid AS (
    UPDATE holds_listing SET state = 'paid', ended_at = now()
     WHERE drop_id = %(drop)s AND hold_id = %(hold)s AND state = 'sold'
    RETURNING id, seller_hold_id, price_minor, fee_minor
), seller AS (
    UPDATE holds_hold h SET listed = h.listed - 1, refunded = h.refunded + 1, resold = h.resold + 1
      FROM paid WHERE h.drop_id = %(drop)s AND h.id = paid.seller_hold_id
    RETURNING h.id
)
SELECT paid.id, paid.seller_hold_id, paid.price_minor, paid.fee_minor FROM paid
"""

# Drops whose exchange has work: units listed or offered (to offer, to pass on, or to keep once it
# closed). A drop on sale with nothing listed costs the tick nothing. Read only.
EXCHANGE_DROPS = "SELECT DISTINCT drop_id FROM holds_listing WHERE state IN ('listed', 'offered')"
