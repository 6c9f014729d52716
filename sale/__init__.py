"""A buyer's way through a sale: the one reserve sequence and its two doors, offers, the exchange.

The reserve sequence is written once, `sale.entry.steps`; Django's door (`entry.reserve_through_django`, from
views.py and api.py) and the claim lane do what it yields. A test compares both doors' answers
case by case. Either door publishes a database "sold out" for everyone (`entry.sold_out_for_all`),
so the edge answers the next buyers.

The claim lane (sale/lane.py) takes every `POST /api/drops/<slug>/holds` the edge did not refuse,
with a bearer token or a session and its CSRF token (the drop page's Reserve button posts there,
static/js/buy.js). Its parts: lane.py (the ASGI door and every difference from the view), who.py
(the buyer: token and session caches, Django's CSRF middleware asked), batcher.py (the claims on
core.batches, the one micro-batcher: one batch in flight per key, the requests arriving meanwhile
go in the next; one key per variant, with the deadline and the sold-out fan-out),
joins.py (the joins on it, one key per drop), workers.py (the threads), so
`Lane._claim -> Batcher.claim -> Workers.reserve_batch -> holds.services.reserve_batch` reads
straight. The rate limit is `admission.limits.Limiter`: the checks that arrive while one Redis
round trip is out go together in the next (one call each waited for the pool's eight connections
and, in a 20,000-buyer rush, took longer than the claim). A claim waits for its batch while the
queue ahead can be served within 200 ms; past that it is told 503 + Retry-After at once. Joins of
a drop go together too (`admission.services.join_many`; `join` is join_many of one, so the view
and the lane run the same checks): one at a time a line joined at ~400/s, batched 1,650/s
(bench/README.md). Each process sets the GIL switch interval to 0.5 ms (workers.py): a worker
thread back from a database round trip waits up to the interval for the loop's thread to let go.

Offers of returned units (sale/offers.py). In a waiting-room drop a returned unit goes to the
line: beat's `sale.offer_returns` every second (and `sale.offer_now` right after a return)
offers the returned units to the next tickets in number order that never had a unit of the drop
(admission's NEXT_WAITING), each up to the buyer's limit from one pool (`plan_offers`), as a hold
under the key `offer:<ticket id>` lasting the drop's offer_seconds (90 by default). A lapsed or
released offer is returned again and goes to the next ticket. The offers, the returned units they
take (LOCK_RETURNED_BUCKETS then TAKE_RETURNED, or TAKE_RETURNED_UNITS) and the queue's
offered_through mark commit together under the drop's WAVE lock, which the offerer waits for
(200 ms; 2 s right after a return) rather than tries, since the tick takes it every second. It
never waits long for a buyer's claim (lock_timeout 200 ms; the next tick retries), so a claim is
never a deadlock's victim. With nobody left waiting, returned units open to any claim
(OPEN_RETURNED). In a raffle the offers are the results: one unit for each ranked entry in order,
and units added after the draw go to the line first (`_rank_what_opened`).
tests/sale/test_offers.py returns 1,000 units under a crowd and checks the receivers are exactly
the next tickets in order.

Addresses (sale/addresses.py): `give_address` validates with shop.addresses.AddressForm, refuses
a country in no zone (400 not_shipped_there) and, once payment started, one whose zone charges
another fee (409 address_changes_price), writes a new Address and points the hold at it by one
conditional UPDATE on its state.

The face-value exchange (sale/exchange.py, sale/sql.py). A waiting-room drop of counted units may
have an exchange after its sale (Drop.exchange_closes_at, a fee per unit). A buyer whose order is
confirmed and captured lists units at what they paid or less; each is handed to the next ticket
that never had a unit, like a returned unit, so nobody chooses the next owner and the per-buyer
limit holds. A Listing (holds.Listing, one row per unit: listed -> offered -> sold -> paid, or
withdrawn, kept) and the seller's hold's `listed` counter are written by LIST_UNITS, which checks
the exchange trades now (EXCHANGE_OPEN) and the units are the seller's (a CHECK keeps refunded +
listed <= quantity). A listed unit counts as `exchange` and cannot be refunded until withdrawn.
The offer runs beside the returned units' under the same WAVE lock: WAITING_LISTINGS,
NEXT_WAITING, INSERT_OFFERS (a hold marked exchange, with no bucket, so GIVE_BACK returns none),
OFFER_LISTINGS; a lapsed offer relists (RELIST_LAPSED), and after the close what nobody took stays
the seller's (KEEP_UNSOLD). CONFIRM_HOLD sells the listing with the hold (SELL_LISTING); the
seller's money is checkout's (checkout/exchange.py). tests/sale/test_exchange.py lists 50
sellers' units while three offerers run; its control removes the locks and the invariant drifts.
"""
