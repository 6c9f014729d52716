"""Every raw statement that changes or counts stock. Each one is the whole decision.

Lock order everywhere: hold rows first, then stock rows (buckets in index order,
units in rank order); the hot bucket row is always touched last. At commit, Django's
deferred foreign keys take KEY SHARE on the drop row, so nothing that holds a drop
row lock may wait for a bucket unless that lock is NO KEY UPDATE.
The sale window is checked inside each claim with the database's clock, so a
paused, unstarted or ended drop cannot be claimed from, whatever Python thought. The single
claims take `%(presale)s` (shop.sql.ON_SALE): true only for a claim admitted to the drop's
presale in the same transaction, which may then take units in the presale window.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from django.db.backends.utils import CursorWrapper

from shop.sql import LIVE, ON_SALE, PRESALE, STATE

# What any claim may take (d = shop_drop): free units in its buckets plus its unit rows in
# state 'available' (the partial index).
OPEN = """(COALESCE((SELECT sum(sb.available) FROM inventory_stockbucket sb WHERE sb.drop_id = d.id), 0)
   + (SELECT count(*) FROM inventory_unit su WHERE su.drop_id = d.id AND su.state = 'available'))"""

# Units given back in a waiting-room drop, waiting to be offered to the line's next ticket.
RETURNED = """(COALESCE((SELECT sum(rb.returned) FROM inventory_stockbucket rb WHERE rb.drop_id = d.id), 0)
   + (SELECT count(*) FROM inventory_unit ru WHERE ru.drop_id = d.id AND ru.state = 'returned'))"""

# Unit rows held and sold (units mode; the invariant checks them against the holds).
UNITS_HELD = "(SELECT count(*) FROM inventory_unit uh WHERE uh.drop_id = d.id AND uh.state = 'held')"
UNITS_SOLD = "(SELECT count(*) FROM inventory_unit us WHERE us.drop_id = d.id AND us.state = 'sold')"

# The one definition of a drop's available units (neither held nor sold), whatever its mode.
AVAILABLE = f"({OPEN} + {RETURNED})"

# Crediting buckets, as a CTE after a CTE named `credit` (id, units, line) of bucket rows locked:
# their units to the line in a waiting-room drop (`returned`), else to any claim (`available`).
CREDIT = """bucket AS (
    UPDATE inventory_stockbucket b
       SET available = b.available + CASE WHEN credit.line THEN 0 ELSE credit.units END,
           returned = b.returned + CASE WHEN credit.line THEN credit.units ELSE 0 END
      FROM credit WHERE b.id = credit.id
    RETURNING credit.units
)"""

# Giving units back, as CTEs that follow a CTE named `ended` (id, drop_id, quantity,
# bucket_index) of holds that the same statement has just ended: the hold transition and
# the credit are one statement, so a unit comes back exactly once. Buckets are locked in
# index order. A waiting-room drop's units come back as 'returned' (offered to the line in
# ticket order, sale/offers.py); another drop's are open to any claim at once.
GIVE_BACK = f"""credit AS (
    SELECT b.id, c.units, c.line FROM inventory_stockbucket b
      JOIN (SELECT e.drop_id, e.bucket_index, sum(e.quantity) AS units, bool_or(gd.waiting_room) AS line
              FROM ended e JOIN shop_drop gd ON gd.id = e.drop_id
             WHERE e.bucket_index IS NOT NULL GROUP BY e.drop_id, e.bucket_index) c
        ON b.drop_id = c.drop_id AND b.index = c.bucket_index
     ORDER BY b.index
       FOR UPDATE OF b
), {CREDIT}, units AS (
    UPDATE inventory_unit u
       SET state = CASE WHEN gd.waiting_room THEN 'returned' ELSE 'available' END, hold_id = NULL
      FROM ended e JOIN shop_drop gd ON gd.id = e.drop_id
     WHERE u.drop_id = e.drop_id AND u.hold_id = e.id AND u.state = 'held'
    RETURNING u.id
)"""
GIVEN_BACK = "COALESCE((SELECT sum(units) FROM bucket), 0) + (SELECT count(*) FROM units)"

# Marking a sold hold's unit rows sold, as a CTE after a CTE named `sold` (id, drop_id) of holds the
# same statement has just sold (buckets need nothing: their units left at the claim).
MARK_SOLD = """units AS (
    UPDATE inventory_unit u SET state = 'sold', sold_at = now()
      FROM sold WHERE u.drop_id = sold.drop_id AND u.hold_id = sold.id
    RETURNING u.id
)"""

# Putting refunded units of sold holds back on sale, as CTEs after a CTE named `back` (id, drop_id,
# units, bucket_index) of holds whose `units` the same statement has just marked restocked: a
# bucket is credited, or that many of the hold's sold unit rows are freed (its first by rank). As
# GIVE_BACK: a waiting-room drop's units go to the line, another drop's to any claim.
# Protects: a refunded unit comes back once (the hold's restocked counter moves in the same statement).
RESTOCK = f"""credit AS (
    SELECT b.id, back.units, gd.waiting_room AS line FROM inventory_stockbucket b
      JOIN back ON b.drop_id = back.drop_id AND b.index = back.bucket_index
      JOIN shop_drop gd ON gd.id = back.drop_id
       FOR UPDATE OF b
), {CREDIT}, freed AS (
    SELECT u.id FROM inventory_unit u JOIN back ON u.drop_id = back.drop_id AND u.hold_id = back.id
     WHERE u.state = 'sold' ORDER BY u.rank LIMIT (SELECT units FROM back)
       FOR UPDATE OF u
), units AS (
    UPDATE inventory_unit u
       SET state = CASE WHEN gd.waiting_room THEN 'returned' ELSE 'available' END, hold_id = NULL,
           sold_at = NULL
      FROM freed, shop_drop gd WHERE u.id = freed.id AND gd.id = u.drop_id
    RETURNING u.id
)"""
RESTOCKED = "COALESCE((SELECT sum(units) FROM bucket), 0) + (SELECT count(*) FROM units)"

# Take q units from one chosen bucket of a live drop. Locks that bucket row until commit.
# 1 row: claimed (the bucket's new level); 0 rows: bucket short, or drop not live.
# Protects: available >= 0 (also the CHECK inventory_stockbucket_available_nonnegative).
TAKE_FROM_BUCKET = f"""
UPDATE inventory_stockbucket b
   SET available = b.available - %(q)s
  FROM shop_drop d
 WHERE b.drop_id = %(drop)s AND b.index = %(index)s AND b.variant_id = %(variant)s
   AND b.available >= %(q)s AND d.id = b.drop_id AND {ON_SALE}
RETURNING b.index
"""

# Take q units from a random bucket that has them and is not locked by another
# claimer right now. Never waits, so a claimer that already holds a row lock never
# queues behind another one (no lock cycles). 1 row: claimed (which bucket); 0 rows:
# no free bucket has q units at this instant. Protects: available >= 0.
TAKE_FROM_ANY_BUCKET = f"""
UPDATE inventory_stockbucket b
   SET available = b.available - %(q)s
  FROM shop_drop d
 WHERE b.id = (SELECT id FROM inventory_stockbucket
                WHERE drop_id = %(drop)s AND variant_id = %(variant)s AND available >= %(q)s
                ORDER BY random() LIMIT 1
                  FOR UPDATE SKIP LOCKED)
   AND d.id = b.drop_id AND {ON_SALE}
RETURNING b.index
"""

# Move all of a variant's remaining stock into its first bucket, so no unit is stranded
# in a bucket too small for any buyer's quantity. Locks every bucket of the variant, in
# index order (the same order as every multi-bucket lock); run in a transaction of its
# own that holds no other lock. Returns each bucket's new level.
# Protects: the sum of available is unchanged (no unit made or lost).
COLLAPSE_BUCKETS = """
WITH locked AS (
    SELECT id, index, available FROM inventory_stockbucket
     WHERE drop_id = %(drop)s AND variant_id = %(variant)s ORDER BY index FOR UPDATE
), total AS (
    SELECT min(index) AS first, sum(available) AS units FROM locked
)
UPDATE inventory_stockbucket b
   SET available = CASE WHEN b.index = total.first THEN total.units ELSE 0 END
  FROM locked, total
 WHERE b.id = locked.id
RETURNING b.index, b.available
"""

# Change a variant's stock by `delta` units and spread what is left evenly over its
# buckets again. Locks every bucket in index order (own transaction). 0 rows: the
# change would take away units that are held or sold. Protects: available >= 0 and
# quantity = available + held + sold (the caller moves quantity by the same delta).
RESIZE_BUCKETS = """
WITH locked AS (
    SELECT id, index, available FROM inventory_stockbucket
     WHERE drop_id = %(drop)s AND variant_id = %(variant)s ORDER BY index FOR UPDATE
), total AS (
    SELECT sum(available) + %(delta)s AS units, min(index) AS first, count(*) AS n FROM locked
)
UPDATE inventory_stockbucket b
   SET available = total.units / total.n
                 + CASE WHEN locked.index - total.first < total.units %% total.n THEN 1 ELSE 0 END
  FROM locked, total
 WHERE b.id = locked.id AND total.units >= 0
RETURNING b.index
"""

# Remove `n` available units of a variant (the last in rank order) that no claimer holds right now.
# Rows returned: the labels removed; fewer than n means not enough free units.
REMOVE_FREE_UNITS = """
DELETE FROM inventory_unit u
 WHERE u.id IN (SELECT id FROM inventory_unit
                 WHERE drop_id = %(drop)s AND variant_id = %(variant)s AND state = 'available'
                 ORDER BY rank DESC LIMIT %(n)s
                   FOR UPDATE SKIP LOCKED)
RETURNING u.label
"""

NEXT_UNIT_RANK = "SELECT COALESCE(max(rank) + 1, 0) FROM inventory_unit WHERE drop_id = %(drop)s"

# Lock the drop row so two quantity changes apply one after the other. NO KEY UPDATE: a
# reserve's deferred foreign-key check takes KEY SHARE on the drop at commit, while it
# holds a bucket; FOR UPDATE would wait for it while RESIZE waits for that bucket.
LOCK_DROP_QUANTITY = "SELECT quantity FROM shop_drop WHERE id = %(drop)s FOR NO KEY UPDATE"

# The variant's fullest bucket now (a fresh snapshot, after the collapse lock): no collapse is
# needed when it can already serve the request. (index, available).
FULLEST_BUCKET = """
SELECT index, available FROM inventory_stockbucket WHERE drop_id = %(drop)s AND variant_id = %(variant)s
 ORDER BY available DESC, index LIMIT 1
"""

# Lock a drop that has not started and whose every unit is still open (none held, sold or
# returned); no row: its layout is fixed.
LOCK_UNSTARTED_UNCLAIMED_DROP = f"""
SELECT id FROM shop_drop d
 WHERE d.id = %(drop)s AND now() < d.starts_at AND {OPEN} = d.quantity
   FOR NO KEY UPDATE
"""

SET_LAYOUT = """
UPDATE shop_drop SET inventory_mode = %(mode)s, bucket_count = %(buckets)s WHERE id = %(drop)s
"""

MOVE_QUANTITY = """
WITH variant AS (
    UPDATE shop_variant SET quantity = quantity + %(delta)s WHERE id = %(variant)s AND drop_id = %(drop)s
)
UPDATE shop_drop SET quantity = quantity + %(delta)s WHERE id = %(drop)s RETURNING quantity
"""


def _variant_open(v: str) -> str:
    """Units of variant `v` (an alias of shop_variant) open to a claim: OPEN for one variant."""
    return f"""(COALESCE((SELECT sum(vb.available) FROM inventory_stockbucket vb
                    WHERE vb.drop_id = {v}.drop_id AND vb.variant_id = {v}.id), 0)
   + (SELECT count(*) FROM inventory_unit vu
       WHERE vu.drop_id = {v}.drop_id AND vu.variant_id = {v}.id AND vu.state = 'available'))"""


VARIANT_OPEN = _variant_open("v")


def variant_returned(v: str) -> str:
    """Units of variant `v` given back to a waiting room's line (RETURNED for one variant)."""
    return f"""(COALESCE((SELECT sum(rb.returned) FROM inventory_stockbucket rb
                    WHERE rb.drop_id = {v}.drop_id AND rb.variant_id = {v}.id), 0)
   + (SELECT count(*) FROM inventory_unit ru
       WHERE ru.drop_id = {v}.drop_id AND ru.variant_id = {v}.id AND ru.state = 'returned'))"""


# Units open to a claim in the variant and in the whole drop, the names of the drop's variants
# that have some (in position order), the drop's state (STATE) and whether its presale window is open
# (PRESALE), in one snapshot; read only.
STOCK_AND_WINDOW = f"""
SELECT {VARIANT_OPEN}, {OPEN},
       ARRAY(SELECT ov.name FROM shop_variant ov
              WHERE ov.drop_id = d.id AND {_variant_open("ov")} > 0 ORDER BY ov.position),
       {STATE}, {PRESALE}
  FROM shop_drop d JOIN shop_variant v ON v.drop_id = d.id AND v.id = %(variant)s
 WHERE d.id = %(drop)s
"""

# Each variant's open units, in position order: (id, units); read only.
OPEN_BY_VARIANT = f"""
SELECT v.id, {VARIANT_OPEN} FROM shop_variant v WHERE v.drop_id = %(drop)s ORDER BY v.position
"""

VARIANT_QUANTITY = "SELECT quantity FROM shop_variant WHERE id = %(variant)s AND drop_id = %(drop)s"

# Claim the q best available units of a live drop for a hold, skipping rows other
# claimers have locked (they are about to take them). Locks the claimed unit rows.
# Rows returned: the labels claimed, possibly fewer than q (the caller then decides).
# Protects: a unit belongs to at most one hold (state moves only from 'available').
CLAIM_BEST_UNITS = f"""
WITH pick AS (
    SELECT u.id FROM inventory_unit u
     WHERE u.drop_id = %(drop)s AND u.variant_id = %(variant)s AND u.state = 'available'
     ORDER BY u.rank LIMIT %(q)s
       FOR UPDATE SKIP LOCKED
)
UPDATE inventory_unit u
   SET state = 'held', hold_id = %(hold)s
  FROM pick, shop_drop d
 WHERE u.id = pick.id AND d.id = u.drop_id AND {ON_SALE}
RETURNING u.label
"""


def _take_batch(level: str) -> str:
    """A batch claim from the one bucket row that `level` (b = the bucket, d = shop_drop)
    selects and locks: the longest prefix of the claims, in arrival order (`ord`), whose
    running total the bucket's level covers, taken in the same statement. The level is read
    under the row lock, so the grant and the take see the same units (the CHECK on available
    backs it). One row (granted hold ids, level after, bucket index); no row when `level` found none."""
    return f"""
WITH want AS (
    SELECT c.hold, sum(c.q) OVER (ORDER BY c.ord) AS running
      FROM unnest(%(holds)s::bigint[], %(qs)s::int[]) WITH ORDINALITY AS c(hold, q, ord)
), level AS MATERIALIZED (
    SELECT b.id, b.available, b.index
      FROM inventory_stockbucket b JOIN shop_drop d ON d.id = b.drop_id
     WHERE b.drop_id = %(drop)s AND b.variant_id = %(variant)s AND {LIVE} AND {level}
), granted AS MATERIALIZED (
    SELECT want.hold, want.running FROM want, level WHERE want.running <= level.available
), taken AS (
    -- From level.available (the row's current value, read under the lock), not b.available:
    -- a return committed while `level` waited leaves b as this statement's snapshot saw it, so
    -- a condition on it matched nothing while `granted` stood, and arithmetic on it failed the CHECK.
    UPDATE inventory_stockbucket b
       SET available = level.available - (SELECT COALESCE(max(running), 0) FROM granted)
      FROM level
     WHERE b.id = level.id
    RETURNING b.available
)
SELECT (SELECT COALESCE(array_agg(hold), '{{}}') FROM granted), (SELECT available FROM taken), level.index
  FROM level
"""


# A batch's claim on its chosen bucket of a live drop: waits for the row lock (the batch's
# only wait on stock). No row: the drop is not on sale.
# Protects: available >= 0 and no unit granted twice.
TAKE_BATCH_FROM_BUCKET = _take_batch("b.index = %(index)s FOR UPDATE OF b")

# What the chosen bucket could not serve, from a random bucket with free units that no other
# claimer has locked right now (never waits, as the single claim's probes). No row: none.
TAKE_BATCH_FROM_ANY_BUCKET = _take_batch(
    "b.available > 0 ORDER BY random() LIMIT 1 FOR UPDATE OF b SKIP LOCKED"
)

# Claim the best free units of a live drop for a batch of holds, in arrival order: each
# hold gets all its units or none (the longest prefix the free rows cover), skipping rows
# other claimers have locked. Locks the claimed unit rows. One row: (free units it locked,
# {hold: labels} granted). Protects: a unit belongs to at most one hold.
CLAIM_BATCH_UNITS = f"""
WITH want AS (
    SELECT c.hold, c.q, sum(c.q) OVER (ORDER BY c.ord) AS running
      FROM unnest(%(holds)s::bigint[], %(qs)s::int[]) WITH ORDINALITY AS c(hold, q, ord)
), free AS MATERIALIZED (
    SELECT u.id, u.rank FROM inventory_unit u
     WHERE u.drop_id = %(drop)s AND u.variant_id = %(variant)s AND u.state = 'available'
       AND EXISTS (SELECT 1 FROM shop_drop d WHERE d.id = %(drop)s AND {LIVE})
     ORDER BY u.rank LIMIT (SELECT max(running) FROM want)
       FOR UPDATE SKIP LOCKED
), numbered AS (
    SELECT id, row_number() OVER (ORDER BY rank) AS k, count(*) OVER () AS n FROM free
), assigned AS (
    UPDATE inventory_unit u SET state = 'held', hold_id = want.hold
      FROM numbered, want
     WHERE u.id = numbered.id AND want.running <= numbered.n
       AND numbered.k > want.running - want.q AND numbered.k <= want.running
    RETURNING want.hold, u.label, u.rank
)
SELECT (SELECT count(*) FROM free),
       COALESCE((SELECT json_object_agg(hold, labels)
                   FROM (SELECT hold, array_agg(label ORDER BY rank) AS labels
                           FROM assigned GROUP BY hold) per_hold), '{{}}')
"""

# Claim one named unit (a chosen seat). Never waits: a unit being claimed by
# someone else right now counts as taken. 1 row: claimed; 0 rows: taken, no such
# label, or drop not live. Protects: a unit belongs to at most one hold.
CLAIM_NAMED_UNIT = f"""
WITH pick AS (
    SELECT u.id FROM inventory_unit u
     WHERE u.drop_id = %(drop)s AND u.label = %(label)s AND u.variant_id = %(variant)s
       AND u.state = 'available'
       FOR UPDATE SKIP LOCKED
)
UPDATE inventory_unit u
   SET state = 'held', hold_id = %(hold)s
  FROM pick, shop_drop d
 WHERE u.id = pick.id AND d.id = u.drop_id AND {ON_SALE}
RETURNING u.label
"""

UNIT_LABEL_EXISTS = """
SELECT 1 FROM inventory_unit WHERE drop_id = %(drop)s AND label = %(label)s AND variant_id = %(variant)s
"""


Params = Mapping[str, Any]  # a statement's named parameters
Row = tuple[Any, ...]


def one(cursor: CursorWrapper, statement: str, params: Params) -> Row | None:
    """The statement's row, or None when it matched nothing."""
    cursor.execute(statement, params)
    return cast(Row | None, cursor.fetchone())


def single(cursor: CursorWrapper, statement: str, params: Params) -> Row:
    """The row of a statement that always returns exactly one (an aggregate, a RETURNING of a row
    the caller holds)."""
    row = one(cursor, statement, params)
    assert row is not None, "this statement returns one row"
    return row


def all_rows(cursor: CursorWrapper, statement: str, params: Params) -> list[Row]:
    cursor.execute(statement, params)
    return cast(list[Row], cursor.fetchall())


AVAILABLE_BY_DROP = f"SELECT d.id, {AVAILABLE} FROM shop_drop d WHERE d.id = ANY(%(drops)s)"


def variant_available(v: str) -> str:
    """Units of variant `v` (an alias of shop_variant) still available: AVAILABLE for one variant."""
    return f"({_variant_open(v)} + {variant_returned(v)})"


# Bucket levels of a drop, in index order; read only (the dashboard draws them).
BUCKET_LEVELS = "SELECT available FROM inventory_stockbucket WHERE drop_id = %(drop)s ORDER BY index"

# Units a buyer asking for the full per-buyer limit cannot reach without a collapse: no
# single bucket of a variant holds that many, but together they do. Read only; 0 when healthy.
STRANDED_UNITS = """
SELECT COALESCE(sum(stranded), 0) FROM (
    SELECT CASE WHEN max(b.available) < d.per_buyer_limit AND sum(b.available) >= d.per_buyer_limit
                THEN sum(b.available) ELSE 0 END AS stranded
      FROM inventory_stockbucket b JOIN shop_drop d ON d.id = b.drop_id
     WHERE b.drop_id = %(drop)s
     GROUP BY b.variant_id, d.per_buyer_limit
) per_variant
"""


# Returned units of a drop as they can go to holds: a bucket's (one hold's units come from one
# bucket), or a variant's unit rows (by their best rank). Rows: (bucket index or NULL, variant,
# units), in index order then rank order. Read only: under the WAVE lock only the offerer takes
# returned units, and the rest only add to them, so what this reads is there to take.
RETURNED_POOLS = """
SELECT index, variant_id, returned FROM (
    SELECT b.index, b.variant_id, b.returned, b.index AS at FROM inventory_stockbucket b
     WHERE b.drop_id = %(drop)s AND b.returned > 0
    UNION ALL
    SELECT NULL, u.variant_id, count(*), 32768 + min(u.rank) FROM inventory_unit u
     WHERE u.drop_id = %(drop)s AND u.state = 'returned' GROUP BY u.variant_id
) pools ORDER BY at
"""

# Returned units of a drop (one read of its bucket rows and unit rows).
RETURNED_UNITS = f"SELECT {RETURNED} FROM shop_drop d WHERE d.id = %(drop)s"

# A drop's buckets that have returned units, locked in index order (the offerer then takes
# from them with TAKE_RETURNED). Rows: (index, returned).
LOCK_RETURNED_BUCKETS = """
SELECT index, returned FROM inventory_stockbucket
 WHERE drop_id = %(drop)s AND returned > 0 ORDER BY index FOR UPDATE
"""

# Take returned units from buckets locked by LOCK_RETURNED_BUCKETS, `n` from each index.
# Protects: returned >= 0 (also the CHECK inventory_stockbucket_returned_nonnegative).
TAKE_RETURNED = """
UPDATE inventory_stockbucket b SET returned = b.returned - t.n
  FROM unnest(%(indexes)s::int[], %(ns)s::int[]) AS t(index, n)
 WHERE b.drop_id = %(drop)s AND b.index = t.index AND b.returned >= t.n
RETURNING b.index
"""

# The same in units mode: each hold takes `q` returned units of its variant, the best by rank,
# in the holds' order. Rows: (hold, label). Protects: a unit belongs to at most one hold.
TAKE_RETURNED_UNITS = """
WITH locked AS MATERIALIZED (
    SELECT u.id, u.rank, u.variant_id FROM inventory_unit u
     WHERE u.drop_id = %(drop)s AND u.state = 'returned' AND u.variant_id = ANY(%(variants)s::bigint[])
     ORDER BY u.rank
       FOR UPDATE
), numbered AS (
    SELECT id, variant_id, row_number() OVER (PARTITION BY variant_id ORDER BY rank) AS k FROM locked
), want AS (
    SELECT w.hold, w.q, w.variant, sum(w.q) OVER (PARTITION BY w.variant ORDER BY w.ord) AS upto
      FROM unnest(%(holds)s::bigint[], %(qs)s::int[], %(variants)s::bigint[])
           WITH ORDINALITY AS w(hold, q, variant, ord)
)
UPDATE inventory_unit u SET state = 'held', hold_id = want.hold
  FROM numbered, want
 WHERE u.id = numbered.id AND numbered.variant_id = want.variant
   AND numbered.k > want.upto - want.q AND numbered.k <= want.upto
RETURNING want.hold, u.label
"""

# A held hold's units of one variant given back when the hold changes to another (holds.services.
# change_variant, under the hold's row lock, in the transaction that takes the new ones): `q` units to
# its bucket, to the line in a waiting-room drop as GIVE_BACK does. 1 row: credited.
# Protects: quantity = available + held + sold per variant (the hold's variant moves in the same transaction).
CREDIT_HOLD_BUCKET = """
UPDATE inventory_stockbucket b
   SET available = b.available + CASE WHEN d.waiting_room THEN 0 ELSE %(q)s END,
       returned = b.returned + CASE WHEN d.waiting_room THEN %(q)s ELSE 0 END
  FROM shop_drop d
 WHERE b.drop_id = %(drop)s AND b.index = %(index)s AND b.variant_id = %(variant)s AND d.id = b.drop_id
RETURNING b.index
"""

# The same in units mode: the hold's unit rows of that variant freed. Rows: the labels freed.
# Protects: a unit belongs to at most one hold (only the hold's own held rows move).
FREE_HOLD_UNITS = """
UPDATE inventory_unit u
   SET state = CASE WHEN d.waiting_room THEN 'returned' ELSE 'available' END, hold_id = NULL
  FROM shop_drop d
 WHERE u.drop_id = %(drop)s AND u.hold_id = %(hold)s AND u.variant_id = %(variant)s AND u.state = 'held'
   AND d.id = u.drop_id
RETURNING u.label
"""

# A waiting room's returned units of one variant taken from one of its buckets for a hold changing to
# it, under the WAVE lock (only that lock's holder takes returned units), never waiting for a row
# another transaction is crediting. 1 row: taken (the bucket's index); 0 rows: none there now, or
# the drop is not live. Protects: returned >= 0 (also its CHECK).
TAKE_RETURNED_FROM_ANY_BUCKET = f"""
UPDATE inventory_stockbucket b SET returned = b.returned - %(q)s
  FROM shop_drop d
 WHERE b.id = (SELECT id FROM inventory_stockbucket
                WHERE drop_id = %(drop)s AND variant_id = %(variant)s AND returned >= %(q)s
                ORDER BY index LIMIT 1
                  FOR UPDATE SKIP LOCKED)
   AND d.id = b.drop_id AND {LIVE}
RETURNING b.index
"""

# Open a drop's returned units to any claim (nobody is left in its line to offer them to, or
# the drop no longer has a waiting room). Buckets locked in index order. Returns units opened.
# Protects: the sum of available + returned is unchanged.
OPEN_RETURNED = """
WITH locked AS (
    SELECT id, returned FROM inventory_stockbucket
     WHERE drop_id = %(drop)s AND returned > 0 ORDER BY index FOR UPDATE
), buckets AS (
    UPDATE inventory_stockbucket b SET available = b.available + locked.returned, returned = 0
      FROM locked WHERE b.id = locked.id
    RETURNING locked.returned
), units AS (
    UPDATE inventory_unit SET state = 'available' WHERE drop_id = %(drop)s AND state = 'returned'
    RETURNING id
)
SELECT COALESCE((SELECT sum(returned) FROM buckets), 0) + (SELECT count(*) FROM units)
"""

# The reverse, for a raffle's draw: every open unit of the drop goes to its line, to be offered to
# the ranked entries in order (no claim reads returned units). Buckets locked in index order.
# Returns units moved. Protects: the sum of available + returned is unchanged.
RETURN_OPEN = """
WITH locked AS (
    SELECT id, available FROM inventory_stockbucket
     WHERE drop_id = %(drop)s AND available > 0 ORDER BY index FOR UPDATE
), buckets AS (
    UPDATE inventory_stockbucket b SET returned = b.returned + locked.available, available = 0
      FROM locked WHERE b.id = locked.id
    RETURNING locked.available
), units AS (
    UPDATE inventory_unit SET state = 'returned' WHERE drop_id = %(drop)s AND state = 'available'
    RETURNING id
)
SELECT COALESCE((SELECT sum(available) FROM buckets), 0) + (SELECT count(*) FROM units)
"""
