"""Raw SQL of the catalogue that other layers' statements build on."""

from __future__ import annotations

# Whether buyer `u` (auth_user) may take part in drop `d` (shop_drop): a rehearsal's own buyers
# only in its copy, everyone else only in real drops. Part of every claim statement, so a cached
# page or token never lets a real buyer pay for a rehearsal's made-up stock, nor a rehearsal's
# account buy real stock. One primary-key probe.
AUDIENCE = """(SELECT r.drop_id FROM shop_rehearsalbuyer r WHERE r.user_id = u.id)
       IS NOT DISTINCT FROM (CASE WHEN d.rehearsal_of_id IS NOT NULL THEN d.id END)"""

# The buyers whose accounts exist and are active, each with whether it may take part in the
# drop: (buyer, may take part); no row, not active (an account deleted or deactivated since a
# token or session was cached is refused here). A drop deleted meanwhile counts as a real one:
# the insert after this finds it gone.
MAY_TAKE_PART = f"""
SELECT u.id, {AUDIENCE}
  FROM auth_user u LEFT JOIN shop_drop d ON d.id = %(drop)s
 WHERE u.id = ANY(%(buyers)s) AND u.is_active
"""

# The one definition of a drop's state on the database's clock (d = shop_drop), in the order
# buyers are told (paused, then not started, then ended): the snapshots publish it, and "on
# sale" for every claim below is its 'live'. shop.models.Drop.state_at is the same rule for Python.
STATE = """CASE WHEN d.paused THEN 'paused'
            WHEN now() < d.starts_at THEN 'scheduled'
            WHEN now() >= d.ends_at THEN 'ended'
            ELSE 'live' END"""
LIVE = f"({STATE}) = 'live'"

# The presale window (d = shop_drop), on the database's clock: from presale_starts_at until the
# public start, not paused. Drop.in_presale_at is the same rule for Python.
PRESALE = "(NOT d.paused AND d.presale_starts_at <= now() AND now() < d.starts_at)"

# "On sale" for a single claim: live, or in the presale window for a claim whose caller admitted it
# to the presale (a code spent or a place on the list, in the same transaction: holds/presale.py).
# Every statement using it takes %(presale)s.
ON_SALE = f"({LIVE} OR (%(presale)s AND {PRESALE}))"

# A buyer's language (shop_buyerlanguage), written only if it differs: the row locked and
# rewritten when the buyer changed language, nothing written when they did not.
REMEMBER_LANGUAGE = """
INSERT INTO shop_buyerlanguage (user_id, language, changed_at) VALUES (%(buyer)s, %(language)s, now())
ON CONFLICT (user_id) DO UPDATE SET language = EXCLUDED.language, changed_at = EXCLUDED.changed_at
 WHERE shop_buyerlanguage.language IS DISTINCT FROM EXCLUDED.language
"""
