"""The report's reads: every statement names its drop and only reads."""

# Each entry's outcome (fairness/outcomes.py), in entry order: its place, whether the mark reached
# it, and what its buyer's holds became (an offer's hold carries the ticket's offer key).
OUTCOMES = """
SELECT t.id, t.number, t.number IS NOT NULL AND t.number <= q.admitted_through,
       count(h.id) FILTER (WHERE h.idempotency_key = 'offer:' || t.id),
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
  JOIN admission_ticket t ON t.drop_id = h.drop_id AND h.idempotency_key = 'offer:' || t.id
 WHERE h.drop_id = %(drop)s
 ORDER BY h.id
"""

# Units refunded, and of those put back on sale.
REFUNDS = """
SELECT coalesce(sum(refunded), 0), coalesce(sum(restocked), 0), count(*) FILTER (WHERE state = 'expired')
  FROM holds_hold
 WHERE drop_id = %(drop)s
"""
