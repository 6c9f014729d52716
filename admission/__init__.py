"""The crowd kept off the database: the edge, the waiting room and its draw, limits, snapshots.

Most of a drop's crowd must hear "wait" or "no", and that is the cheapest answer. The layer fails
closed: with Redis gone buyers are told to wait (503), and nothing is sold that PostgreSQL did not
decide.

Snapshots (admission/state.py): one statement computes each active drop's state, claimable stock,
held units and the waiting room's mark; the tick publishes it to Redis every second, and at once
on pause, resume and a database sold-out.

The edge (admission/edge.py, first in config/asgi.py, then the claim lane, then Django) answers
drop state, sold out, paused, not started, ended and not admitted from the process's copy of the
snapshot, without Django or a query; it only says "no" or shows public state, and an unsure
snapshot passes the request through. One module per job: routes.py, published.py (one Redis GET
per slug at a time, recomputed here when beat is late), listener.py (snapshots and revocations),
refusals.py (the "no"s in Django's words, built once per language), polls.py (the waiting room's
poll), rooms.py (which slugs a queue socket may open). A slug Django's converter would not take is
not looked at. Claims that go into Django are bounded per process (CLAIM_CONCURRENCY, beyond it
503 + Retry-After). A poll is answered from its signed queue ticket or, with a bearer token, from
the lane's token cache and the crowd's tickets read together (TICKETS_OF). Redis reads share a
pool of 32 connections per process that waits up to 0.5 s for one (redis-py's own refused its
101st at once, and each refusal sent a poll to Django). The door's counts (admission/tally.py)
wrap the edge: each 429, 503 and other 5xx per drop, added to Redis a second later, best effort.

The waiting room (admission/services.py): a ticket per account. Early joiners are drawn into a
random order: the rule and its check in admission/draw.py, the writes in admission/drawing.py.
The seed is committed by its hash when the queue is created, before any join (and by the tick for
every room starting within the hour), with a drand round due after the list's close
(admission/beacon.py, DRAW_BEACON; it follows a moved start only while nobody has joined,
`recommit_beacon`). The list closes line_close_seconds (10) before the start, run by the tick
(`drawing.closes_at`, `close_entries`), its hash published; later joins are numbered behind it in
arrival order. A close later than the named round names the first round due after it
(LATE_GUARD). The round is read from the relays outside any transaction, its BLS signature
checked, retried every tick for RETRY_FOR (4 s); with no verified round by then (or by
draw_round_wait_seconds after the start) the draw records `unreachable`, orders by the seed alone
and says it is not unsteerable (verify_draw exits 3). The hour before, ops/preflight.py checks the
relays. The draw runs before the start, so the first wave (start_wave, sent with the start as its
ETA, or the tick) admits at the start. The draw's record (admission/draw_record.py) is computed
once and kept in Redis per drop, draw and language, with ETag, Last-Modified and an immutable
Cache-Control; before the draw it is computed each time. The draw's one broadcast names the
line's cut entries (`state.Cuts`, CUTS): pages inside the mark ask at once, those between the
cuts within their own spread, those behind the unlikely cut say "unlikely" at once and ask later
over up to a minute (a line of 50,000 once asked within 5 s and its last loser heard after ~20 s).

Waves: beat's `admission.tick` advances the admitted-through mark by about 150% of the claimable
units, less buyers admitted in the last ADMISSION_GRACE_SECONDS who have not come, so no-shows
stall it only that long. An admitted buyer gets a signed admission token (admission/tokens.py) the
reserve checks without the database. The queue answer (`state.place_answer`, both doors) says
`unlikely` once a ticket waits behind as many buyers as units left and held; sold out with none
held, the line closes and a new join is 409. A raffle (Drop.raffle) entries are the early
joiners, closing at the start (`entries_closed`); its draw moves every open unit to the line
(RETURN_OPEN) and sale/offers.py offers one to each ranked entry; the answer's `result`
(`state.raffle_result`) is won, reserve (with rank) or lost. A raffle never sells to someone who
did not enter.

The WebSocket consumer (admission/consumers.py) pushes each wave to every waiting page and
rebroadcasts at least every REBROADCAST_SECONDS (10), so a socket whose subscription was away
during a failover catches up. It opens from the snapshot, looks up unknown slugs only a few a
second, holds WS_SOCKETS_PER_ADDRESS sockets per address, and each socket's frames are a token
bucket (MESSAGE_BURST 20, then MESSAGES_PER_SECOND 1); past it the socket closes with 4429 and the
page polls.

Proof of work (admission/work.py, on by default): a join carries a nonce for an HMAC challenge of
account and drop, signed with an expiry and spent once in Redis, checked in `services.join` (the
page, the API and the lane alike); 428 otherwise. Rate limits (admission/limits.py): all-or-nothing
token buckets per account and per address on Redis's clock; both joins use them.
"""
