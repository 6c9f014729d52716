"""A rehearsal is a rehearsal everywhere (issue 23 §1): its copy is hidden from real buyers on every
door (catalogue, page, API, the lane's batch and chosen-seat claims, Django's path, the waiting
room), its buyers buy nothing real, it pays with the simulator, and its buyers go when it ends,
whichever way it ends. Its own permission and a production setting with a buyer cap let it run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client, override_settings
from django.utils import timezone
from pytest_django import Settings

from admission import state
from checkout import services as checkout
from checkout.models import Payment, PaymentState
from core.errors import InvalidInput
from holds import services as holds
from holds.models import Hold
from ops import rehearsal
from shop.models import ApiToken, Drop, RehearsalBuyer
from tests.conftest import PROVIDER_SECRET, ROOT, WEBHOOK_SECRET, database_url_for_tests
from tests.factories import make_buyer, make_drop, merchant
from tests.harness import BODY, Reply, bearer, call, reserve_headers, run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_edge")]

User = get_user_model()


def rehearsed(drop: Drop, buyers: int = 3, starts_in: float = 0) -> tuple[Drop, list[str]]:
    """A running rehearsal's copy of the drop (no crowd), and its buyers' bearer tokens."""
    copy, made = rehearsal.begin(
        drop=drop, buyers=buyers, starts_in=timedelta(seconds=starts_in), lasts=timedelta(minutes=5)
    )
    return copy, [b.token for b in made]


def as_bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def claim(slug: str, auth: dict[str, str], body: bytes = BODY, key: str = "k1") -> Reply:
    headers = reserve_headers(auth, key)
    return run(lambda: call("POST", f"/api/drops/{slug}/holds", headers=headers, body=body))


def answer(reply: Reply) -> tuple[int, str]:
    return reply.status, reply.json()["error"] if reply.status >= 400 else ""


def test_a_running_rehearsal_is_hidden_from_real_buyers_and_open_to_its_own() -> None:
    drop = make_drop(quantity=5, per_buyer_limit=1)
    copy, tokens = rehearsed(drop)
    state.refresh([copy.pk, drop.pk])  # the edge has the copy's snapshot: it must not show it
    real = bearer("rita")
    own = as_bearer(tokens[0])

    # the catalogue, the page and the API: the copy is not there for a real buyer or a visitor
    listed = [d["slug"] for d in Client().get("/api/drops").json()["drops"]]
    assert drop.slug in listed and copy.slug not in listed
    assert copy.slug not in Client().get("/").content.decode()
    outsider = Client()
    outsider.force_login(User.objects.get(username="rita"))
    assert outsider.get(f"/drops/{copy.slug}/").status_code == 404
    assert Client().get(f"/drops/{copy.slug}/").status_code == 404
    seen = run(lambda: call("GET", f"/api/drops/{copy.slug}", headers=real))
    assert (seen.status, seen.edge) == (404, False), seen.body
    # ... and a claim is refused as for a drop that does not exist
    refused = claim(copy.slug, real)
    assert answer(refused) == (404, "not_found") and copy.slug in refused.json()["detail"]

    # its own buyer sees it and claims from it; that buyer claims nothing real
    assert run(lambda: call("GET", f"/api/drops/{copy.slug}", headers=own)).status == 200
    assert claim(copy.slug, own).status == 201
    elsewhere = claim(drop.slug, own, key="k2")
    assert answer(elsewhere) == (403, "forbidden") and "rehearsal" in elsewhere.json()["detail"]

    assert Hold.objects.filter(drop=copy).count() == 1 and not Hold.objects.filter(drop=drop).exists()


@pytest.mark.parametrize("door", ["seat", "django"])
def test_the_chosen_seat_claim_and_djangos_path_refuse_an_outsider_too(door: str) -> None:
    """The lane's batch is one door; the single claim (every chosen seat) and Django's own path
    (a drop with a Redis gate) are the others. Each statement checks the buyer itself."""
    seats = door == "seat"
    drop = make_drop(quantity=4, mode="units" if seats else "buckets", redis_gate=not seats,
                     unit_labels=["A1", "A2", "A3", "A4"] if seats else None)  # fmt: skip
    copy, tokens = rehearsed(drop)
    body = json.dumps({"quantity": 1, "unit": "A1"} if seats else {"quantity": 1}).encode()

    refused = claim(copy.slug, bearer("otto"), body)
    taken = claim(copy.slug, as_bearer(tokens[0]), body)
    forbidden = claim(drop.slug, as_bearer(tokens[1]), body, key="k2")

    assert answer(refused) == (404, "not_found"), refused.body
    assert taken.status == 201, taken.body
    assert answer(forbidden) == (403, "forbidden"), forbidden.body
    assert Hold.objects.filter(drop=copy).count() == 1 and not Hold.objects.filter(drop=drop).exists()


def test_a_real_buyer_gets_no_place_in_a_rehearsals_waiting_room() -> None:
    drop = make_drop(quantity=5, waiting_room=True, starts_at=timezone.now() + timedelta(minutes=5))
    copy, tokens = rehearsed(drop, starts_in=300)

    def join(auth: dict[str, str], slug: str) -> Reply:
        return run(lambda: call("POST", f"/api/drops/{slug}/queue", headers=auth, body=b""))

    outsider, own = join(bearer("wendy"), copy.slug), join(as_bearer(tokens[0]), copy.slug)
    elsewhere = join(as_bearer(tokens[1]), drop.slug)

    assert answer(outsider) == (404, "not_found"), outsider.body
    assert own.status == 200 and own.json()["queue_ticket"], own.body
    assert answer(elsewhere) == (403, "forbidden"), elsewhere.body
    assert list(copy.tickets.values_list("buyer__rehearsal__drop", flat=True)) == [copy.pk]
    assert not drop.tickets.exists()
    # its line's pages and the draw's JSON are not there for anyone else either
    wendy = Client()
    wendy.force_login(User.objects.get(username="wendy"))
    for path in (f"/drops/{copy.slug}/queue/", f"/drops/{copy.slug}/queue/verify",
                 f"/api/drops/{copy.slug}/queue/draw", f"/api/drops/{copy.slug}/queue"):  # fmt: skip
        assert wendy.get(path).status_code == 404, path
    assert Client().get(f"/drops/{copy.slug}/queue/verify").status_code == 404  # a visitor
    assert Client().get(f"/api/drops/{copy.slug}/queue/draw").status_code == 404


def test_a_rehearsal_pays_with_the_simulator_whatever_the_shop_takes_money_with(
    payment_provider: str, settings: Settings
) -> None:
    settings.PAYMENT_PROVIDER_URL = payment_provider
    settings.PAYMENT_PROVIDER_SECRET, settings.PAYMENT_WEBHOOK_SECRET = PROVIDER_SECRET, WEBHOOK_SECRET
    drop = make_drop(quantity=5)
    copy, _ = rehearsed(drop)
    made_up = RehearsalBuyer.objects.filter(drop=copy).values_list("user_id", flat=True)[0]
    real_buyer = make_buyer()
    rehearsal_hold = holds.reserve(drop=copy, buyer_id=made_up, quantity=1, idempotency_key="k").hold
    real_hold = holds.reserve(drop=drop, buyer_id=real_buyer.pk, quantity=1, idempotency_key="k").hold

    with override_settings(PAYMENT_PROVIDER="adyen"):  # a provider this shop has no adapter for here
        started = checkout.start_payment(hold_id=rehearsal_hold.pk, buyer_id=made_up)
        with pytest.raises(KeyError, match="unknown payment provider 'adyen'"):
            checkout.start_payment(hold_id=real_hold.pk, buyer_id=real_buyer.pk)

    assert started.payment.provider == "simulated"
    assert Payment.objects.get(pk=started.payment.pk).state == PaymentState.PENDING  # the simulator opened it


def test_ending_a_rehearsal_removes_its_buyers_and_their_tokens() -> None:
    drop = make_drop(quantity=5, per_buyer_limit=1)
    copy, tokens = rehearsed(drop, buyers=5)
    assert claim(copy.slug, as_bearer(tokens[0])).status == 201  # part of the copy's record

    removed = rehearsal.end(copy=copy)

    copy.refresh_from_db()
    assert removed == 5 and copy.ends_at <= timezone.now()
    kept = User.objects.filter(rehearsal__drop=copy)
    assert [(u.is_active, u.has_usable_password(), u.email) for u in kept] == [(False, False, "")]
    assert not ApiToken.objects.filter(user__rehearsal__drop=copy).exists()
    assert not User.objects.filter(username__startswith=f"rehearsal-{drop.pk}-", is_active=True).exists()
    assert User.objects.filter(username__startswith=f"rehearsal-{drop.pk}-").count() == 1
    # every token is refused from now on, by the lane too (which had the first one cached)
    for token in tokens[:2]:
        gone = claim(copy.slug, as_bearer(token), key="k9")
        assert answer(gone) == (401, "unauthenticated"), gone.body
    assert rehearsal.end(copy=copy) == 0  # twice is once


def test_a_killed_rehearsals_buyers_go_when_its_time_is_up_and_a_running_ones_stay() -> None:
    drop = make_drop(quantity=5)
    killed, _ = rehearsed(drop, buyers=4)
    running, _ = rehearsed(drop, buyers=2)
    Drop.objects.filter(pk=killed.pk).update(  # its process died; its sale ran out since
        starts_at=timezone.now() - timedelta(minutes=10), ends_at=timezone.now() - timedelta(seconds=1)
    )

    assert rehearsal.end_overdue() == 1
    assert not RehearsalBuyer.objects.filter(drop=killed).exists()
    assert RehearsalBuyer.objects.filter(drop=running, user__is_active=True).count() == 2
    assert rehearsal.end_overdue() == 0


def test_a_rehearsal_process_stopped_midway_removes_its_buyers(live_daphne: str, tmp_path: Path) -> None:
    drop = make_drop(quantity=5)
    env = {**os.environ, "DATABASE_URL": database_url_for_tests()}
    command = [sys.executable, "-m", "devtools.rehearse", drop.slug, "--buyers", "20", "--base", live_daphne,
               "--out", str(tmp_path), "--starts-in", "120", "--max-seconds", "300"]  # fmt: skip
    process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / f"{drop.slug}-rehearsal-1" / "plan.json").exists():  # the crowd is on
            assert process.poll() is None, process.communicate()[0].decode()
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert RehearsalBuyer.objects.filter(drop__slug=f"{drop.slug}-rehearsal-1").count() == 20
        process.send_signal(signal.SIGTERM)
        out = process.communicate(timeout=30)[0].decode()
    finally:
        process.kill()
    copy = Drop.objects.get(slug=f"{drop.slug}-rehearsal-1")
    assert "rehearsal over: 20 buyers removed" in out, out
    assert not User.objects.filter(rehearsal__drop=copy).exists()
    assert copy.ends_at <= timezone.now()
    assert not (tmp_path / copy.slug / "plan.json").exists()


def post_rehearse(client: Client, drop: Drop, buyers: str) -> str:
    page = client.post(
        "/admin/shop/drop/", {"action": "rehearse_drop", "_selected_action": [drop.pk], "buyers": buyers},
        follow=True,
    )  # fmt: skip
    return page.content.decode().replace("&#x27;", "'")


def test_rehearsing_takes_its_own_permission_not_add_drop(
    roles: None, tmp_path: Path, settings: Settings
) -> None:
    settings.REHEARSAL_DIR = tmp_path
    drop = make_drop(quantity=3)
    client = merchant()  # adds, changes and views drops

    assert "rehearse_drop" not in client.get("/admin/shop/drop/").content.decode()
    assert "Rehearsal of" not in post_rehearse(client, drop, "5")
    assert list(tmp_path.iterdir()) == []  # nothing started

    User.objects.get(username="mira").user_permissions.add(Permission.objects.get(codename="rehearse_drop"))
    assert "rehearse_drop" in client.get("/admin/shop/drop/").content.decode()


@pytest.mark.parametrize(
    ("cap", "buyers", "said"),
    [(0, "5", "Rehearsals are off on this shop: set REHEARSAL_MAX_BUYERS"),
     (10, "11", "Buyers must be from 1 to 10 (REHEARSAL_MAX_BUYERS), not 11.")],
)  # fmt: skip
def test_the_buyer_cap_is_a_setting_and_zero_turns_rehearsals_off(
    cap: int, buyers: str, said: str, tmp_path: Path, settings: Settings
) -> None:
    settings.REHEARSAL_DIR, settings.REHEARSAL_MAX_BUYERS = tmp_path, cap
    drop = make_drop(quantity=3)
    client = Client()
    client.force_login(User.objects.create_superuser("owner", "o@example.com", "pw-pw-pw-pw"))

    assert f"Not started: {said}" in post_rehearse(client, drop, buyers)
    assert list(tmp_path.iterdir()) == [] and not Drop.objects.filter(rehearsal_of=drop).exists()


def test_a_copy_of_a_copy_is_refused() -> None:
    copy, _ = rehearsed(make_drop(quantity=3), buyers=1)
    with pytest.raises(InvalidInput, match="itself a rehearsal's copy"):
        rehearsal.begin(drop=copy, buyers=1, starts_in=timedelta(0), lasts=timedelta(minutes=1))
