"""core.locks: a transaction-scoped lock is taken inside a transaction, or refused loudly."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from core import locks


@pytest.mark.django_db(transaction=True)
def test_a_lock_under_autocommit_is_refused_not_silently_dropped() -> None:
    with connection.cursor() as cursor, pytest.raises(locks.NotInTransaction):
        locks.try_lock(cursor, locks.Namespace.RECLAIM, 1)
    with connection.cursor() as cursor, pytest.raises(locks.NotInTransaction):
        locks.lock(cursor, locks.Namespace.WAVE, 1)


@pytest.mark.django_db(transaction=True)
def test_inside_a_transaction_the_lock_is_held_until_it_ends() -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        assert locks.try_lock(cursor, locks.Namespace.RECLAIM, 42)
        cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()")
        assert cursor.fetchone()[0] == 1
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()")
        assert cursor.fetchone()[0] == 0  # released at commit
