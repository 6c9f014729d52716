"""The ground every layer stands on: errors, locks, settings, formatting, raw ASGI and the client.

- Errors (core/errors.py): one root, `FloodgateError`, with a stable `code` and an HTTP status;
  core/api.py writes it as the JSON answer (config/api.py hands it the API's errors), and a database
  that cannot answer (OperationalError, a failover, the pool's wait run out) is 503 `busy`, never a 500.
- Answers (core/answers.py): what every layer's `answers.py` shares. A builder makes the model and
  the door only serialises it (`dump()` for Django's JsonResponse, `dump_json()` for the edge's and
  the lane's raw ASGI answers), so a key no model lists fails where it is made. Building and
  encoding a place in line went from 8.9 us (a dict and json.dumps) to 11.5 us (pydantic), best
  of five: 2-3% of an edge poll at ~9,000 polls/s.
- Locks (core/locks.py): the lock order and every advisory-lock namespace, in one place.
- The client (core/clients.py): every per-address limit and lockout (rate limits, the lane, the
  WebSocket cap, allauth's limits, axes) takes the address from there.
- Settings from the environment (core/env.py): a missing required variable raises
  ImproperlyConfigured. Outside the dev profile every process (web, worker, beat, migrate,
  manage.py) refuses to start on the simulated provider unless
  ALLOW_SIMULATED_PAYMENTS_FOR_REHEARSAL declares a rehearsal environment, and on a SECRET_KEY
  Django's deploy check would call weak. Harnesses that start the production profile on the
  simulator (the bench, the image test, the Dockerfile's collectstatic) declare themselves
  rehearsals. Buyers are sent only to the configured provider's own origin unless
  PAYMENT_PROVIDER_PUBLIC_PREFIXES says otherwise.
- Redis (core/redis.py): with REDIS_SENTINELS every client asks the sentinels for the master of
  REDIS_SENTINEL_MASTER: django-redis through its Sentinel factory (the master's pool only: a
  replica would answer stale counts), Celery's broker as sentinel:// URLs, the Channels layer as a
  Sentinel host, the edge's and the lane's asyncio clients here. A broken connection is made again
  to whichever server the sentinels name now. Replication is asynchronous, so a killed master may
  lose its last writes; none decides a sale (snapshots and gate counts are recomputed by the next
  tick, queue numbers come from the tickets table, a lost rate-limit counter only starts a bucket
  afresh, a lost Celery message is re-sent by beat or covered by a web process).
  tests/test_sentinel.py SIGKILLs the master mid-sale.
- Raw ASGI (core/asgi.py): headers, cookies and a JSON answer for what is answered before Django,
  and every piece of Django the edge and the lane do without it, each a row of `MIRRORED` with a
  parity test against Django's own answer (tests/core/test_mirror.py): the allowed host, the
  redirect to HTTPS, HSTS and the common headers, the cookies, the language as LocaleMiddleware
  decides it (memoised per cookie and header pair), the session's user, the CSRF verdict.
- Batching (core/batches.py, `Batches`: one batch in flight per key; the lane's claims and joins)
  and batched lookups (core/lookups.py, `BatchedLookup`, built on it): the lane's caches and the
  edge's tickets;
  keys asked together fetched together, an unknown one kept a second, and a fetch that began
  before a revocation keeps nothing.
- Text PostgreSQL can store (core/text.py: no NUL, no lone surrogate); formatting
  (core/formatting.py: money through Babel in the buyer's locale, with the browser's region when it
  names the same language, counts and durations through ngettext, the shop's time zone for the
  admin), so pages and e-mails say them one way; spreadsheet-safe cells (core/spreadsheets.py).
- The site's middleware (core/middleware.py): `RefuseControlCharacters`, second in MIDDLEWARE,
  answers a path with a control character 404 before any view, since views pass path values to
  lookups. The development e-mail backend (core/mail.py): one log line per message, the message
  kept in a file.
- The metrics store (core/metrics.py), read by /metrics.
"""
