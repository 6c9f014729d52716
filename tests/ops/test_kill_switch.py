"""The kill switch: takes effect at the arbiter mid-race, guarded by shop.pause_drop, logged."""

from __future__ import annotations

import threading
import time
import uuid
from io import StringIO

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.core.management import call_command
from django.db import connection, connections
from django.test import Client

from core.errors import FloodgateError
from holds import services as holds
from holds.counts import invariant
from holds.models import Hold
from ops import switch
from shop.models import Drop, PauseAction, PauseEvent
from tests.factories import make_drop, staff

User = get_user_model()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("database_path", ["direct", "pgbouncer"], indirect=True)
def test_pause_mid_race_stops_every_claim_then_resume_lets_them_continue(database_path: str) -> None:
    drop = make_drop(quantity=100_000, buckets=8, per_buyer_limit=1)
    buyers = User.objects.bulk_create(
        User(username=f"p{i}", password=make_password(None)) for i in range(4000)
    )
    stop = threading.Event()
    cursor = iter(buyers)
    lock = threading.Lock()
    outcomes: list[str] = []

    def crowd() -> None:
        try:
            while not stop.is_set():
                with lock:
                    buyer = next(cursor, None)
                if buyer is None:
                    return
                while not stop.is_set():  # a buyer told "paused" tries again, as a person would
                    try:
                        holds.reserve(
                            drop=drop, buyer_id=buyer.pk, quantity=1, idempotency_key=uuid.uuid4().hex
                        )
                        outcomes.append("held")
                    except FloodgateError as error:
                        outcomes.append(error.code)
                        if error.code == "paused":
                            time.sleep(0.02)
                            continue
                    break
        finally:
            connections.close_all()

    threads = [threading.Thread(target=crowd) for _ in range(24)]
    for thread in threads:
        thread.start()
    while Hold.objects.filter(drop=drop).count() < 200:
        time.sleep(0.01)

    # when on-call pauses in the middle of the race
    result = switch.pause_drop(drop=drop, actor_id=None, reason="suspicious traffic")
    with connection.cursor() as cur:
        cur.execute("SELECT clock_timestamp()")
        (returned_at,) = cur.fetchone()
    frozen = Hold.objects.filter(drop=drop).count()
    time.sleep(0.5)  # the crowd keeps trying

    # then not one hold appears after the pause returned
    assert result.changed and result.drained and result.state == "paused"
    assert Hold.objects.filter(drop=drop).count() == frozen
    assert not Hold.objects.filter(drop=drop, created_at__gte=returned_at).exists()
    assert "paused" in outcomes

    # when resumed, the race goes on
    switch.resume_drop(drop=drop, actor_id=None)
    deadline = time.monotonic() + 10
    while Hold.objects.filter(drop=drop).count() <= frozen and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    for thread in threads:
        thread.join()
    assert Hold.objects.filter(drop=drop).count() > frozen
    assert invariant(drop_id=drop.pk).drift == 0
    assert list(PauseEvent.objects.filter(drop=drop).values_list("action", "reason")) == [
        ("resumed", ""),
        ("paused", "suspicious traffic"),
    ]


@pytest.mark.django_db
def test_pause_needs_a_reason_and_pausing_twice_changes_nothing() -> None:
    drop = make_drop(slug="twice")

    with pytest.raises(FloodgateError, match="Say why"):
        switch.pause_drop(drop=drop, actor_id=None, reason="   ")
    first = switch.pause_drop(drop=drop, actor_id=None, reason="one")
    second = switch.pause_drop(drop=drop, actor_id=None, reason="two")

    assert (first.changed, second.changed) == (True, False)
    assert Drop.objects.get(pk=drop.pk).pause_reason == "one"


@pytest.mark.django_db
def test_commands_pause_and_resume() -> None:
    make_drop(slug="cli")
    out = StringIO()

    call_command("pause_drop", "cli", "--reason", "payment provider down", stdout=out)
    assert Drop.objects.get(slug="cli").state == "paused"
    call_command("resume_drop", "cli", stdout=out)

    assert Drop.objects.get(slug="cli").state == "live"
    assert '"state": "paused"' in out.getvalue() and '"state": "live"' in out.getvalue()


@pytest.mark.django_db
def test_admin_buttons_and_posts_follow_the_permission(roles: None) -> None:
    drop = make_drop(slug="guarded")
    merchant, on_call = Client(), Client()
    merchant.force_login(staff("mia", "Merchants"))
    on_call.force_login(staff("otto", "On-call"))
    change_url = f"/admin/shop/drop/{drop.pk}/change/"

    assert b"Pause sale now" not in merchant.get(change_url).content
    assert merchant.post(f"/admin/shop/drop/{drop.pk}/pause/", {"reason": "x"}).status_code == 403
    assert Client().post(f"/admin/shop/drop/{drop.pk}/pause/", {"reason": "x"}).status_code == 302  # to login
    assert Drop.objects.get(pk=drop.pk).paused is False

    assert b"Pause sale now" in on_call.get("/admin/shop/drop/dashboard/").content
    answer = on_call.post(f"/admin/shop/drop/{drop.pk}/pause/", {"reason": "bot wave"})
    assert answer.status_code == 302
    assert Drop.objects.get(pk=drop.pk).paused is True
    entry = LogEntry.objects.get(object_id=str(drop.pk))
    assert entry.user.username == "otto" and entry.change_message == "Paused: bot wave"
    assert b"Resume sale" in on_call.get(change_url).content


@pytest.mark.django_db
def test_ops_api_refuses_without_the_permission(roles: None) -> None:
    make_drop(slug="api-guarded")
    merchant, on_call = Client(), Client()
    merchant.force_login(staff("max", "Merchants"))
    on_call.force_login(staff("ola", "On-call"))
    url = "/api/ops/drops/api-guarded/pause"

    anonymous = Client().post(url, '{"reason": "x"}', content_type="application/json")
    refused = merchant.post(url, '{"reason": "x"}', content_type="application/json")
    garbage = on_call.post(url, '{"reason": 5}', content_type="application/json")
    nul = on_call.post(url, '{"reason": "a\\u0000b"}', content_type="application/json")
    deep = on_call.post(url, "[" * 5000 + "]" * 5000, content_type="application/json")
    paused = on_call.post(url, '{"reason": "fraud"}', content_type="application/json")
    resumed = on_call.post("/api/ops/drops/api-guarded/resume", "{}", content_type="application/json")

    assert (anonymous.status_code, anonymous.json()["error"]) == (401, "unauthenticated")
    assert (refused.status_code, refused.json()["error"]) == (403, "forbidden")
    assert (garbage.status_code, garbage.json()["error"]) == (422, "invalid")
    assert (nul.status_code, nul.json()["error"]) == (422, "invalid")  # PostgreSQL takes no NUL
    assert (deep.status_code, deep.json()["error"]) == (422, "invalid")
    paused_for = PauseEvent.objects.filter(action=PauseAction.PAUSED).values_list("reason", flat=True)
    assert list(paused_for) == ["fraud"]
    assert (paused.status_code, paused.json()["state"]) == (200, "paused")
    assert (resumed.status_code, resumed.json()["state"]) == (200, "live")
    invariant_answer = merchant.get("/api/ops/drops/api-guarded/invariant")
    assert invariant_answer.status_code == 200 and invariant_answer.json()["drift"] == 0
    assert Client().get("/api/ops/drops/api-guarded/invariant").status_code == 401
    buyer = Client()
    buyer.force_login(User.objects.create_user(username="plain", password="pw-pw-pw-pw"))
    assert buyer.get("/api/ops/drops/api-guarded/invariant").status_code == 403


@pytest.mark.django_db
def test_watchdog_pauses_a_drifting_drop_and_the_dashboard_shows_it_red(roles: None) -> None:
    healthy = make_drop(slug="healthy", quantity=10, buckets=2)
    broken = make_drop(slug="broken", quantity=10, buckets=2)
    with connection.cursor() as cur:  # a unit vanishes behind the app's back
        cur.execute(
            "UPDATE inventory_stockbucket SET available = available - 1 WHERE drop_id = %s AND index = 0",
            [broken.pk],
        )

    assert switch.watch_invariants() == 1

    assert Drop.objects.get(pk=broken.pk).state == "paused"
    assert Drop.objects.get(pk=broken.pk).pause_reason == "invariant drift"
    assert Drop.objects.get(pk=healthy.pk).state == "live"
    on_call = Client()
    on_call.force_login(staff("nia", "On-call"))
    data = on_call.get("/admin/shop/drop/dashboard/data/").json()
    panels = {d["slug"]: d for d in data["drops"]}
    assert panels["broken"]["drift"] == 1 and panels["broken"]["state"] == "paused"
    for slug, drop in [("healthy", healthy), ("broken", broken)]:
        assert {k: panels[slug][k] for k in invariant(drop_id=drop.pk).as_json()} == invariant(
            drop_id=drop.pk
        ).as_json()
    page = on_call.get("/admin/shop/drop/dashboard/").content.decode()
    assert 'class="fg-card drift" data-drop="broken"' in page
    assert data["payments_needing_attention"] == 0
    assert PauseEvent.objects.get(drop=broken).actor is None
