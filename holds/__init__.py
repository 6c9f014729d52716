"""The hold's lifecycle: claim, release, expiry and the sweep, the invariant's count, the codes.

    AVAILABLE -> HELD (hold_seconds) -> SOLD       CONFIRM_HOLD (clock_timestamp() < expires_at)
                                     -> RELEASED   RELEASE_HOLD (buyer, or a mismatched payment)
                                     -> EXPIRED    EXPIRE_DUE_HOLDS (lazy, or the sweeper)

The reserve (holds/services.py) inserts the hold with ON CONFLICT DO NOTHING on (drop, buyer,
Idempotency-Key): no row back means "look it up", so a retried click gets the hold it has. The
hold keeps a digest of what its key asked for (quantity, unit, variant, code): the same key with
another request is 422. The per-buyer limit counts held and sold units after the insert (which
serialises one buyer's reserves on the unique index). `_made` builds the hold a claim made from
its statements' rows, for both doors. Starting a payment extends a hold once (HOLD_FOR_PAYMENT);
before that, "I need more time" (MORE_TIME) adds half the first window, at most MORE_TIME_MAX (2)
times, counted by a column the same statement moves (tests/holds/test_more_time.py).

A batch (`reserve_batch`) serves many buyers of one drop's variant in one short transaction: the
holds inserted in arrival order under the same unique rules, the limit counted after the insert,
then one inventory statement per mode; holds that got nothing are deleted before the commit. What
a batch cannot decide (a repeated key, a second active hold, a chosen seat, stock spread over
buckets, a code) goes to the single claim.

A held hold whose payment has not started may change variant (`change_variant`): one transaction,
after the hold's row lock, gives its units back (CREDIT_HOLD_BUCKET / FREE_HOLD_UNITS, to the line
in a waiting room) and takes as many of the new variant; refused, the rollback leaves it as it
was. In a waiting room it runs under the drop's WAVE lock and may take returned units not yet
offered (TAKE_RETURNED_FROM_ANY_BUCKET), and the units it gave back are offered at once. Once
payment starts the price, and so the size, is fixed (tests/sale/test_change_size.py).

Where a unit comes back: every transition that ends a hold credits its units in the same
statement, so a unit comes back exactly once. RELEASE_HOLD and EXPIRE_DUE_HOLDS end the hold,
give its codes' uses back (UNSPEND_CODES) and then its units (inventory's GIVE_BACK);
CONFIRM_HOLD is followed by MARK_SOLD. A refund that puts units back on sale moves the sold hold's
`refunded` and `restocked` counters (REFUND_UNITS) and inventory's RESTOCK credits the stock (a
CHECK keeps restocked <= refunded <= quantity). holds/sql.py reads stock only through inventory's
fragments. Expired holds are reclaimed lazily (a reserve that finds nothing first expires the
drop's overdue holds) and by beat's `holds.reclaim_expired_holds` in batches of 500, SKIP LOCKED,
under the drop's RECLAIM lock; the sweeper is garbage collection, not correctness: a held hold
past its time is already "expired" to the buyer (`effective_state`). An authorised payment's hold
is pinned until 15 minutes after its webhook arrived (PIN_FOR_SETTLEMENT), so a late worker cannot
let it expire.

The invariant (holds/counts.py): `invariant` reads every term in one statement (one snapshot),
`invariant_by_variant` per variant (INVARIANT_BY_VARIANT); the dashboard, check_invariant, the ops
API, /metrics and the watchdog read them.

The Redis gate (holds/gate.py, optional per drop): a Lua count of units in front of the claim; it
answers most sold-outs without a query, gives back what a claim did not take and is reset from the
database every tick. It errs high, counts one stock, and so is refused on a drop of several
variants.

Presale (holds/presale.py). A drop may have a window, presale_starts_at until starts_at (a CHECK
keeps it before the start; another refuses it beside a waiting room). In it a claim needs a code
(PresaleCode: max_uses claims, `uses` so far, a CHECK keeps uses <= max_uses) or an account whose
verified e-mail address is on the drop's list (PresaleListEntry). A code is spent by the claim
that uses it: after INSERT_HOLD (so the same key spends nothing) SPEND_PRESALE_CODE is one
conditional UPDATE with `uses < max_uses`; zero rows is code_used (409), or invalid_code (403)
when no such code exists. The stock is then claimed with the presale window; a claim that fails
after the spend rolls the use back with it. Concurrent claims of one code queue on its row
(tests/holds/test_presale_race.py: 500 buyers, 100 single-use codes, exactly 100 holds). The lane
leaves presale claims to Django's single claim. Codes are made in the admin (ops/presale_admin.py:
N codes of M uses from an alphabet without 0/O/1/I/L, exported as CSV; the list pasted or
uploaded) or by `create_drop --presale-in S --presale-codes N` and `presale_codes SLUG`.

Discount codes (holds/discounts.py). A percentage (1-99) or an amount in minor units off a hold's
line, for one drop or, with no drop, every drop; max_uses (1 by default), `uses`, an optional
starts_at/ends_at; 10 characters of the presale alphabet, made in bulk (`generate_codes`, the
admin's add page, the discount_codes command). SPEND_DISCOUNT_CODE is one UPDATE in the hold's
transaction, with its drop, window and currency in the condition; on zero rows
DISCOUNT_CODE_STATE says why (422 invalid_discount_code or discount_code_not_for_drop, 409
discount_code_used, 425 discount_code_not_started, 410 discount_code_expired). With the reserve,
the code is spent after INSERT_HOLD (and a presale code) and before the stock, so a refused code
refuses the claim and nothing is held; the code is part of the key's digest; a batch never takes
one (tests/sale/test_discounts.py checks a plain reserve's statements name no code). On the hold
page, LOCK_HOLD_FOR_DISCOUNT locks a held, unexpired hold without a code and before its payment
started, then the same spend. `selectors.hold_price` is the discounted price, read by the hold
page, the hold's answer and checkout.start_payment. A use comes back when its hold ends unpaid
(UNSPEND_CODES, also for presale codes); a sold hold keeps it, even when refunded
(tests/holds/test_discount_race.py).

The create_drop and presale_codes commands live here because create_drop can make a drop's
presale codes, which catalogue, below, cannot name.
"""
