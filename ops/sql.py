"""Raw statements of the kill switch and the merchant's sales page."""

from __future__ import annotations

# Pause a drop that is not paused. Every claim statement reads d.paused, so once this
# commits no new claim statement can succeed. 1 row: paused now; 0 rows: already paused.
PAUSE_DROP = """
UPDATE shop_drop SET paused = true, paused_at = now(), paused_by_id = %(actor)s, pause_reason = %(reason)s
 WHERE id = %(drop)s AND NOT paused
RETURNING id
"""

# 1 row: resumed now; 0 rows: was not paused.
RESUME_DROP = """
UPDATE shop_drop SET paused = false, paused_at = NULL, paused_by_id = NULL, pause_reason = ''
 WHERE id = %(drop)s AND paused
RETURNING id
"""

RECORD_PAUSE_EVENT = """
INSERT INTO shop_pauseevent (drop_id, action, actor_id, reason, at)
VALUES (%(drop)s, %(action)s, %(actor)s, %(reason)s, now())
"""

# The wall clock right now (not the transaction's start), to wait for older transactions.
CLOCK = "SELECT clock_timestamp()"

# Other client transactions of this database that began before `since`: claims whose
# statement may have read the drop before the pause committed.
OLDER_TRANSACTIONS = """
SELECT count(*) FROM pg_stat_activity
 WHERE datname = current_database() AND pid <> pg_backend_pid()
   AND backend_type = 'client backend' AND xact_start < %(since)s
"""

# Backends of this database waiting for a lock right now (row locks on hot rows show here).
LOCK_WAITS = """
SELECT count(*) FROM pg_stat_activity
 WHERE datname = current_database() AND wait_event_type = 'Lock'
"""

# The scheduled duties (ops/duties.py) -------------------------------------------------------

# Every duty this process knows gets a row; a new row counts Celery's last run as now, so a store
# starting up gives beat its first period before anyone covers. DO NOTHING: an existing row is not
# locked (a scrape or a keeper's check must not queue behind a lease being taken).
ENSURE_DUTIES = """
INSERT INTO ops_duty (name, period_seconds, late_after_seconds, scheduled_ran_at, ran_by,
                      leased_by, covered_runs, last_error)
SELECT name, period, late, now(), '', '', 0, ''
  FROM unnest(%(names)s::text[], %(periods)s::float8[], %(lates)s::float8[]) AS t(name, period, late)
ON CONFLICT (name) DO NOTHING
"""

# A duty's period changed in the settings: the rows follow (matches nothing when they agree).
UPDATE_DUTY_PERIODS = """
UPDATE ops_duty d SET period_seconds = t.period, late_after_seconds = t.late
  FROM unnest(%(names)s::text[], %(periods)s::float8[], %(lates)s::float8[]) AS t(name, period, late)
 WHERE d.name = t.name AND (d.period_seconds, d.late_after_seconds) IS DISTINCT FROM (t.period, t.late)
"""

# A run that finished in Celery: it is on schedule again, and any web process's lease ends.
# Protects: the hand-back (a duty Celery runs is not covered any more).
RECORD_SCHEDULED_RUN = """
UPDATE ops_duty
   SET scheduled_ran_at = now(), ran_at = now(), ran_by = 'celery', lease_until = NULL, leased_by = '',
       last_error = ''
 WHERE name = %(name)s
"""

# The lease: the duties whose Celery runs are late and that are due again, for this process
# alone until the lease runs out (it renews its own while it keeps running them, and while a long
# run goes on). Rows are locked by the UPDATE, so of two processes asking at once the second
# re-reads the first's lease and is refused. Protects: one web process covers a duty at a time.
TAKE_LATE_DUTIES = """
UPDATE ops_duty
   SET lease_until = now() + make_interval(secs => period_seconds * 2 + 2), leased_by = %(me)s
 WHERE name = ANY(%(names)s)
   AND scheduled_ran_at < now() - make_interval(secs => late_after_seconds)
   AND (ran_at IS NULL OR ran_at <= now() - make_interval(secs => period_seconds * 0.95))
   AND (lease_until IS NULL OR lease_until < now() OR leased_by = %(me)s)
RETURNING name
"""

# The lease again for a duty this process covers, while Celery is still late and nobody else took
# it (a Celery run clears leased_by: the duty is handed back). Protects: the same, over time.
RENEW_DUTY = """
UPDATE ops_duty
   SET lease_until = now() + make_interval(secs => period_seconds * 2 + 2)
 WHERE name = %(name)s AND leased_by = %(me)s
   AND scheduled_ran_at < now() - make_interval(secs => late_after_seconds)
RETURNING name
"""

# A run a web process made in Celery's place (or tried to: error says why it failed; a failed
# run leaves ran_at as it was, so the duty grows late for the alert). Only the lease holder's:
# a run that finished after its lease passed to another process is not recorded.
RECORD_COVERED_RUN = """
UPDATE ops_duty
   SET ran_at = CASE WHEN %(error)s = '' THEN now() ELSE ran_at END, ran_by = %(me)s,
       covered_runs = covered_runs + 1, last_error = %(error)s
 WHERE name = %(name)s AND leased_by = %(me)s
"""

# For /metrics and the dashboard: each duty's age and whether Celery is late with it.
DUTY_STATES = """
SELECT name, period_seconds, late_after_seconds,
       extract(epoch FROM now() - coalesce(ran_at, scheduled_ran_at))::float8,
       scheduled_ran_at < now() - make_interval(secs => late_after_seconds),
       ran_by, covered_runs, last_error
  FROM ops_duty ORDER BY name
"""


# Seconds from the drop's start to its first and its last sale, and the money refunded (not
# failed) for it. Read only.
SALES_SPAN = """
SELECT s.first, s.last,
       (SELECT sum(r.amount_minor) FROM checkout_refund r JOIN checkout_order o ON o.id = r.order_id
         WHERE o.drop_id = d.id AND r.state <> 'failed')
  FROM shop_drop d
 CROSS JOIN LATERAL (
       SELECT extract(epoch FROM min(h.ended_at) - d.starts_at)::float AS first,
              extract(epoch FROM max(h.ended_at) - d.starts_at)::float AS last
         FROM holds_hold h WHERE h.drop_id = d.id AND h.state = 'sold') s
 WHERE d.id = %(drop)s
"""

# Units sold and revenue per slot of `step` seconds from the first sale (`first` seconds after
# the drop's start, which a rehearsal's clock can put before it), so the chart starts at the
# first sale. A sale is its hold's end (the confirm); its revenue what the order charged. Read only.
SALES_OVER_TIME = """
SELECT greatest(0, floor((extract(epoch FROM h.ended_at - d.starts_at) - %(first)s) / %(step)s))::int AS slot,
       sum(h.quantity)::int, sum(o.amount_minor)::bigint
  FROM holds_hold h
  JOIN shop_drop d ON d.id = h.drop_id
  JOIN checkout_order o ON o.hold_id = h.id
 WHERE h.drop_id = %(drop)s AND h.state = 'sold'
 GROUP BY 1 ORDER BY 1
"""


# SALES_OVER_TIME per variant: (variant id, slot, units, revenue) for the variants' own lines on
# the sales chart. Read only.
SALES_OVER_TIME_BY_VARIANT = """
SELECT h.variant_id,
       greatest(0, floor((extract(epoch FROM h.ended_at - d.starts_at) - %(first)s) / %(step)s))::int AS slot,
       sum(h.quantity)::int, sum(o.amount_minor)::bigint
  FROM holds_hold h
  JOIN shop_drop d ON d.id = h.drop_id
  JOIN checkout_order o ON o.hold_id = h.id
 WHERE h.drop_id = %(drop)s AND h.state = 'sold'
 GROUP BY 1, 2 ORDER BY 1, 2
"""
