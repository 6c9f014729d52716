"""A database that cannot answer (a failover, a partition) is a 503 "busy, try again" with
Retry-After for a buyer's page, never a 500: a real daphne process whose PostgreSQL sits behind
a real PgBouncer, which is then told to refuse the database and drop its connections."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from django.db import (
    DatabaseError,
    InternalError,
    OperationalError,
    ProgrammingError,
    connection,
    transaction,
)
from django.test import RequestFactory

from core.errors import database_not_now
from devtools.pgbouncer import Bouncer
from devtools.ports import free_port
from storefront import views
from tests.conftest import app_env, start_pgbouncer, start_process, stop, wait_for_port
from tests.factories import make_drop

pytestmark = [pytest.mark.servers, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def behind_a_bouncer(payment_provider: str) -> Iterator[tuple[str, Bouncer]]:
    """(the store's address, its PgBouncer): daphne on the test database through PgBouncer."""
    bouncer = start_pgbouncer("pgbouncer-away")
    port = free_port()
    env = {
        **app_env(payment_provider, f"http://127.0.0.1:{port}"),
        "DATABASE_URL": bouncer.url,
        "DEBUG": "0",  # Django answers with its handler500, as in production
        "DB_POOLER": "pgbouncer",
        "DB_POOL_MIN_SIZE": "1",
        "DB_POOL_MAX_SIZE": "4",
        "DB_POOL_TIMEOUT": "2",
        "DB_POOL_RECONNECT_TIMEOUT": "1",
    }
    daphne = str(Path(sys.executable).parent / "daphne")
    process, log = start_process(
        f"daphne-away-{port}", [daphne, "-b", "127.0.0.1", "-p", str(port), "config.asgi:application"], env
    )
    try:
        wait_for_port(port, process, log)
        yield f"http://127.0.0.1:{port}", bouncer
    finally:
        stop(process)
        bouncer.stop()


def test_a_page_says_busy_with_retry_after_while_the_database_is_away_and_serves_again_after(
    behind_a_bouncer: tuple[str, Bouncer],
) -> None:
    base, bouncer = behind_a_bouncer
    make_drop(slug="away", quantity=5)
    database = bouncer.url.rsplit("/", 1)[-1].split("?")[0]
    with httpx.Client(base_url=base, timeout=30, headers={"Accept-Language": "de"}) as client:
        assert client.get("/drops/away/").status_code == 200  # the control: served while it answers
        bouncer.admin(f"DISABLE {database}")
        bouncer.admin(f"KILL {database}")
        for path in ("/", "/drops/away/"):
            answer = client.get(path)
            assert answer.status_code == 503, (path, answer.text[:300])
            assert answer.headers["Retry-After"] == str(views.DATABASE_AWAY_RETRY)
            assert "sehr ausgelastet" in answer.text and 'http-equiv="refresh"' in answer.text
        api = client.get("/api/drops")
        assert api.status_code == 503 and api.json()["error"] == "busy"
        bouncer.admin(f"ENABLE {database}")
        bouncer.admin(f"RESUME {database}")
        answer = client.get("/drops/away/")
        for _ in range(20):  # the pool reconnects within its reconnect timeout
            if answer.status_code == 200:
                break
            answer = client.get("/drops/away/")
        assert answer.status_code == 200


def test_any_other_error_is_still_a_500_and_not_disguised_as_busy() -> None:
    request = RequestFactory().get("/")
    try:
        raise ValueError("a bug")
    except ValueError:
        bug = views.server_error(request)
    try:
        raise OperationalError("could not connect to server")
    except OperationalError:
        away = views.server_error(request)
    assert bug.status_code == 500 and "Retry-After" not in bug
    assert away.status_code == 503 and away["Retry-After"] == "5"


def test_a_write_refused_by_a_read_only_server_is_busy_and_another_database_error_is_not() -> None:
    """A primary Patroni demoted (etcd's quorum lost: `prove partitions` met it) refuses writes with
    SQLSTATE 25006, which Django raises as InternalError: busy, as a lost connection is."""
    request = RequestFactory().post("/api/holds/1/payment")
    with pytest.raises(InternalError) as refused, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET TRANSACTION READ ONLY")
        cursor.execute("CREATE TABLE read_only_probe (a int)")
    with pytest.raises(ProgrammingError) as other, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT * FROM no_such_table")

    assert database_not_now(refused.value) and not database_not_now(other.value)
    for error, status in ((refused.value, 503), (other.value, 500)):
        try:
            raise error
        except DatabaseError:
            answer = views.server_error(request)
        assert answer.status_code == status
