"""Sharding by drop (docs/SCALING.md): every claim-path statement names its drop.

With Citus distributing stock rows, holds, tickets and orders by `drop_id`, a statement that
names the drop goes to one shard; one that does not fans out to all of them, and a reserve
transaction containing it stops being a single-shard transaction.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import connection

from admission import sql as admission_sql
from holds import services as holds
from holds import sql as holds_sql
from inventory import sql as inventory_sql
from tests.factories import make_drop

# The parameter a statement takes its drop (or a set of drops) by.
NAMES_THE_DROP = re.compile(r"%\(drops?\)s")
# Statements that reach rows by something other than the drop, each with the reason.
NOT_BY_DROP = {
    # the sweeper's one scan for drops with overdue holds: a multi-shard read by design, outside
    # any claim; the expiry itself (EXPIRE_DUE_HOLDS) is per drop.
    "DROPS_WITH_DUE_HOLDS": "the sweeper's cross-drop scan",
    # Transitions after the claim, by hold id: correct on Citus but routed to every shard until
    # the callers pass the drop (they have it: the order's drop, the hold the API found).
    "RELEASE_HOLD": "by hold id (docs/SCALING.md, what changes)",
    "CONFIRM_HOLD": "by hold id (docs/SCALING.md, what changes)",
    "HOLD_FOR_PAYMENT": "by hold id (docs/SCALING.md, what changes)",
    "PIN_FOR_SETTLEMENT": "by hold id (docs/SCALING.md, what changes)",
    "REFUND_UNITS": "by hold id (docs/SCALING.md, what changes)",
}


def statements() -> dict[str, str]:
    """Every whole statement (not fragment) of the claim path's SQL modules, by constant name."""
    found = {}
    for module in (inventory_sql, holds_sql, admission_sql):
        for name, value in vars(module).items():
            if name.isupper() and isinstance(value, str):
                first = value.strip().split(maxsplit=1)[0].upper() if value.strip() else ""
                if first in {"SELECT", "UPDATE", "INSERT", "DELETE", "WITH"}:
                    found[name] = value
    return found


def test_control_the_check_sees_a_statement_that_does_not_name_its_drop() -> None:
    before = "UPDATE holds_hold SET bucket_index = %(index)s WHERE id = %(hold)s"  # SET_BUCKET, once

    assert not NAMES_THE_DROP.search(before)
    assert NAMES_THE_DROP.search(holds_sql.SET_BUCKET)


def test_every_claim_path_statement_names_its_drop() -> None:
    found = statements()
    unnamed = sorted(name for name, text in found.items() if not NAMES_THE_DROP.search(text))

    # the scan found the claim statements themselves, and only the listed ones go by something else
    assert {"TAKE_FROM_BUCKET", "CLAIM_BEST_UNITS", "INSERT_HOLDS", "EXPIRE_DUE_HOLDS", "SNAPSHOTS"} <= set(
        found
    )
    assert unnamed == sorted(NOT_BY_DROP)


@contextmanager
def statements_run() -> Iterator[list[tuple[str, object]]]:
    seen: list[tuple[str, object]] = []

    def record(execute, sql, params, many, context):
        seen.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        yield seen


def carries_drop(sql: str, params: object, drop_id: int) -> bool:
    if isinstance(params, dict):
        by_drop = params.get("drop") == drop_id and "%(drop)s" in sql
        # a drop's advisory lock (core.locks) is keyed by the drop: one node decides it
        locked = "advisory_xact_lock" in sql and params.get("key") == drop_id
        return by_drop or locked or drop_id in params.get("drops", [])
    return isinstance(params, list | tuple) and drop_id in params


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("mode", "buckets"), [("buckets", 1), ("buckets", 3), ("units", 1)])
def test_a_reserve_and_a_batch_send_only_statements_that_carry_the_drop(make_buyers, mode, buckets) -> None:
    drop = make_drop(quantity=3, mode=mode, buckets=buckets, per_buyer_limit=1)
    buyers = make_buyers(6)

    with statements_run() as single:
        holds.reserve(drop=drop, buyer_id=buyers[0], quantity=1, idempotency_key=uuid.uuid4().hex)
    with statements_run() as batch:
        asks = [holds.Ask(buyer_id=b, quantity=1, key=uuid.uuid4().hex) for b in buyers[1:]]
        answers = holds.reserve_batch(drop=drop, asks=asks)

    assert sum(isinstance(a, holds.Reservation) for a in answers) == 2  # the batch sold the rest out
    sent = [
        (sql, params)
        for sql, params in single + batch
        if not sql.lstrip().upper().startswith(("SAVEPOINT", "RELEASE"))
    ]
    without = [
        sql
        for sql, params in sent
        if not carries_drop(sql, params, drop.pk) and "FROM auth_user" not in sql  # a reference table
    ]
    assert len(sent) >= 6 and without == []
