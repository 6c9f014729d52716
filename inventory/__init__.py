"""The stock rows and the SQL that takes units from them and gives them back.

A claim is `services.claim()`, called by holds inside the reserve transaction after the hold row
is inserted (the stock row is touched last, so its lock lives only until the commit). Two modes,
`shop.models.InventoryMode`, a column of the drop:

- buckets (identical units): a drop's quantity split over N rows. TAKE_FROM_BUCKET decrements one
  random bucket WHERE available >= q and the drop is live; on zero rows up to three
  TAKE_FROM_ANY_BUCKET probes (SKIP LOCKED, so a claimer never waits while holding a lock); "sold
  out" only when the total really is short. At the tail `collapse_buckets` gathers the last units
  into one bucket (its own transaction, under the COLLAPSE lock) and the claim runs once more.
  N = 1 is the plain counter.
- units (seats, numbered editions): CLAIM_BEST_UNITS takes the best free rows FOR UPDATE SKIP
  LOCKED over the partial index of available rows; CLAIM_NAMED_UNIT takes a chosen seat or
  answers unit_taken at once.

A batch (`claim_batch`): TAKE_BATCH_FROM_BUCKET locks the bucket row, reads its level under the
lock and takes the longest prefix of claims it covers; CLAIM_BATCH_UNITS gives whole claims free
unit rows by SKIP LOCKED.

The sale window (`sql.LIVE`, or shop.sql.ON_SALE with presale) is part of every claim statement,
so a pause takes effect in the statement, whatever Python thought. "Available" is one fragment,
`sql.AVAILABLE` (CLAIMABLE adds units in expired holds nobody reclaimed yet); the invariant, the
snapshots, the gate and the catalogue's "remaining" all use it. Giving back is fragments the
holds statements embed: GIVE_BACK (to the crowd, or in a waiting-room drop to the line: a
bucket's `returned` column or a unit row set `returned`, which no claim reads), MARK_SOLD,
RESTOCK (a refund put back on sale), OPEN_RETURNED and RETURN_OPEN (returned units opened to any
claim, and the reverse for a raffle).

Variants: every stock row belongs to one variant (`variant_id`). Variant k's buckets are indexes
`k * bucket_count ...` (`bucket_range`), so a hold's bucket_index names its variant's row and
nothing that gives units back needs to know; unit rows are numbered per variant (`M-3`), so a
chosen seat names its variant without a query (`numbered_variant`). Each claim statement carries
`variant_id = %(variant)s` beside drop_id (tests/sale/test_variants.py races 2,000 buyers for four
sizes of 25; its control, the condition removed, oversells). A variant's quantity changes through
`change_quantity(variant=...)`, checked against its held and sold; a new set of variants through
`relayout_stock` under `clear_stock`'s condition (not started, every unit open).

Adding an inventory mode touches more than this package, because the mode is a column of the drop:
1. a value in shop.models.InventoryMode (and the CHECK `shop_drop_inventory_mode_valid` follows
   its values) and, if it needs rows of its own, a model and migration here;
2. its claim statements in inventory/sql.py (with the LIVE condition) and a branch in
   `services.claim`, `claim_batch`, `first_pick` / `check_choice`, and the other
   `inventory_mode` branches of services.py (laying out and resizing: `configure_stock`,
   `change_quantity`, `relayout_stock`);
3. its rows in the AVAILABLE, GIVE_BACK and MARK_SOLD fragments and holds' INVARIANT statement
   (holds/counts.py reads the per-unit counts of the units mode);
4. the other places that branch on the mode: catalogue.services (create_drop's checks),
   holds' create_drop command, ops.drop_admin (the form), storefront.selectors (the seat map)
   and shop.models' exchange CHECK (no exchange for units).
"""
