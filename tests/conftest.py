"""Fixtures for tests against real PostgreSQL and Redis (never SQLite, never mocks)."""

from __future__ import annotations

import contextlib
import copy
import os
import signal
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis as redis_lib
from django.conf import settings
from django.db import connections
from django.db.backends.postgresql.base import DatabaseWrapper as PostgresConnection
from django.http import HttpResponseBase
from django.test import Client
from pytest_django import DjangoDbBlocker

from devtools import ports
from devtools.ports import free_port
from tests.api_schema import ApiSchema
from tests.harness import edge_alone, fresh_edge, work  # noqa: F401 - fixtures for every test

ROOT = Path(__file__).resolve().parent.parent
# What the tests and the processes they start write (logs, mail, schedules): a folder per run
# stream (devtools/devstack.py runs the full suite as two at once).
TEST_DATA = ROOT / ".data" / os.environ.get("FLOODGATE_TEST_DATA", "test")
CELERY = str(Path(sys.executable).parent / "celery")  # the venv's console scripts
WEB = str(Path(sys.executable).parent / "floodgate-web")
# No web process of a test covers beat's duties on its own (ops/duties.py): it would run ticks,
# offers and the watchdog under other tests. The servers the takeover tests start turn it on.
os.environ.setdefault("DUTY_TAKEOVER", "0")
settings.DUTY_TAKEOVER = os.environ["DUTY_TAKEOVER"] not in {"0", "false", "no", "off", ""}
# The draw at the start, as before a beacon: a named drand round would hold the first wave until
# the round is due. tests/admission/test_beacon_draw.py turns it on and serves recorded rounds.
os.environ.setdefault("DRAW_BEACON", "")
settings.DRAW_BEACON = os.environ["DRAW_BEACON"]
PROVIDER_SECRET = "sim-secret-dev"
WEBHOOK_SECRET = "sim-webhook-secret-dev"


# The suite's two tiers: `python3 floodgate.py test --fast` (FLOODGATE_TIER=fast) runs what needs
# nothing but PostgreSQL and Redis, the developer's loop; the full run adds every test marked
# `browser`, `servers` or `slow` (about 5 s or more: the biggest crowds, the longest waits). A test
# that asks for one of these fixtures is marked `servers` here; a module that starts processes
# itself says so in its pytestmark. In the fast tier any other process start fails its test, so a
# test that needs one cannot slip into the loop unmarked.
SERVER_FIXTURES = frozenset(
    {
        "payment_provider", "live_daphne", "celery_with_beat", "celery_worker", "localstripe",
        "stripe_daphne", "stripe_worker", "crowd_server", "pgbouncer",
    }
)  # fmt: skip
FAST_TIER_TOOLS = frozenset({"pg_dump", "pg_restore", "psql"})  # quick, and beside the server


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "asks_for(fixture): the test requests that fixture by name at run time (shared_worker)"
    )
    if os.environ.get("FLOODGATE_TIER") == "fast":
        _refuse_processes()


def _refuse_processes() -> None:
    """The fast tier's guard: a process other than a PostgreSQL client tool fails the test starting it."""
    start = subprocess.Popen.__init__

    def refuse(self: subprocess.Popen, args: Any, *rest: Any, **options: Any) -> None:
        first = args[0] if isinstance(args, (list, tuple)) else str(args).split()[0]
        if Path(str(first)).name not in FAST_TIER_TOOLS:
            raise RuntimeError(
                f"a test of the fast tier started {first}: it belongs in the full tier"
                " (ask for a fixture of SERVER_FIXTURES, or add pytest.mark.servers to its module)"
            )
        start(self, args, *rest, **options)

    subprocess.Popen.__init__ = refuse  # type: ignore[method-assign]


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        through_pgbouncer = callspec and callspec.params.get("database_path")
        if through_pgbouncer == "pgbouncer" or any(asks_for(item, fixture) for fixture in SERVER_FIXTURES):
            item.add_marker(pytest.mark.servers)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--through-pgbouncer",
        action="store_true",
        help="every test's database connections (and the processes tests start) go through a real "
        "PgBouncer in transaction mode (Debian's pgbouncer)",
    )


# The PgBouncer of a --through-pgbouncer run, shared by every test (and by the pgbouncer fixture).
_WHOLE_RUN_BOUNCER: list = []


@contextlib.contextmanager
def routed_through(bouncer) -> Iterator[None]:
    """Point every connection (this process's threads and the processes tests start) at bouncer.

    Each thread's connection is built from the one settings dict per alias, and the psycopg pool
    is per alias: closing both and changing the dict sends every new connection through PgBouncer.
    """
    connection = connections["default"]
    assert isinstance(connection, PostgresConnection)  # the psycopg pool is PostgreSQL's backend's

    settings_dict = connections.settings["default"]
    saved = copy.deepcopy(settings_dict)
    saved_env = {key: os.environ.get(key) for key in ("DATABASE_URL", "DB_POOLER")}
    connections.close_all()
    connection.close_pool()
    settings_dict.update(HOST="127.0.0.1", PORT=str(bouncer.port), DISABLE_SERVER_SIDE_CURSORS=True)
    settings_dict["OPTIONS"] = {**settings_dict["OPTIONS"], "prepare_threshold": None}
    settings_dict["OPTIONS"].pop("host", None)
    os.environ["DATABASE_URL"] = bouncer.url
    os.environ["DB_POOLER"] = "pgbouncer"
    try:
        yield
    finally:
        connections.close_all()
        connection.close_pool()
        settings_dict.clear()
        settings_dict.update(saved)
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def start_pgbouncer(name: str, *, pool_size: int = 20):
    from django.db import connection

    from devtools import pgbouncer

    parts = urlsplit(os.environ["DATABASE_URL"])
    upstream = urlunsplit(parts._replace(path="/" + connection.settings_dict["NAME"]))
    return pgbouncer.start(upstream, TEST_DATA / f"{name}-{os.getpid()}", pool_size=pool_size)


_MIGRATED_DUMP: dict[str, str] = {}  # MIGRATED_DUMP for a fault run's environment, once made


def dump_test_database() -> Path | None:
    """The test database as migrate left it (pg_dump -Fc), for the fault runs' servers, which run
    the embedded binaries: None from a server of another major version (its dump does not restore
    there), or with a warning where pg_dump fails; the fault runs then migrate."""
    import psycopg

    from devtools.pg_servers import pg_bin

    url = database_url_for_tests()
    with psycopg.connect(url) as checked:
        server = checked.info.server_version // 10000
    tools = subprocess.run([str(pg_bin() / "pg_dump"), "--version"], capture_output=True, text=True)
    if f") {server}." not in tools.stdout:  # "pg_dump (PostgreSQL) 18.4"
        return None
    path = TEST_DATA / f"migrated-{os.getpid()}.dump"
    path.parent.mkdir(parents=True, exist_ok=True)
    command = [str(pg_bin() / "pg_dump"), "-Fc", "--no-owner", "--no-privileges", "-f", str(path)]
    done = subprocess.run([*command, url], capture_output=True, text=True)
    if done.returncode != 0:
        warnings.warn(
            f"no dump of the test database, the fault runs migrate: {done.stderr.strip()}", stacklevel=2
        )
        return None
    return path


@pytest.fixture(scope="session")
def migrated_dump(django_db_setup: None) -> dict[str, str]:
    """MIGRATED_DUMP for a fault run's environment: it restores the test database as migrate left
    it instead of migrating its own servers' (devtools/failover.migrate). Empty (the run migrates)
    unless the test has the migrated_dump mark, which has the dump made before any test writes."""
    return _MIGRATED_DUMP


@pytest.fixture(scope="session")
def django_db_setup(
    django_db_setup: None, django_db_blocker, request: pytest.FixtureRequest
) -> Iterator[None]:
    """pytest-django's test database; with --through-pgbouncer, reached through PgBouncer from then on.
    Dumped as migrate left it, before any test writes, when a test of the run restores it
    (the migrated_dump mark)."""
    if any(item.get_closest_marker("migrated_dump") for item in request.session.items):
        dump = dump_test_database()
        if dump is not None:
            _MIGRATED_DUMP["MIGRATED_DUMP"] = str(dump)
            request.addfinalizer(dump.unlink)
    if not request.config.getoption("--through-pgbouncer"):
        yield
        return
    bouncer = start_pgbouncer("pgbouncer-run")
    _WHOLE_RUN_BOUNCER.append(bouncer)
    with routed_through(bouncer):
        yield
    _WHOLE_RUN_BOUNCER.clear()
    bouncer.stop()  # before pytest-django drops the database its server connections are on


@pytest.fixture(scope="session")
def pgbouncer(django_db_setup: None) -> Iterator[object]:
    """A real PgBouncer (transaction pooling) in front of the test database."""
    if _WHOLE_RUN_BOUNCER:
        yield _WHOLE_RUN_BOUNCER[0]
        return
    bouncer = start_pgbouncer("pgbouncer")
    yield bouncer
    bouncer.stop()


def pgbouncer_transactions(bouncer) -> int:
    """Transactions PgBouncer has passed to the server, over all databases."""
    return sum(int(row["total_xact_count"]) for row in bouncer.admin("SHOW STATS"))


@pytest.fixture
def database_path(request: pytest.FixtureRequest) -> Iterator[str]:
    """Parametrize with 'direct' or 'pgbouncer' (indirect): the test's connections, its threads' and
    its processes' go that way. Through PgBouncer the test also shows PgBouncer carried its work.
    In a --through-pgbouncer run every test is already routed through the run's PgBouncer."""
    path = getattr(request, "param", "direct")
    if path == "direct" or _WHOLE_RUN_BOUNCER:
        yield path
        return
    bouncer = request.getfixturevalue("pgbouncer")
    before = pgbouncer_transactions(bouncer)
    with routed_through(bouncer):
        yield path
        carried = pgbouncer_transactions(bouncer) - before
    assert carried >= 20, f"PgBouncer carried {carried} transactions: the test bypassed it"


@pytest.fixture(scope="session")
def published_schema() -> ApiSchema:
    from config.api import schema

    return ApiSchema(schema())


@pytest.fixture(autouse=True)
def api_answers_match_schema(
    published_schema: ApiSchema, monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[ApiSchema]]:
    """Every /api/ answer a test gets through django.test.Client is checked against the published
    schema; one it does not describe (status or body) fails that test. The list holds the schema in
    force, so a test can swap in another and see the check fail."""
    in_force = [published_schema]
    original = Client.request

    def request(client: Client, **environ: object) -> HttpResponseBase:
        response = original(client, **environ)
        wsgi = response.wsgi_request
        if wsgi.path_info.startswith("/api/"):
            assert wsgi.method is not None  # the test client always sends one
            in_force[0].check(
                method=wsgi.method,
                path=wsgi.path_info,
                status=response.status_code,
                content_type=response.get("Content-Type", ""),
                body=response.content,
            )
        return response

    monkeypatch.setattr(Client, "request", request)
    yield in_force


@pytest.fixture
def redis() -> Iterator[redis_lib.Redis]:
    client = redis_lib.Redis.from_url(settings.REDIS_URL)
    client.ping()
    yield client
    client.close()


def database_url_for_tests() -> str:
    """DATABASE_URL with the database swapped for the one pytest-django created."""
    from django.db import connection

    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit(parts._replace(path="/" + connection.settings_dict["NAME"]))


def start_process(name: str, command: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, Path]:
    log = TEST_DATA / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    return process, log


def wait_for_port(port: int, process: subprocess.Popen, log: Path, timeout: float = 30) -> None:
    ports.wait_for_port(
        port, process=process, seconds=timeout, failed=lambda: f"{log.name} did not start:\n{log.read_text()}"
    )


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="session")
def payment_provider() -> Iterator[str]:
    """The simulated payment provider in its own process (fast, never declining unless told)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "PROVIDER_SECRET": PROVIDER_SECRET,
        "PROVIDER_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "PROVIDER_PUBLIC_URL": url,
        "PROVIDER_LATENCY_MS": "50",
        "PROVIDER_FAILURE_RATE": "0",
    }
    process, log = start_process(
        f"provider-{port}",
        [
            str(Path(sys.executable).parent / "daphne"),
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "devtools.provider_sim:app",
        ],
        env,
    )
    wait_for_port(port, process, log)
    yield url
    stop(process)


def app_env(provider_url: str, public_url: str) -> dict[str, str]:
    """Environment of a web or worker process serving the test database."""
    return {
        **os.environ,
        "DATABASE_URL": database_url_for_tests(),
        "PAYMENT_PROVIDER_URL": provider_url,
        "PAYMENT_PROVIDER_SECRET": PROVIDER_SECRET,
        "PAYMENT_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "PUBLIC_BASE_URL": public_url,
        "CELERY_VISIBILITY_TIMEOUT": "4",
        "CELERY_RESTORE_INTERVAL": "1",
        "EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend",
        "EMAIL_FILE_PATH": str(TEST_DATA / "mail"),
    }


@pytest.fixture(scope="session")
def live_daphne(
    django_db_setup: None, django_db_blocker: DjangoDbBlocker, payment_provider: str
) -> Iterator[str]:
    """A real daphne process serving config.asgi:application against the test database."""
    port = free_port()
    env = {**app_env(payment_provider, f"http://127.0.0.1:{port}"), "DB_POOL_MAX_SIZE": "10"}
    process, log = start_process(
        f"daphne-{port}",
        [
            str(Path(sys.executable).parent / "daphne"),
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "config.asgi:application",
        ],
        env,
    )
    wait_for_port(port, process, log)
    yield f"http://127.0.0.1:{port}"
    stop(process)


@pytest.fixture
def celery_with_beat(transactional_db: None) -> Iterator[subprocess.Popen]:
    """A real Celery worker with an embedded beat, on the test database, sweeping every second."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url_for_tests(),
        "DB_POOL_MAX_SIZE": "4",
        "RECLAIM_EVERY_SECONDS": "1",
    }
    schedule = TEST_DATA / f"beat-{os.getpid()}"
    process, _log = start_process(
        "celery",
        [
            str(Path(sys.executable).parent / "celery"),
            "-A",
            "config.celery:app",
            "worker",
            "-B",
            "-s",
            str(schedule),
            "--concurrency",
            "1",
            "-l",
            "info",
            "--without-heartbeat",
            "--without-gossip",
        ],
        env,
    )
    yield process
    # Killed, not shut down warm (~2.5 s): a sweep cut short rolls back. What beat had queued and
    # what the worker held (acks_late: a warm shutdown gave it back) goes too, or a later test's
    # worker would restore it and run it.
    kill_worker(process)
    purge_queue()
    client = redis_lib.Redis.from_url(settings.CELERY_BROKER_URL)
    client.delete("unacked", "unacked_index")
    client.close()


@pytest.fixture
def roles(db: None) -> None:
    """The Merchants and On-call groups; transactional tests flush what the migration made."""
    import importlib

    from django.apps import apps

    importlib.import_module("shop.migrations.0003_roles").create_groups(apps, None)
    importlib.import_module("checkout.migrations.0004_merchants_refund").grant(apps, None)
    importlib.import_module("checkout.migrations.0010_dispute_roles").grant(apps, None)
    importlib.import_module("checkout.migrations.0012_order_shipment").grant(apps, None)
    importlib.import_module("shop.migrations.0020_shop_settings_and_legal_texts").grant(apps, None)
    importlib.import_module("checkout.migrations.0013_settle_payment_permission").grant(apps, None)
    importlib.import_module("holds.migrations.0009_discount_codes_for_merchants").grant(apps, None)
    importlib.import_module("shop.migrations.0022_shipping_zones_for_merchants").grant(apps, None)
    importlib.import_module("fairness.migrations.0002_reports_for_merchants").grant(apps, None)


class Worker:
    """A real Celery worker process on the test database; kill() is SIGKILL, start() again."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.process: subprocess.Popen | None = None
        self.starts = 0
        self.name = ""

    def start(self) -> None:
        self.starts += 1
        celery = str(Path(sys.executable).parent / "celery")
        # a name of its own, so a remote-control question (shared_worker) reaches only this one
        self.name = f"test-{os.getpid()}-{id(self)}-{self.starts}@{socket.gethostname()}"
        self.process, self.log = start_process(
            self.name.split("@")[0].replace("test-", "worker-", 1),
            [
                celery,
                "-A",
                "config.celery:app",
                "worker",
                "-n",
                self.name,
                "--concurrency",
                "2",
                "-l",
                "info",
                "--without-heartbeat",
                "--without-gossip",
                "--without-mingle",
            ],
            self.env,
        )

    def wait_until_consuming(self, seconds: float = 60) -> None:
        """Until the worker answers a ping: from then on it takes tasks off the queue."""
        from config.celery import app

        deadline = time.monotonic() + seconds
        while not app.control.ping(destination=[self.name], timeout=0.5, limit=1):
            assert self.process is not None and self.process.poll() is None, self.log.read_text()[-3000:]
            assert time.monotonic() < deadline, f"the worker did not start:\n{self.log.read_text()[-3000:]}"

    def kill(self) -> None:
        assert self.process is not None
        kill_worker(self.process)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            stop(self.process)


def purge_queue() -> None:
    """Empty the broker's queue, as `celery -A config.celery:app purge -f` does, from this process
    (same app, same broker): no interpreter of its own to start and import Django in."""
    from config.celery import app

    app.control.purge()


def kill_worker(process: subprocess.Popen) -> None:
    """SIGKILL to a Celery worker and its pool's processes."""
    for child in _children(process.pid):
        os.kill(child, signal.SIGKILL)
    process.kill()
    process.wait()


def _children(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(p) for p in found]


# The test pytest runs after the current one (pytest_runtest_protocol), so a worker fixture can
# tell whether the next test asks for the same worker.
_NEXT_TEST: list[pytest.Item | None] = [None]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    _NEXT_TEST[0] = nextitem
    return (yield)


# A worker left running for the next test, by fixture name; at most one runs at a time.
_KEPT_WORKERS: dict[str, Worker] = {}


def _idle(worker: Worker) -> bool:
    """Nothing of the test's in the worker's hands (running, prefetched or waiting for its ETA)
    and nothing left in the queue or unacknowledged in the broker."""
    from config.celery import app

    if worker.process is None or worker.process.poll() is not None:
        return False
    client = redis_lib.Redis.from_url(settings.CELERY_BROKER_URL)
    try:
        inspect = app.control.inspect(destination=[worker.name], timeout=2, limit=1)
        for ask in (inspect.active, inspect.reserved, inspect.scheduled):
            answer = ask()
            if not answer or answer.get(worker.name):
                return False
        return client.llen("celery") == 0 and client.hlen("unacked") == 0
    finally:
        client.close()


def asks_for(test: pytest.Item | None, fixture: str) -> bool:
    """Whether the test uses the fixture: among its arguments' fixtures, or named by an asks_for
    mark (a fixture that requests it by name at run time)."""
    if test is None:
        return False
    marked = {name for mark in test.iter_markers("asks_for") for name in mark.args}
    return fixture in getattr(test, "fixturenames", ()) or fixture in marked


def _settles(worker: Worker, seconds: float = 4) -> bool:
    """Whether the worker is idle within a few seconds: a stop would wait for its tasks anyway."""
    deadline = time.monotonic() + seconds
    while not _idle(worker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _settings_of(env: dict[str, str]) -> dict[str, str]:
    """A worker's environment but pytest's own note of the test running when it started."""
    return {key: value for key, value in env.items() if key != "PYTEST_CURRENT_TEST"}


def shared_worker(request: pytest.FixtureRequest, env: dict[str, str]) -> Iterator[Worker]:
    """The fixture `request.fixturename`'s worker: a fresh process unless the test before asked for
    the same one and left it idle. Between two such tests the queue is purged as for a fresh one;
    when the next test does not ask for it (or it is not idle), the worker stops, so a test without
    a worker never has one consuming its tasks."""

    name = request.fixturename
    assert name is not None  # a fixture's own request
    for other in [key for key in _KEPT_WORKERS if key != name]:
        _KEPT_WORKERS.pop(other).stop()
    worker = _KEPT_WORKERS.pop(name, None)
    if worker is not None and _settings_of(worker.env) != _settings_of(env):
        worker.stop()
        worker = None
    purge_queue()  # an empty queue first, so earlier tests' tasks do not leak in
    if worker is None:
        worker = Worker(env)
        worker.start()
        # A task sent before the worker consumes waits in the queue, and one that expires (an
        # offer_now after 5 s) could be dropped before a slow start ends: the test starts once
        # the worker takes tasks.
        worker.wait_until_consuming()
    try:
        yield worker
    finally:
        if asks_for(_NEXT_TEST[0], name) and _settles(worker):
            _KEPT_WORKERS[name] = worker
        elif _idle(worker):
            worker.kill()  # nothing in its hands: a warm shutdown's two seconds would buy nothing
        else:
            worker.stop()


@pytest.fixture(scope="session", autouse=True)
def _stop_kept_workers() -> Iterator[None]:
    yield
    while _KEPT_WORKERS:
        _KEPT_WORKERS.popitem()[1].stop()


@pytest.fixture
def celery_worker(
    transactional_db: None, payment_provider: str, live_daphne: str, request: pytest.FixtureRequest
) -> Iterator[Worker]:
    """A worker with an empty queue (earlier tests' tasks do not leak in) and nothing in hand:
    fresh, or the previous test's left idle (shared_worker)."""
    env = {**app_env(payment_provider, live_daphne), "DB_POOL_MAX_SIZE": "4"}
    yield from shared_worker(request, env)


@pytest.fixture(autouse=True)
def fresh_admission_keys() -> None:
    """Rate-limit buckets (tests share 127.0.0.1; allauth's sign-up and login limits too),
    snapshots, gates, queue counters and pending offers are keyed by address, slug or id that
    later tests reuse: every test starts without them."""
    client = redis_lib.Redis.from_url(settings.REDIS_URL)
    keys = [
        key
        for pattern in (
            "fg:rl:*",
            "fg:drop:*",
            "fg:gate:*",
            "fg:queue:*",
            "fg:offer:*",
            "fg:tally:*",
            "fg:*:allauth:rl:*",
        )
        for key in client.scan_iter(pattern, count=1000)
    ]
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture(autouse=True)
def fresh_shop_identity() -> None:
    """The shop's identity is kept per process and in Redis; a test's row goes with its database."""
    from shop import identity

    identity.forget()


@pytest.fixture(autouse=True)
def default_language() -> Iterator[None]:
    """A request's language stays active in the thread after the test Client returns (LocaleMiddleware
    activates it and nothing deactivates it): a German page must not make the next test's money German."""
    yield
    from django.utils import translation

    translation.activate(settings.LANGUAGE_CODE)


@pytest.fixture(autouse=True)
def fresh_content_types() -> None:
    """A transactional test's flush renumbers content types; never reuse the cached ids."""
    from django.contrib.contenttypes.models import ContentType

    ContentType.objects.clear_cache()


@pytest.fixture
def drand_relay(settings) -> Iterator[object]:
    """Queues name quicknet rounds, and the draw reads them from a relay on localhost serving real
    recorded rounds (tests/beacons.py): the in-process draw, as beat's worker would run it."""
    from tests import beacons

    with beacons.relay() as relay:
        settings.DRAW_BEACON = "quicknet"
        settings.DRAW_BEACON_URLS = [relay.url]
        yield relay


@pytest.fixture
def make_buyers():
    """Bulk-create n buyers and return their ids."""

    def make(n: int, prefix: str = "racer") -> list[int]:
        from django.contrib.auth import get_user_model
        from django.contrib.auth.hashers import make_password

        User = get_user_model()
        password = make_password(None)
        users = User.objects.bulk_create(User(username=f"{prefix}{i}", password=password) for i in range(n))
        return [u.pk for u in users]

    return make


# Stripe through localstripe (PyPI, GPL: a test dependency, never imported by the project).
STRIPE_SECRET_KEY = "sk_test_floodgate"
STRIPE_PUBLISHABLE_KEY = "pk_test_floodgate"
STRIPE_WEBHOOK_SECRET = "whsec_floodgate_test"


def start_group(name: str, command: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, Path]:
    """Like start_process, in a process group of its own, so stop_group ends its children too."""
    log = TEST_DATA / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        process = subprocess.Popen(
            command, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    return process, log


def stop_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(15)
    # The leader gone or not, whatever of its group is left goes too (a worker's beat child
    # outlived its killed parent once and ran on after the test).
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@pytest.fixture(scope="session")
def localstripe() -> Iterator[str]:
    """localstripe, a stateful fake Stripe server, as a real process (fresh state: --from-scratch)."""
    port = free_port()
    process, log = start_group(
        f"localstripe-{port}",
        [sys.executable, "-m", "localstripe", "--port", str(port), "--from-scratch"],
        dict(os.environ),
    )
    try:
        wait_for_port(port, process, log)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_group(process)


def stripe_env(localstripe_url: str) -> dict[str, str]:
    return {
        "PAYMENT_PROVIDER": "stripe",
        "STRIPE_SECRET_KEY": STRIPE_SECRET_KEY,
        "STRIPE_PUBLISHABLE_KEY": STRIPE_PUBLISHABLE_KEY,
        "STRIPE_WEBHOOK_SECRET": STRIPE_WEBHOOK_SECRET,
        "STRIPE_API_BASE": localstripe_url,
        "STRIPE_JS_URL": f"{localstripe_url}/js.stripe.com/v3/",
    }


@pytest.fixture(scope="session")
def stripe_daphne(
    django_db_setup: None, django_db_blocker: DjangoDbBlocker, payment_provider: str, localstripe: str
) -> Iterator[str]:
    """A daphne whose buyers pay with Stripe (localstripe); localstripe's webhooks go to it."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**app_env(payment_provider, base), **stripe_env(localstripe), "DB_POOL_MAX_SIZE": "10"}
    process, log = start_group(
        f"stripe-daphne-{port}",
        [
            str(Path(sys.executable).parent / "daphne"),
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "config.asgi:application",
        ],
        env,
    )
    try:
        wait_for_port(port, process, log)
        import httpx

        answer = httpx.post(
            f"{localstripe}/_config/webhooks/floodgate",
            data={"url": f"{base}/checkout/webhooks/stripe", "secret": STRIPE_WEBHOOK_SECRET},
        )
        answer.raise_for_status()
        yield base
    finally:
        stop_group(process)


@pytest.fixture
def stripe_worker(
    transactional_db: None,
    payment_provider: str,
    localstripe: str,
    stripe_daphne: str,
    request: pytest.FixtureRequest,
) -> Iterator[Worker]:
    """A Celery worker that settles with Stripe (localstripe) and the simulator alike (shared_worker)."""
    env = {**app_env(payment_provider, stripe_daphne), **stripe_env(localstripe), "DB_POOL_MAX_SIZE": "4"}
    yield from shared_worker(request, env)


@pytest.fixture
def crowd_server(payment_provider: str) -> Iterator[str]:
    """floodgate-web, the production server (two workers), whose address limit lets one machine's
    crowd through (the whole crowd comes from 127.0.0.1 here): the HTTP crowd tests' server."""
    port = free_port()
    env = {
        **app_env(payment_provider, f"http://127.0.0.1:{port}"),
        "IP_RATE_LIMIT_BURST": "100000",
        "DB_POOL_MAX_SIZE": "8",
    }
    web = str(Path(sys.executable).parent / "floodgate-web")
    process, log = start_process(
        f"crowd-{port}", [web, "--host", "127.0.0.1", "--port", str(port), "--workers", "2"], env
    )
    try:
        wait_for_port(port, process, log)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(process)
