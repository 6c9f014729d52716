"""Every PostgreSQL advisory lock Floodgate takes, and the one order all locks follow.

Lock order, in every transaction that takes more than one:

    drop row (FOR NO KEY UPDATE; quantity changes and relayouts only)
      -> hold rows (the claim inserts its own; transitions lock theirs)
        -> presale code rows, then discount code rows, each in id order (a claim spends its
           codes after its hold: holds/presale.py, holds/discounts.py)
        -> stock rows: buckets in index order, units in rank order; the hot row last
          -> an invoice counter row (checkout/invoices.py), last of all, so nothing waits on it

A claim's first statement is the only one that may wait for a row lock (READ COMMITTED
keeps the lock of a row whose recheck failed, so a second wait could close a cycle), with
one exception: a code spend waits for its code's row after the hold and before the stock.
No transaction holding a stock row waits for a code row, nor one holding a code row for a
hold row (a release or an expiry gives codes back before stock, UNSPEND_CODES), so those
waits follow the order and close no cycle; a spend whose recheck fails ends the transaction.

Advisory locks are transaction-scoped (`_xact_`: released at commit, nothing left on a
pooled connection) and each is taken first in a transaction of its own that holds no row
lock, so they never sit inside the order above. The key is (namespace, drop id); the
namespaces are the members of `Namespace`, unique by construction (two once collided).
"""

from __future__ import annotations

from enum import IntEnum, unique

from django.db.backends.utils import CursorWrapper


@unique
class Namespace(IntEnum):
    RECLAIM = 7301  # reclaiming a drop's expired holds (holds.services.reclaim_expired)
    COLLAPSE = 7302  # gathering a drop's last units into one bucket (inventory.services.collapse_buckets)
    WAVE = 7303  # running an admission wave of a drop's queue (admission.services.run_wave)


# The drop id folded into the int4 key half (ids are bigint).
_TRY = "SELECT pg_try_advisory_xact_lock(%(namespace)s, (%(key)s %% 2147483647)::int)"
_WAIT = "SELECT pg_advisory_xact_lock(%(namespace)s, (%(key)s %% 2147483647)::int)"


class NotInTransaction(RuntimeError):
    """A transaction-scoped lock asked for under autocommit: it would end with its own statement."""


def _in_transaction(cursor: CursorWrapper) -> None:
    if not cursor.db.in_atomic_block:
        raise NotInTransaction("an advisory xact lock outside transaction.atomic() protects nothing")


def try_lock(cursor: CursorWrapper, namespace: Namespace, key: int) -> bool:
    """Take the lock for this transaction if free; False: another transaction has it."""
    _in_transaction(cursor)
    cursor.execute(_TRY, {"namespace": int(namespace), "key": key})
    return bool(cursor.fetchone()[0])


def lock(cursor: CursorWrapper, namespace: Namespace, key: int) -> None:
    """Wait for the lock and hold it until this transaction ends."""
    _in_transaction(cursor)
    cursor.execute(_WAIT, {"namespace": int(namespace), "key": key})
    cursor.fetchone()
