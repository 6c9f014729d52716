"""Every raw statement of the hold lifecycle. Each transition is one conditional UPDATE.

A transition that changes one hold row credits its stock back in the same
statement (data-modifying CTEs run exactly once), so stock is returned once or
not at all. The stock side of each is inventory's SQL; this module names no stock
table. Lock order (core.locks): hold rows first, then stock rows.

Every statement of the reserve path names its drop (`drop_id = %(drop)s`), so with the tables
distributed by drop a claim is one shard's transaction (docs/SCALING.md, tests/test_sharding.py).
"""

from __future__ import annotations

from inventory import sql as stock
from shop.sql import AUDIENCE, LIVE, MAY_TAKE_PART

# Start a hold for a buyer with an idempotency key; expiry from the drop's hold time
# on the database clock. ON CONFLICT covers both unique rules: the same key again
# (the caller looks the hold up) and a second active hold of the buyer (refused).
# 1 row: a new hold; 0 rows: a conflict, or an account deactivated since its token or session
# was cached (no claim of a banned buyer, whatever a cache still says), or one that may not take
# part in this drop (a rehearsal's). Waits only for a concurrent insert of the same key or buyer
# to commit or roll back.
INSERT_HOLD = f"""
INSERT INTO holds_hold
       (drop_id, variant_id, buyer_id, quantity, bucket_index, state, idempotency_key, request_digest,
        created_at, expires_at, extended)
SELECT d.id, %(variant)s, u.id, %(q)s, %(index)s, 'held', %(key)s, %(digest)s,
       now(), now() + make_interval(secs => d.hold_seconds), false
  FROM shop_drop d JOIN auth_user u ON u.id = %(buyer)s AND u.is_active AND {AUDIENCE}
 WHERE d.id = %(drop)s
ON CONFLICT DO NOTHING
RETURNING id, created_at, expires_at
"""

# INSERT_HOLD for a batch of claims, in arrival order, of the buyers MAY_TAKE_PART lets in,
# in one statement (a batch's round trips are its cost under a crowd). Rows: ('buyer', NULL,
# buyer, may take part) for each active account asked about, and ('hold', id, buyer, NULL, key,
# created, expires) for each hold started; a claim of an eligible buyer with no hold row
# conflicted (its key again, or the buyer's other active hold, also within the batch) and is
# answered by the single path, which looks it up.
INSERT_HOLDS = f"""
WITH eligible (id, may) AS ({MAY_TAKE_PART}), made AS (
    INSERT INTO holds_hold
           (drop_id, variant_id, buyer_id, quantity, bucket_index, state, idempotency_key,
            request_digest, created_at, expires_at, extended)
    SELECT d.id, %(variant)s, c.buyer, c.q, %(index)s, 'held', c.key, c.digest,
           now(), now() + make_interval(secs => d.hold_seconds), false
      FROM unnest(%(buyers)s::bigint[], %(qs)s::int[], %(keys)s::text[], %(digests)s::text[])
           WITH ORDINALITY AS c(buyer, q, key, digest, ord)
      JOIN eligible e ON e.id = c.buyer AND e.may
      JOIN shop_drop d ON d.id = %(drop)s
     ORDER BY c.ord
    ON CONFLICT DO NOTHING
    RETURNING id, buyer_id, idempotency_key, created_at, expires_at
)
SELECT 'buyer', NULL::bigint, id::bigint, may, NULL::text, NULL::timestamptz, NULL::timestamptz
  FROM eligible
 UNION ALL
SELECT 'hold', id, buyer_id, NULL, idempotency_key, created_at, expires_at FROM made
"""

# Spend one use of a presale code on the hold this transaction just inserted, and record it on the
# hold: one statement, inside the claim's transaction (after the hold row, before the stock: the
# lock order of core.locks, the code row between the two). Locks the code row until commit, so
# claims of one code queue here and each sees the uses the one before it committed.
# 1 row: spent; 0 rows: no such code in this drop, or used up (PRESALE_CODE_USES tells which).
# Protects: a code admits at most max_uses live or paid holds (also holds_presalecode_uses_within_max);
# a claim that fails later (sold out) rolls the use back with it, and a hold that ends unpaid gives it
# back (UNSPEND_CODES).
SPEND_PRESALE_CODE = """
WITH spent AS (
    UPDATE holds_presalecode SET uses = uses + 1
     WHERE drop_id = %(drop)s AND code = %(code)s AND uses < max_uses
    RETURNING id
)
UPDATE holds_hold h SET presale_code_id = spent.id
  FROM spent
 WHERE h.drop_id = %(drop)s AND h.id = %(hold)s
RETURNING spent.id
"""

# After a spend found nothing: whether the code exists in this drop. No row: unknown code.
PRESALE_CODE_USES = (
    "SELECT uses, max_uses FROM holds_presalecode WHERE drop_id = %(drop)s AND code = %(code)s"
)

# Spend one use of a discount code on a hold of this transaction (the claim's new one, or the one
# LOCK_HOLD_FOR_DISCOUNT locked) and record it on the hold: one statement, after the hold row (and a
# presale code's) and before the stock, the lock order of core.locks. Locks the code row until
# commit, so holds of one code queue here and each sees the uses the one before it committed.
# The code must be the drop's or the shop's, not used up, inside its window (the database's clock),
# and an amount off must be in the drop's currency. 1 row: spent, with what it takes off; 0 rows:
# refused (DISCOUNT_CODE_STATE says why). Protects: a code discounts at most max_uses live or paid
# holds (also holds_discountcode_uses_within_max); a claim that fails later rolls the use back.
SPEND_DISCOUNT_CODE = """
WITH spent AS (
    UPDATE holds_discountcode c SET uses = c.uses + 1
     WHERE c.code = %(code)s AND (c.drop_id IS NULL OR c.drop_id = %(drop)s) AND c.uses < c.max_uses
       AND (c.starts_at IS NULL OR c.starts_at <= now()) AND (c.ends_at IS NULL OR now() < c.ends_at)
       AND (c.amount_minor IS NULL OR c.currency = (
            SELECT p.currency FROM shop_drop d JOIN shop_product p ON p.id = d.product_id
             WHERE d.id = %(drop)s))
    RETURNING c.id, c.percent, c.amount_minor, c.currency
)
UPDATE holds_hold h SET discount_code_id = spent.id
  FROM spent
 WHERE h.drop_id = %(drop)s AND h.id = %(hold)s
RETURNING spent.id, spent.percent, spent.amount_minor, spent.currency
"""

# After a spend found nothing: why. No row: no such code. Else (its drop, or NULL for the shop's;
# used up; not started; ended; an amount in another currency than the drop's). Read only.
DISCOUNT_CODE_STATE = """
SELECT c.drop_id, c.uses >= c.max_uses, c.starts_at > now(), c.ends_at <= now(),
       c.amount_minor IS NOT NULL AND c.currency <> (
           SELECT p.currency FROM shop_drop d JOIN shop_product p ON p.id = d.product_id
            WHERE d.id = %(drop)s)
  FROM holds_discountcode c WHERE c.code = %(code)s
"""

# A code entered on the hold page: lock the buyer's hold while it may still take one (held, time
# not up, payment not started: starting it extends the hold and fixes the price, no code yet; not an
# exchange offer, whose price is its listing's). Taken before the code row (core.locks' order).
# 1 row: locked; 0 rows: it may not.
LOCK_HOLD_FOR_DISCOUNT = """
SELECT id FROM holds_hold
 WHERE drop_id = %(drop)s AND id = %(hold)s AND buyer_id = %(buyer)s AND state = 'held'
   AND expires_at > now() AND NOT extended AND discount_code_id IS NULL AND NOT exchange
   FOR UPDATE
"""

# Giving back the presale and discount codes' uses of the holds a statement has just ended unpaid, as
# CTEs after a CTE named `ending` (id, drop_id, quantity, bucket_index, presale_code_id,
# discount_code_id). Each step reads the one before it, so they run in core.locks' order: presale
# code rows (id order), then discount code rows (id order), and only then `ended` (`ending`, once
# the uses are back) feeds the stock's give-back. A sold hold keeps its uses.
# Protects: a use comes back once per hold (the hold's state change is in the same statement).
UNSPEND_CODES = """presale_unspend AS (
    SELECT l.id, g.n FROM holds_presalecode l
      JOIN (SELECT presale_code_id AS id, count(*) AS n FROM ending
             WHERE presale_code_id IS NOT NULL GROUP BY presale_code_id) g ON g.id = l.id
     ORDER BY l.id
       FOR UPDATE OF l
), presale_unspent AS (
    UPDATE holds_presalecode c SET uses = c.uses - presale_unspend.n
      FROM presale_unspend WHERE c.id = presale_unspend.id
    RETURNING c.id
), unspend AS (
    SELECT l.id, g.n FROM holds_discountcode l
      JOIN (SELECT discount_code_id AS id, count(*) AS n FROM ending
             WHERE discount_code_id IS NOT NULL GROUP BY discount_code_id) g ON g.id = l.id
     WHERE (SELECT count(*) FROM presale_unspent) >= 0
     ORDER BY l.id
       FOR UPDATE OF l
), unspent AS (
    UPDATE holds_discountcode c SET uses = c.uses - unspend.n FROM unspend WHERE c.id = unspend.id
    RETURNING c.id
), ended AS (
    SELECT id, drop_id, quantity, bucket_index FROM ending WHERE (SELECT count(*) FROM unspent) >= 0
)"""

# Whether the buyer has a verified e-mail address on the drop's presale list (allauth keeps the
# addresses; the list keeps them lower-case). Read in the claim's transaction. 1 row: on the list.
ON_PRESALE_LIST = """
SELECT 1 FROM holds_presalelistentry p
  JOIN account_emailaddress e ON lower(e.email) = p.email AND e.verified AND e.user_id = %(buyer)s
 WHERE p.drop_id = %(drop)s
 LIMIT 1
"""

# BUYER_UNITS for a batch: the new holds whose buyer now holds or bought more units of the
# drop than its per-buyer limit, counting the new hold. Read after the insert.
OVER_LIMIT = """
SELECT h.id FROM holds_hold h JOIN shop_drop d ON d.id = h.drop_id
 WHERE h.drop_id = %(drop)s AND h.id = ANY(%(holds)s)
   AND (SELECT sum(o.quantity - o.refunded) FROM holds_hold o
         WHERE o.drop_id = h.drop_id AND o.buyer_id = h.buyer_id AND o.state IN ('held', 'sold'))
       > d.per_buyer_limit
"""

# Take back the batch's holds that got no stock, before its commit: nobody else has seen them.
DISCARD_HOLDS = "DELETE FROM holds_hold WHERE drop_id = %(drop)s AND id = ANY(%(holds)s) AND state = 'held'"

# The hold a key made, and the digest of what it asked for ('' before digests were kept).
FIND_BY_KEY = """
SELECT id, request_digest FROM holds_hold
 WHERE drop_id = %(drop)s AND buyer_id = %(buyer)s AND idempotency_key = %(key)s
"""

# The buyer's active hold and whether its time is up (the database clock decides).
FIND_ACTIVE = """
SELECT id, expires_at <= now() FROM holds_hold
 WHERE drop_id = %(drop)s AND buyer_id = %(buyer)s AND state = 'held'
"""

# Units the buyer holds or bought in this drop, the new hold included (a refunded unit is no
# longer bought). Runs after the insert, which serialises a buyer's concurrent reserves on the
# one-active-hold index.
BUYER_UNITS = """
SELECT COALESCE(sum(quantity - refunded), 0) FROM holds_hold
 WHERE drop_id = %(drop)s AND buyer_id = %(buyer)s AND state IN ('held', 'sold')
"""

SET_BUCKET = "UPDATE holds_hold SET bucket_index = %(index)s WHERE drop_id = %(drop)s AND id = %(hold)s"

# SET_BUCKET for the holds of a batch that a probed bucket served (rows this transaction made).
SET_BUCKETS = """
UPDATE holds_hold h SET bucket_index = v.index
  FROM unnest(%(holds)s::bigint[], %(indexes)s::int[]) AS v(id, index)
 WHERE h.drop_id = %(drop)s AND h.id = v.id
"""

# HELD -> RELEASED for the hold's buyer (or anyone, with buyer NULL), crediting its
# units back (inventory's GIVE_BACK) and its presale and discount codes' uses (UNSPEND_CODES). Locks
# the hold row, then its code rows, then its stock rows.
# Returns (holds changed, units credited, the drop if they went to its waiting room's line):
# (1, q, drop or NULL) released; (0, 0, NULL) not held any more.
# Protects: stock credited once per hold.
RELEASE_HOLD = f"""
WITH ending AS (
    UPDATE holds_hold SET state = 'released', ended_at = now()
     WHERE id = %(hold)s AND state = 'held'
       AND (%(buyer)s::bigint IS NULL OR buyer_id = %(buyer)s::bigint)
    RETURNING id, drop_id, quantity, bucket_index, presale_code_id, discount_code_id
), {UNSPEND_CODES}, {stock.GIVE_BACK}
SELECT (SELECT count(*) FROM ended), {stock.GIVEN_BACK},
       (SELECT ld.id FROM ended JOIN shop_drop ld ON ld.id = ended.drop_id AND ld.waiting_room)
"""

# An exchange offer's listing is sold with its hold, as a CTE after `sold` (id, drop_id, exchange):
# the unit now counts in the new buyer's hold, and the seller's refund waits for the capture.
SELL_LISTING = """listing AS (
    UPDATE holds_listing l SET state = 'sold'
      FROM sold WHERE sold.exchange AND l.hold_id = sold.id AND l.state = 'offered'
    RETURNING l.id
)"""

# HELD -> SOLD while the hold has not expired: clock_timestamp(), not now(), so a confirm
# that waited for the row lock checks the time it actually decides at. Locks the hold
# row, then its unit rows. 1 row: sold; 0 rows: expired, released or already sold.
# Protects: a hold is sold or expired, never both.
CONFIRM_HOLD = f"""
WITH sold AS (
    UPDATE holds_hold SET state = 'sold', ended_at = now()
     WHERE id = %(hold)s AND state = 'held' AND expires_at > clock_timestamp()
    RETURNING id, drop_id, exchange
), {stock.MARK_SOLD}, {SELL_LISTING}
SELECT (SELECT count(*) FROM sold)
"""

# Refund `units` more of a sold hold's units, and with restock put them back on sale
# (inventory's RESTOCK); a unit bought through the exchange and cancelled before its capture goes
# back to its listing instead (no stock: the seller still owns it). Locks the hold row, then its
# stock rows (or its listing). Returns (holds changed, units back, the drop if they went to its
# waiting room's line): (1, n, drop or NULL) done; (0, 0, NULL) not sold, or more than its
# unrefunded units (listed ones are not refundable). Protects: a unit is refunded once and comes
# back once (also holds_hold_refunds_within_sold, holds_hold_exchange_within_sold).
REFUND_UNITS = f"""
WITH back AS (
    UPDATE holds_hold
       SET refunded = refunded + %(units)s,
           restocked = restocked + CASE WHEN %(restock)s THEN %(units)s ELSE 0 END
     WHERE id = %(hold)s AND state = 'sold' AND refunded + listed + %(units)s <= quantity
    RETURNING id, drop_id, CASE WHEN %(restock)s THEN %(units)s ELSE 0 END AS units, bucket_index, exchange
), {stock.RESTOCK}, relisted AS (
    UPDATE holds_listing l SET state = 'listed', hold_id = NULL
      FROM back WHERE back.exchange AND back.units > 0 AND l.hold_id = back.id AND l.state = 'sold'
    RETURNING l.id
)
SELECT (SELECT count(*) FROM back), {stock.RESTOCKED} + (SELECT count(*) FROM relisted),
       (SELECT ld.id FROM back JOIN shop_drop ld ON ld.id = back.drop_id AND ld.waiting_room)
"""

# HELD -> EXPIRED for up to `limit` holds of a drop whose time is up, crediting their
# units back and their codes' uses. Skips hold rows a confirm or release has locked (that
# one decides them), so it never blocks a buyer. Runs under the drop's RECLAIM advisory lock.
# Returns (holds expired, units credited). Protects: credited once per hold.
EXPIRE_DUE_HOLDS = f"""
WITH due AS (
    SELECT id FROM holds_hold
     WHERE drop_id = %(drop)s AND state = 'held' AND expires_at <= now()
     ORDER BY expires_at LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
), ending AS (
    UPDATE holds_hold h SET state = 'expired', ended_at = now()
      FROM due WHERE h.id = due.id AND h.state = 'held'
    RETURNING h.id, h.drop_id, h.quantity, h.bucket_index, h.presale_code_id, h.discount_code_id
), {UNSPEND_CODES}, {stock.GIVE_BACK}
SELECT (SELECT count(*) FROM ended), {stock.GIVEN_BACK}
"""

DROPS_WITH_DUE_HOLDS = """
SELECT DISTINCT drop_id FROM holds_hold WHERE state = 'held' AND expires_at <= now() LIMIT %(limit)s
"""

# Make a live hold ready for payment: the buyer's own, still held and unexpired; extended
# once (a second start keeps the first extension). Locks the hold row until commit.
# 1 row: ready (its quantity and drop); 0 rows: not the buyer's, or no longer held.
HOLD_FOR_PAYMENT = """
UPDATE holds_hold h
   SET expires_at = CASE WHEN h.extended THEN h.expires_at
                         ELSE now() + make_interval(secs => d.hold_seconds) END,
       extended = true
  FROM shop_drop d
 WHERE h.id = %(hold)s AND h.buyer_id = %(buyer)s AND h.state = 'held' AND h.expires_at > now()
   AND d.id = h.drop_id
RETURNING h.quantity, h.drop_id
"""

# The provider authorised this hold's payment and the event waits to be applied (stored by the
# webhook, its task not run yet): the hold lasts until `seconds` after the event first arrived,
# so a worker that is late or down cannot let it expire under a buyer who paid (a redelivery
# extends nothing). Only a held hold whose time is not up; locks the hold row until commit.
# Protects: a paid hold is not expired and resold while its confirmation waits. 1 row: pinned.
PIN_FOR_SETTLEMENT = """
UPDATE holds_hold SET expires_at = greatest(expires_at, %(since)s + make_interval(secs => %(seconds)s))
 WHERE id = %(hold)s AND state = 'held' AND expires_at > clock_timestamp()
RETURNING id
"""

# "I need more time" on the buyer's held hold whose payment has not started: half its first window more
# (expires_at - created_at is that window times 1 + more_time / 2), while more_time < %(most)s.
# Protects: the line's wait (a hold lasts at most twice the time the merchant set before payment).
# 1 row: (new expiry, presses so far); 0 rows: used up, ended, paying, or not the buyer's.
MORE_TIME = """
UPDATE holds_hold
   SET expires_at = expires_at + (expires_at - created_at) / (2 + more_time), more_time = more_time + 1
 WHERE id = %(hold)s AND drop_id = %(drop)s AND buyer_id = %(buyer)s AND state = 'held'
   AND expires_at > clock_timestamp() AND NOT extended AND more_time < %(most)s
RETURNING expires_at, more_time
"""

# Why MORE_TIME changed nothing: a row here means the hold is live and its presses are used up.
MORE_TIME_LEFT = """
SELECT 1 FROM holds_hold
 WHERE id = %(hold)s AND drop_id = %(drop)s AND buyer_id = %(buyer)s AND state = 'held' AND expires_at > now()
   AND NOT extended AND more_time >= %(most)s
"""

# A held hold of the buyer whose payment has not started (the price is fixed once it has), locked
# for a change of variant: (quantity, variant, bucket index). No row: not the buyer's, ended, paying,
# or an offer of a unit on the face-value exchange (that unit is one seller's, in its size).
LOCK_HOLD_FOR_SIZE_CHANGE = """
SELECT quantity, variant_id, bucket_index FROM holds_hold
 WHERE id = %(hold)s AND drop_id = %(drop)s AND buyer_id = %(buyer)s AND state = 'held' AND expires_at > now()
   AND NOT extended AND NOT exchange
   FOR UPDATE
"""

SET_HOLD_VARIANT = (
    "UPDATE holds_hold SET variant_id = %(variant)s, bucket_index = %(index)s"
    " WHERE id = %(hold)s AND drop_id = %(drop)s"
)

# Returned units offered to each of the line's next tickets (sale/offers.py): a hold of `q` units
# (up to the buyer's limit) of one bucket or variant, for the drop's offer_seconds under the
# ticket's offer key, in ticket order, only while the drop is live. A buyer who meanwhile started
# a hold of their own conflicts (one active hold): no offer, they have a unit. Rows: (hold, buyer)
# made. Stock is taken after, as every claim's.
INSERT_OFFERS = f"""
INSERT INTO holds_hold
       (drop_id, variant_id, buyer_id, quantity, bucket_index, state, idempotency_key, request_digest,
        created_at, expires_at, extended)
SELECT d.id, o.variant, o.buyer, o.q, o.index, 'held', o.key, '',
       now(), now() + make_interval(secs => d.offer_seconds), false
  FROM unnest(%(buyers)s::bigint[], %(keys)s::text[], %(qs)s::int[], %(indexes)s::int[],
              %(variants)s::bigint[]) WITH ORDINALITY AS o(buyer, key, q, index, variant, ord)
  JOIN shop_drop d ON d.id = %(drop)s AND {LIVE}
 ORDER BY o.ord
ON CONFLICT DO NOTHING
RETURNING id, buyer_id
"""

# An offer's statements never wait long for a buyer's claim (whose hold insert or bucket lock
# it may meet): it gives way and the next tick tries again, so a claim is never the deadlock's victim.
OFFER_LOCK_TIMEOUT = "SET LOCAL lock_timeout = '200ms'"

# An offer sent the moment units came back waits this long for the line's lock (a wave, another
# offerer), then leaves them to the next tick.
OFFER_WAIT_TIMEOUT = "SET LOCAL lock_timeout = '2s'"


# Units of held holds whose time is up and that nobody has reclaimed yet (d = shop_drop):
# a claim that finds no stock reclaims them inline, so a filter in front counts them too.
EXPIRED_UNRECLAIMED = """COALESCE((SELECT sum(eh.quantity) FROM holds_hold eh
   WHERE eh.drop_id = d.id AND eh.state = 'held' AND eh.expires_at <= now()), 0)"""

# What a claim could get right now: open units, plus expired, unreclaimed ones where a
# reclaim makes them open (in a waiting-room drop it makes them the line's instead).
CLAIMABLE = f"({stock.OPEN} + CASE WHEN d.waiting_room THEN 0 ELSE {EXPIRED_UNRECLAIMED} END)"

# What is on its way to a waiting room's line: returned units and expired holds' units.
RETURNING = f"({stock.RETURNED} + CASE WHEN d.waiting_room THEN {EXPIRED_UNRECLAIMED} ELSE 0 END)"

# Units a claim could get per drop (available plus expired, unreclaimed); read only.
CLAIMABLE_BY_DROP = f"SELECT d.id, {CLAIMABLE} FROM shop_drop d WHERE d.id = ANY(%(drops)s)"

# A listing whose unit is on the exchange (l = holds_listing): waiting for a ticket, or offered to
# one whose offer has ended (it goes to the next). Offered and live, the unit is that offer's held
# unit; sold, it is the new buyer's.
ON_EXCHANGE = """(l.state = 'listed' OR (l.state = 'offered' AND EXISTS (
       SELECT 1 FROM holds_hold lh WHERE lh.id = l.hold_id AND lh.state IN ('expired', 'released'))))"""

# The same per variant, for the variants of a drop in position order: (variant, name, quantity,
# available, held, sold, refunded, exchange). Read only; one statement, one snapshot.
INVARIANT_BY_VARIANT = f"""
SELECT v.id, v.name, v.quantity, {stock.VARIANT_OPEN} + {stock.variant_returned("v")},
       COALESCE(h.held, 0), COALESCE(h.sold, 0), COALESCE(h.refunded, 0), COALESCE(x.units, 0)
  FROM shop_variant v
  LEFT JOIN LATERAL (
       SELECT sum(quantity) FILTER (WHERE state = 'held') AS held,
              sum(quantity - refunded - listed) FILTER (WHERE state = 'sold') AS sold,
              sum(refunded - restocked - resold) FILTER (WHERE state = 'sold') AS refunded
         FROM holds_hold WHERE drop_id = v.drop_id AND variant_id = v.id
  ) h ON true
  LEFT JOIN LATERAL (
       SELECT count(*) AS units FROM holds_listing l JOIN holds_hold s ON s.id = l.seller_hold_id
        WHERE l.drop_id = v.drop_id AND s.variant_id = v.id AND {ON_EXCHANGE}
  ) x ON true
 WHERE v.drop_id = %(drop)s
 ORDER BY v.position
"""

# available + held + sold + refunded + exchange = quantity, all terms from one statement, so one
# snapshot. A refunded unit leaves `sold`; put back on sale it is available again, resold through
# the exchange it is the new buyer's, else it counts as refunded. A unit on the exchange leaves its
# seller's `sold` until it is resold or kept. Read only. Units mode counts unit rows; the hold sums
# must agree with them (a unit refunded and kept off sale keeps its sold row).
INVARIANT = f"""
SELECT d.quantity, {stock.AVAILABLE},
       COALESCE(h.held, 0), COALESCE(h.sold, 0), COALESCE(h.refunded, 0), COALESCE(h.expired_unreclaimed, 0),
       COALESCE(h.expired_holds, 0),
       {stock.UNITS_HELD}, {stock.UNITS_SOLD},
       d.inventory_mode,
       (SELECT count(*) FROM holds_listing l WHERE l.drop_id = d.id AND {ON_EXCHANGE})
  FROM shop_drop d
  LEFT JOIN LATERAL (
       SELECT sum(quantity) FILTER (WHERE state = 'held') AS held,
              sum(quantity - refunded - listed) FILTER (WHERE state = 'sold') AS sold,
              sum(refunded - restocked - resold) FILTER (WHERE state = 'sold') AS refunded,
              sum(quantity) FILTER (WHERE state = 'held' AND expires_at <= now()) AS expired_unreclaimed,
              count(*) FILTER (WHERE state = 'expired') AS expired_holds
         FROM holds_hold WHERE drop_id = d.id
  ) h ON true
 WHERE d.id = %(drop)s
"""
