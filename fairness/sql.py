"""The report's reads: every statement names its drop and only reads.

An offer's hold is the one the offerer made for the ticket's buyer under the ticket's offer key
with no request digest (admission/sql.py OFFER_KEY): a buyer who sends that key as their own
idempotency key makes a hold with a digest, which is not an offer.
"""

# Each entry's outcome (fairness/outcomes.py), in entry order: its place, whether the line let
# it in (a banned account's ticket is skipped by the admission), and what its buyer's holds became.
OUTCOMES = """
SELECT t.id, t.number, t.number IS NOT NULL AND t.number <= q.admitted_through AND u.is_active,
       count(h.id) FILTER (WHERE h.idempotency_key = 'offer:' || t.id AND h.request_digest = ''),
       count(h.id) FILTER (WHERE h.state = 'expired'),
       coalesce(sum(h.quantity) FILTER (WHERE h.state = 'sold'), 0),
       coalesce(sum(h.refunded) FILTER (WHERE h.state = 'sold'), 0),
       NOT u.is_active
  FROM admission_ticket t
  JOIN admission_queue q ON q.drop_id = t.drop_id
  JOIN auth_user u ON u.id = t.buyer_id
  LEFT JOIN holds_hold h ON h.drop_id = t.drop_id AND h.buyer_id = t.buyer_id
 WHERE t.drop_id = %(drop)s
 GROUP BY t.id, t.number, q.admitted_through, u.is_active
 ORDER BY t.id
"""

# The offers made, in the order they were made: (entry, place, when).
OFFERS = """
SELECT t.id, t.number, h.created_at
  FROM holds_hold h
  JOIN admission_ticket t ON t.drop_id = h.drop_id AND t.buyer_id = h.buyer_id
                         AND h.idempotency_key = 'offer:' || t.id AND h.request_digest = ''
 WHERE h.drop_id = %(drop)s
 ORDER BY h.id
"""

# Units refunded, and of those put back on sale; holds that ran out. A unit resold through the
# exchange is the new buyer's (not a refund the shop made), and an exchange buyer's unit given back
# before its capture went back to its listing, not on sale.
REFUNDS = """
SELECT coalesce(sum(refunded - resold - CASE WHEN exchange THEN restocked ELSE 0 END), 0),
       coalesce(sum(restocked) FILTER (WHERE NOT exchange), 0),
       count(*) FILTER (WHERE state = 'expired')
  FROM holds_hold
 WHERE drop_id = %(drop)s
"""

# The report is read in one snapshot (fairness/services.py): every figure from the same moment.
SNAPSHOT = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"
NOW = "SELECT now()"

# The face-value exchange's listings by how they ended: (listed, resold, kept, withdrawn, fees kept).
EXCHANGE = """
SELECT count(*), count(*) FILTER (WHERE state IN ('sold', 'paid')), count(*) FILTER (WHERE state = 'kept'),
       count(*) FILTER (WHERE state = 'withdrawn'), coalesce(sum(fee_minor) FILTER (WHERE state = 'paid'), 0)
  FROM holds_listing
 WHERE drop_id = %(drop)s
"""
