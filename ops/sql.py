"""Raw statements of the kill switch."""

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
