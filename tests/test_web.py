"""`floodgate-web`, the production server: the real console script, two workers, started from
outside the checkout, answering Django, the edge and the waiting room's WebSocket."""

from __future__ import annotations

import asyncio
import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pytest_django import DjangoDbBlocker
from websockets.sync.client import connect
from websockets.typing import Origin

from admission import services, state
from devtools.ports import free_port
from holds.services import reserve
from shop.models import ApiToken
from tests.admission import test_ws as ws
from tests.conftest import TEST_DATA, app_env, stop, wait_for_port
from tests.factories import make_buyer, make_drop

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.servers]  # servers: the real web server

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(sys.executable).parent / "floodgate-web"


def children(pid: int) -> list[int]:
    """Processes under the server's parent: granian forks one per worker and nothing else."""
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return sorted(int(p) for p in found)


@pytest.fixture(scope="module")
def web(django_db_setup: None, django_db_blocker: DjangoDbBlocker) -> Iterator[tuple[str, subprocess.Popen]]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    # The provider is never called here; its address only has to be valid.
    env = {**app_env("http://127.0.0.1:9", base), "DB_POOL_MAX_SIZE": "4"}
    log = TEST_DATA / f"floodgate-web-{port}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        # cwd "/": the console script must import the project from its install, not the cwd.
        process = subprocess.Popen(
            [str(SCRIPT), "--host", "127.0.0.1", "--port", str(port), "--workers", "2"],
            env=env,
            cwd="/",
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    wait_for_port(port, process, log)
    yield base, process
    stop(process)


def test_the_console_script_is_installed_and_defaults_to_one_worker_per_core(tmp_path: Path) -> None:
    from config.web import cores, parse

    mine = len(os.sched_getaffinity(0))
    quota = tmp_path / "cpu.max"

    assert SCRIPT.exists()
    assert parse([]).workers == cores()
    assert parse(["--workers", "3", "--port", "9000"]).workers == 3
    assert cores(tmp_path / "no-cgroup") == mine
    quota.write_text("max 100000\n")
    assert cores(quota) == mine
    quota.write_text("50000 100000\n")  # half a core: still one worker
    assert cores(quota) == 1
    quota.write_text(f"{100000 * (mine + 4)} 100000\n")  # a quota above the CPU set
    assert cores(quota) == mine


def test_garbage_flags_are_refused_and_the_connection_limit_follows_the_open_file_limit() -> None:
    from config.web import CONNECTIONS, open_files, parse

    assert parse([]).connections == CONNECTIONS
    for bad in (["--workers", "0"], ["--connections", "0"], ["--connections", "many"]):
        with pytest.raises(SystemExit):
            parse(bad)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        assert open_files(100) == 100  # a limit already high enough is left alone
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == soft
        if hard != resource.RLIM_INFINITY:  # more than the hard limit: what it allows, less spare files
            assert open_files(hard + 10_000) == hard - 256
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


OPEN = 1_300  # more than granian's default lets two workers accept (its backlog over them: 1,024)


def answered_on_open_connections(port: int, slug: str, n: int, *, wait: float) -> int:
    """n connections opened at once, as a crowd's browsers keep theirs, then one request on each:
    how many were answered within `wait` seconds."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4 * n)), hard))

    async def crowd() -> list[bool]:
        opened = [await asyncio.open_connection("127.0.0.1", port) for _ in range(n)]

        async def ask(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
            writer.write(f"GET /api/drops/{slug} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            await writer.drain()
            try:
                return (await asyncio.wait_for(reader.readline(), wait)).startswith(b"HTTP/1.1 200")
            except TimeoutError:
                return False

        try:
            return await asyncio.gather(*(ask(r, w) for r, w in opened))
        finally:  # kept open until every one is answered or given up on, as a crowd keeps them
            for _, writer in opened:
                writer.close()

    try:
        return sum(asyncio.run(crowd()))
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_every_open_keep_alive_connection_is_read_not_only_granians_default_share(
    web: tuple[str, subprocess.Popen],
) -> None:
    """On granian's default two workers read 1,024 connections; the 1,025th was never read."""
    base, _ = web
    state.refresh([make_drop(slug="web-crowd", quantity=5).pk])

    answered = answered_on_open_connections(int(base.rsplit(":", 1)[1]), "web-crowd", OPEN, wait=20)

    assert answered == OPEN, f"{OPEN - answered} of {OPEN} open connections never answered"


def test_control_a_worker_reads_no_more_connections_than_its_limit() -> None:
    """The same count on a server told to hold 100 connections: the rest are left unread."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    state.refresh([make_drop(slug="web-capped", quantity=5).pk])
    log = TEST_DATA / f"floodgate-web-{port}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [str(SCRIPT), "--host", "127.0.0.1", "--port", str(port), "--workers", "1", "--connections=100"],
            env={**app_env("http://127.0.0.1:9", base), "DB_POOL_MAX_SIZE": "2"},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_port(port, process, log)
        assert httpx.get(f"{base}/api/drops/web-capped", timeout=10).status_code == 200  # warm
        answered = answered_on_open_connections(port, "web-capped", 150, wait=3)
    finally:
        stop(process)
    assert answered == 100


def test_two_workers_answer_django_the_edge_and_the_websocket(web: tuple[str, subprocess.Popen]) -> None:
    base, process = web
    gone = make_drop(slug="web-gone", quantity=1, per_buyer_limit=1)
    reserve(drop=gone, buyer_id=make_buyer("first").pk, quantity=1, idempotency_key="k")
    line = make_drop(slug="web-line", quantity=5, waiting_room=True, admission_percent=100)
    services.run_wave(line)
    state.refresh([gone.pk, line.pk])
    buyer = make_buyer("late")
    ApiToken.objects.create(user=buyer, digest=ApiToken.digest_of("token-late"))
    reserve_headers = {"Authorization": "Bearer token-late", "Idempotency-Key": "late-1"}

    # Several requests each, on fresh connections, so both workers answer some.
    with httpx.Client(base_url=base, timeout=10, headers={"Connection": "close"}) as client:
        healthz = [client.get("/healthz") for _ in range(6)]
        states = [client.get("/api/drops/web-gone") for _ in range(6)]
        refusals = [
            client.post("/api/drops/web-gone/holds", json={"quantity": 1}, headers=reserve_headers)
            for _ in range(6)
        ]

    assert len(children(process.pid)) == 2
    # Django's answer (the edge does not look at /healthz)
    assert all(r.status_code == 200 and r.text == "ok" for r in healthz)
    assert not any("x-floodgate-edge" in r.headers for r in healthz)
    # the edge's answers, from the published snapshot
    assert all(r.status_code == 200 and r.headers.get("x-floodgate-edge") == "hit" for r in states)
    assert {(r.json()["slug"], r.json()["remaining"]) for r in states} == {("web-gone", 0)}
    assert all(r.status_code == 409 and r.headers.get("x-floodgate-edge") == "hit" for r in refusals)
    assert {r.json()["error"] for r in refusals} == {"sold_out"}

    # the waiting room's socket: the handshake (origin checked) and the current state at once
    url = base.replace("http://", "ws://") + "/ws/drops/web-line/queue/"
    for _ in range(4):
        with connect(url, origin=Origin(base), open_timeout=10) as socket:
            first = json.loads(socket.recv(timeout=10))
        assert (first["admitted_through"], first["state"], first["remaining"]) == (0, "admitting", 5)
    assert process.poll() is None


def test_a_websocket_from_another_origin_is_refused(web: tuple[str, subprocess.Popen]) -> None:
    from websockets.exceptions import InvalidStatus

    base, _ = web
    make_drop(slug="web-origin", quantity=5, waiting_room=True)
    url = base.replace("http://", "ws://") + "/ws/drops/web-origin/queue/"
    with pytest.raises(InvalidStatus) as refused:
        connect(url, origin=Origin("http://evil.example"), open_timeout=10)
    assert refused.value.response.status_code == 403


def test_a_worker_that_dies_is_replaced(web: tuple[str, subprocess.Popen]) -> None:
    base, process = web
    before = children(process.pid)
    assert len(before) == 2

    os.kill(before[0], signal.SIGKILL)
    deadline = time.monotonic() + 30
    while (now := children(process.pid)) == before or len(now) < 2:
        assert time.monotonic() < deadline, f"workers {before} -> {now}"
        time.sleep(0.2)

    assert before[0] not in now and before[1] in now
    with httpx.Client(base_url=base, timeout=10, headers={"Connection": "close"}) as client:
        assert all(client.get("/healthz").status_code == 200 for _ in range(6))


# The waiting room's WebSocket tests once more, served by floodgate-web's two workers instead of
# one daphne: a wave is one PUBLISH each worker hears, and every socket on either must get it.
@pytest.fixture
def live_daphne(web: tuple[str, subprocess.Popen]) -> str:
    """test_ws's name for the server under test; here it is floodgate-web."""
    return web[0]


test_ws_every_client_hears_every_wave = ws.test_every_waiting_client_hears_every_wave_in_order
test_ws_position_reaches_zero = ws.test_a_buyer_whose_position_reaches_zero_gets_a_token_from_the_api
test_ws_comes_back = ws.test_a_client_that_comes_back_gets_the_current_mark_at_once
test_ws_idle_socket = ws.test_a_client_waiting_longer_than_the_redis_read_timeout_still_hears_the_wave
test_ws_closed_with_4404 = ws.test_a_socket_for_no_waiting_room_is_closed_with_4404
test_ws_ping_and_garbage = ws.test_a_ping_gets_a_pong_and_garbage_gets_told_then_closed
test_ws_pause_and_resume = ws.test_waiting_clients_hear_a_pause_and_the_resume_at_once


def test_a_revoked_token_and_a_ban_hold_at_once_in_every_worker(web: tuple[str, subprocess.Popen]) -> None:
    """Both workers have looked the buyer's token up (the lane trusts a lookup for 30 s) and the
    edge answers their queue polls from the ticket; a revocation in this process reaches both."""
    from django.contrib.auth import get_user_model

    from accounts.services import revoke_token
    from catalogue import services as catalogue
    from sale.who import AUTH_SECONDS

    base, _ = web
    make_drop(slug="web-ban", quantity=40)
    seats = make_drop(slug="web-ban-seats", quantity=4, mode="units")
    line = make_drop(slug="web-ban-line", quantity=5, waiting_room=True, admission_percent=100)
    buyer = make_buyer("banned")
    raw = catalogue.issue_api_token(user_id=buyer.pk)
    auth = {"Authorization": f"Bearer {raw}"}
    keys = iter(range(10_000))

    def claims(client: httpx.Client, slug: str = "web-ban", body: dict | None = None) -> list[int]:
        sent = [
            client.post(
                f"/api/drops/{slug}/holds",
                json=body or {"quantity": 1},
                headers={**auth, "Idempotency-Key": f"ban-{next(keys)}"},
            )
            for _ in range(6)
        ]
        return [r.status_code for r in sent]

    with httpx.Client(base_url=base, timeout=10, headers={"Connection": "close"}) as client:
        joined = client.post("/api/drops/web-ban-line/queue", headers=auth)
        services.run_wave(line)
        state.refresh([line.pk])
        ticket = {**auth, "X-Queue-Ticket": joined.json()["queue_ticket"]}
        before = [client.get("/api/drops/web-ban-line/queue", headers=ticket) for _ in range(6)]
        warm = claims(client)  # a hold, then "you hold one already": each worker has the token cached

        revoke_token(user_id=buyer.pk)
        revoked_at = time.monotonic()
        while (refused := claims(client)) != [401] * 6 and time.monotonic() - revoked_at < AUTH_SECONDS:
            time.sleep(0.1)
        took = time.monotonic() - revoked_at
        polls = [client.get("/api/drops/web-ban-line/queue", headers=ticket) for _ in range(6)]

        # a new token, then a ban: the chosen seat is refused too, and so is every claim
        raw = catalogue.issue_api_token(user_id=buyer.pk)
        auth = {"Authorization": f"Bearer {raw}"}
        rewarmed = claims(client)
        user = get_user_model().objects.get(pk=buyer.pk)
        user.is_active = False
        user.save()
        banned_at = time.monotonic()
        while (after_ban := claims(client)) != [401] * 6 and time.monotonic() - banned_at < AUTH_SECONDS:
            time.sleep(0.1)
        ban_took = time.monotonic() - banned_at
        seat = claims(client, seats.slug, {"quantity": 1, "unit": "2"})

    assert joined.status_code == 200, joined.text
    assert warm[0] == 201 and 401 not in warm and 401 not in rewarmed, (warm, rewarmed)
    assert all(r.status_code == 200 and r.headers.get("x-floodgate-edge") == "hit" for r in before)
    assert all(r.json().get("admission_token") for r in before)
    # long before a cached lookup would have run out (the lane trusts one for AUTH_SECONDS): every
    # worker heard it through Redis, not by its cache ageing
    assert refused == [401] * 6 and took < AUTH_SECONDS / 2, (refused, took)
    assert after_ban == [401] * 6 and ban_took < AUTH_SECONDS / 2, (after_ban, ban_took)
    assert seat == [401] * 6
    # the old ticket is Django's to answer now: no admission token for a revoked credential
    assert all(r.status_code == 401 and "x-floodgate-edge" not in r.headers for r in polls), [
        (r.status_code, dict(r.headers)) for r in polls
    ]


CSRF_FIELD = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def log_in(base: str, username: str) -> dict[str, str]:
    """Log in through the server's own login page; the cookies a browser then holds."""
    with httpx.Client(base_url=base, timeout=10, headers={"Connection": "close"}) as client:
        page = client.get("/accounts/login/")
        form = {"username": username, "password": "correct horse battery"}
        form["csrfmiddlewaretoken"] = CSRF_FIELD.findall(page.text)[0]
        done = client.post("/accounts/login/", data=form)
        assert done.status_code == 302, done.text
        return dict(client.cookies)


def test_after_logout_the_old_session_and_its_ticket_get_no_admission_from_any_worker(
    web: tuple[str, subprocess.Popen],
) -> None:
    """The edge answers a queue poll from a ticket bound to the session cookie, and the lane trusts a
    session it looked up for SESSION_SECONDS; neither asks whether the session still exists. A logout
    (through the server's own page) reaches both workers at once."""
    from sale.who import SESSION_SECONDS

    base, _ = web
    line = make_drop(slug="web-out-line", quantity=5, waiting_room=True, admission_percent=100)
    make_drop(slug="web-out", quantity=40)
    make_buyer("leaving")
    make_buyer("staying")
    held = {name: log_in(base, name) for name in ("leaving", "staying")}
    keys = iter(range(10_000))

    def headers(name: str, **extra: str) -> dict[str, str]:
        cookie = "; ".join(f"{k}={v}" for k, v in held[name].items())
        return {"Cookie": cookie, "X-CSRFToken": held[name]["csrftoken"], "Connection": "close", **extra}

    def polls(name: str, ticket: str) -> list[httpx.Response]:
        # httpx.get: no cookie jar, so the old cookie is sent as a browser that kept it would
        url = f"{base}/api/drops/web-out-line/queue"
        return [httpx.get(url, headers=headers(name, **{"X-Queue-Ticket": ticket})) for _ in range(6)]

    def claims(name: str) -> list[int]:
        sent = [
            httpx.post(
                f"{base}/api/drops/web-out/holds",
                json={"quantity": 1},
                headers=headers(name, **{"Idempotency-Key": f"out-{next(keys)}"}),
            )
            for _ in range(6)
        ]
        return [r.status_code for r in sent]

    tickets = {}
    for name in held:
        joined = httpx.post(f"{base}/api/drops/web-out-line/queue", headers=headers(name))
        assert joined.status_code == 200, joined.text
        tickets[name] = joined.json()["queue_ticket"]
    services.run_wave(line)
    state.refresh([line.pk])
    before = polls("leaving", tickets["leaving"])
    warm = claims("leaving")  # a hold, then "you hold one already": each worker has the session cached

    with httpx.Client(base_url=base, timeout=10, cookies=held["leaving"]) as browser:
        form = {"csrfmiddlewaretoken": CSRF_FIELD.findall(browser.get("/accounts/logout/").text)[0]}
        out = browser.post("/accounts/logout/", data=form)
    logged_out_at = time.monotonic()
    while (refused := claims("leaving")) != [401] * 6 and time.monotonic() - logged_out_at < SESSION_SECONDS:
        time.sleep(0.1)
    took = time.monotonic() - logged_out_at
    after = polls("leaving", tickets["leaving"])
    still_in = polls("staying", tickets["staying"])

    assert all(r.status_code == 200 and r.headers.get("x-floodgate-edge") == "hit" for r in before)
    assert all(r.json().get("admission_token") for r in before)
    assert warm[0] == 201 and 401 not in warm, warm
    assert out.status_code == 302
    # the old ticket and cookie are Django's to answer now, and Django finds no session
    assert [(r.status_code, r.headers.get("x-floodgate-edge")) for r in after] == [(401, None)] * 6
    assert not any("admission_token" in r.text for r in after)
    # the lane forgot the session at once in both workers, not when its cache ran out
    assert refused == [401] * 6 and took < SESSION_SECONDS / 2, (refused, took)
    # control: the buyer who stayed is still answered at the edge, with a token
    assert all(r.headers.get("x-floodgate-edge") == "hit" and r.json()["admission_token"] for r in still_in)


def test_control_characters_in_a_path_are_404_through_the_real_server(
    web: tuple[str, subprocess.Popen],
) -> None:
    """As granian decodes the path (tests/core/test_paths.py drives every route in-process)."""
    base, _ = web
    make_drop(slug="web-paths", quantity=3)
    sent = [
        ("GET", "/checkout/stripe/%00"),
        ("GET", "/checkout/stripe/%1b/card"),
        ("GET", "/admin/shop/drop/%00/change/"),
        ("GET", "/media/%00.png"),
        ("GET", "/api/drops/%00"),
        ("POST", "/api/drops/%00/holds"),
        ("POST", "/api/drops/web-paths%7f/queue"),
        ("GET", "/api/holds/%00"),
    ]
    make_buyer("paths")
    cookies = log_in(base, "paths")  # signed in: the views' lookups run, not a redirect to the login
    with httpx.Client(base_url=base, timeout=10, headers={"Connection": "close"}, cookies=cookies) as client:
        found = {f"{method} {path}": client.request(method, path).status_code for method, path in sent}

    assert found == {f"{method} {path}": 404 for method, path in sent}
