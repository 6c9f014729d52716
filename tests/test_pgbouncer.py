"""PgBouncer in transaction mode: what breaks through it, and that Floodgate does none of it.

The race, saga and kill-switch tests run through a real PgBouncer too (their `database_path`
parameter); `pytest --through-pgbouncer` sends every test through one.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from devtools import pgbouncer as bouncers
from tests.conftest import start_pgbouncer

pytestmark = pytest.mark.servers  # Debian's PgBouncer

ROOT = Path(__file__).resolve().parent.parent
PRODUCTION = [
    "config",
    "core",
    "shop",
    "inventory",
    "catalogue",
    "holds",
    "admission",
    "sale",
    "checkout",
    "fairness",
    "ops",
    "storefront",
    "accounts",
]


@pytest.fixture
def one_server_connection(django_db_setup: None) -> Iterator[bouncers.Bouncer]:
    """A PgBouncer with a pool of one: every client's transactions share one server session."""
    bouncer = start_pgbouncer("pgbouncer-one", pool_size=1)
    yield bouncer
    bouncer.stop()


def connect(bouncer: bouncers.Bouncer, **options: Any) -> psycopg.Connection:
    return psycopg.connect(bouncer.url, autocommit=True, **options)


def test_debian_pgbouncer_cannot_carry_prepared_statements() -> None:
    # The reason settings set prepare_threshold=None under DB_POOLER=pgbouncer (1.21 added support).
    assert bouncers.version() < (1, 21)


def test_control_prepared_statements_break_through_transaction_pooling(one_server_connection) -> None:
    # given two clients that prepare every statement (psycopg's prepare_threshold=0)
    first = connect(one_server_connection, prepare_threshold=0)
    second = connect(one_server_connection, prepare_threshold=0)

    # when both run a statement: each names its first prepared statement alike, on one server session
    first.execute("SELECT 1").fetchone()
    with pytest.raises(psycopg.errors.DuplicatePreparedStatement):
        second.execute("SELECT 1").fetchone()
    first.close()
    second.close()


def test_unprepared_statements_pass_through_transaction_pooling(one_server_connection) -> None:
    first = connect(one_server_connection, prepare_threshold=None)
    second = connect(one_server_connection, prepare_threshold=None)

    for _ in range(10):
        assert first.execute("SELECT %s::int", [1]).fetchone() == (1,)
        assert second.execute("SELECT %s::int", [2]).fetchone() == (2,)
    first.close()
    second.close()


def test_control_session_state_leaks_to_another_client_and_local_state_does_not(
    one_server_connection,
) -> None:
    first = connect(one_server_connection, prepare_threshold=None)
    second = connect(one_server_connection, prepare_threshold=None)

    # a plain SET stays on the server session, which the next client's transaction gets
    first.execute("SET statement_timeout = '4321ms'")
    assert second.execute("SHOW statement_timeout").fetchone() == ("4321ms",)
    second.execute("RESET statement_timeout")
    # SET LOCAL ends with its transaction
    with first.transaction():
        first.execute("SET LOCAL statement_timeout = '1234ms'")
    assert second.execute("SHOW statement_timeout").fetchone() != ("1234ms",)
    first.close()
    second.close()


def test_control_a_session_advisory_lock_outlives_its_transaction(one_server_connection) -> None:
    first = connect(one_server_connection, prepare_threshold=None)
    second = connect(one_server_connection, prepare_threshold=None)

    # a session lock stays with the server session: another client now "holds" it too
    first.execute("SELECT pg_advisory_lock(7399, 1)")
    assert second.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").fetchone() == (1,)
    second.execute("SELECT pg_advisory_unlock_all()")
    # a transaction lock is gone at the commit
    with first.transaction():
        first.execute("SELECT pg_advisory_xact_lock(7399, 1)")
    assert second.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").fetchone() == (0,)
    first.close()
    second.close()


# What keeps state on a server session beyond its transaction, in the SQL the code sends (its
# string constants; the project writes SQL keywords in capitals). `UPDATE ... SET` and `SET LOCAL`
# are fine; a statement that is a plain `SET` / `RESET`, a session advisory lock, LISTEN, PREPARE,
# a cursor WITH HOLD, a temporary table and set_config(..., false) are not, nor enabling psycopg's
# prepared statements.
SESSION_STATE = [
    re.compile(r"(?:\A|;)\s*(SET|RESET)\s+(?!LOCAL\b)(?!TRANSACTION\b)\w"),
    re.compile(r"pg_(try_)?advisory_lock(_shared)?\s*\(", re.IGNORECASE),
    re.compile(r"\b(LISTEN|UNLISTEN)\s+\w"),
    re.compile(r"\bPREPARE\s+\w+\s+(AS|\()"),
    re.compile(r"\bWITH\s+HOLD\b"),
    re.compile(r"\bCREATE\s+(TEMP|TEMPORARY)\s+TABLE\b"),
    re.compile(r"set_config\s*\([^)]*false\s*\)", re.IGNORECASE),
]
PREPARING = re.compile(r"prepare_threshold['\"]?\s*[=:]\s*\d")


def session_state_in(source: str) -> list[str]:
    """What in this Python source would keep state on a pooled server session."""
    strings = [
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]
    found = [
        match.group(0) for text in strings for pattern in SESSION_STATE for match in pattern.finditer(text)
    ]
    return found + [match.group(0) for match in PREPARING.finditer(source)]


def test_control_the_scan_finds_each_kind_of_session_state() -> None:
    bad = [
        'cursor.execute("SET statement_timeout = 100")',
        'SQL = """\n  SET lock_timeout = 10"""',
        'cursor.execute("SELECT 1; RESET ALL")',
        'Q = "SELECT pg_advisory_lock(1, 2)"',
        'Q = "SELECT pg_try_advisory_lock(%(a)s, %(b)s)"',
        'Q = "LISTEN drops"',
        'Q = "PREPARE claim AS SELECT 1"',
        'Q = "DECLARE c CURSOR WITH HOLD FOR SELECT 1"',
        'Q = "CREATE TEMP TABLE t (x int)"',
        "Q = \"SELECT set_config('TimeZone', 'UTC', false)\"",
        "OPTIONS = {'prepare_threshold': 5}",
    ]
    good = [
        'Q = """\nUPDATE inventory_stockbucket\n   SET available = available - 1"""',
        'cursor.execute("SET LOCAL lock_timeout = 100")',
        'Q = "SELECT pg_try_advisory_xact_lock(1, 2)"',
        "Q = \"SELECT set_config('x.y', '1', true)\"",
        '# SET x = 1 in a comment\nmessage = "Set a limit; listen to the crowd with hold music"',
    ]

    assert all(session_state_in(text) for text in bad), [t for t in bad if not session_state_in(t)]
    assert not any(session_state_in(text) for text in good), [t for t in good if session_state_in(t)]


def test_production_code_keeps_no_session_state() -> None:
    found = {
        str(path.relative_to(ROOT)): hits
        for package in PRODUCTION
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts and (hits := session_state_in(path.read_text()))
    }

    assert found == {}
