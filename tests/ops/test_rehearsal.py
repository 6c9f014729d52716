"""A merchant's rehearsal (issue 13 §4): a real crowd on a copy of a drop, a report that matches the
database, the real drop untouched; the admin starts it and links the report; garbage is refused."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from pytest_django import Settings

from catalogue.services import NewVariant, zone_from
from checkout.models import Order
from holds.counts import invariant, invariant_by_variant
from holds.models import Hold
from ops.models import RehearsalReport
from shop.models import ApiToken, Drop
from tests.conftest import ROOT, Worker, database_url_for_tests
from tests.factories import make_drop

# servers: the store and the rehearsal crowd as processes
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.servers]


def rehearse(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": database_url_for_tests()}
    command = [sys.executable, "-m", "devtools.rehearse", *args]
    return subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def admin_client() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("owner", "o@example.com", "pw-pw-pw-pw"))
    return client


def test_a_small_rehearsal_report_matches_the_database_and_the_real_drop_is_untouched(
    live_daphne: str, payment_provider: str, celery_worker: Worker, tmp_path: Path
) -> None:
    # given a 10-unit drop of shoes in two sizes, shipped to Germany
    drop = make_drop(
        quantity=10,
        per_buyer_limit=1,
        variants=[NewVariant("41", 4), NewVariant("42", 6)],
        ships=True,
        shipping_zones=[zone_from("Germany:DE:490")],
    )
    before = invariant(drop_id=drop.pk)
    # when 50 buyers rehearse it
    done = rehearse(drop.slug, "--buyers", "50", "--base", live_daphne, "--out", str(tmp_path),
                    "--starts-in", "1", "--max-seconds", "150")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "answers" in done.stdout  # progress on the console
    # then the report's numbers are the database's
    copy = Drop.objects.get(slug=f"{drop.slug}-rehearsal-1")
    summary = json.loads((tmp_path / copy.slug / "summary.json").read_text())
    now = invariant(drop_id=copy.pk)
    assert summary["database"] == {
        "quantity": 10, "available": now.available, "held": now.held, "sold": now.sold, "drift": 0,
        "orders_confirmed": Order.objects.filter(drop=copy, state="confirmed").count(),
        "real_drop_unchanged": True,
    }  # fmt: skip
    assert now.sold == 10 and now.held == 0 and now.available == 0  # every winner paid
    # each named a size (another when theirs was gone) and gave an address before paying
    assert {v.name: v.sold for v in invariant_by_variant(drop_id=copy.pk)} == {"41": 4, "42": 6}
    paid = Order.objects.filter(drop=copy, state="confirmed")
    assert not paid.filter(shipping_address=None).exists() and paid.filter(shipping_minor=490).count() == 10
    assert summary["created_201"] == Hold.objects.filter(drop=copy).count() == 10
    assert summary["by_answer"]["reserve 201"]["count"] == 10
    assert summary["by_answer"]["reserve 409 sold_out"]["count"] >= 40  # the losers asked, and again
    assert summary["invariant_drifts_seen"] == [0] and summary["invariant_samples"] >= 2
    assert summary["sold_out_at_s"] is not None and summary["errors"] == 0
    # the real drop: no hold, no order, same numbers
    assert invariant(drop_id=drop.pk) == before
    assert not Hold.objects.filter(drop=drop).exists() and not Order.objects.filter(drop=drop).exists()
    html = (tmp_path / copy.slug / "report.html").read_text()
    assert (
        html.count("<svg") == 6
        and "sold out" in html
        and "http" not in html.split("<body>")[1].replace(live_daphne, "")
    )  # self-contained: no address but the store's own, shown as a fact
    kept = RehearsalReport.objects.get(drop=drop)  # in the database, for every replica's admin
    assert (kept.html, kept.copy_slug, kept.buyers, kept.summary) == (html, copy.slug, 50, summary)
    assert not (tmp_path / copy.slug / "plan.json").exists()  # bearer tokens not left lying around
    # and its buyers are gone: the ten who held a unit are kept, deactivated, for their orders
    assert "rehearsal over: 50 buyers removed" in done.stdout
    left = get_user_model().objects.filter(rehearsal__drop=copy)
    assert left.count() == 10 and not left.filter(is_active=True).exists()
    assert copy.rehearsal_of_id == drop.pk
    assert not ApiToken.objects.filter(user__rehearsal__drop=copy).exists()


def test_the_admin_action_starts_a_rehearsal_and_the_drop_page_links_its_report(
    live_daphne: str, payment_provider: str, celery_worker: Worker, tmp_path: Path,
    settings: Settings, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    settings.PUBLIC_BASE_URL, settings.REHEARSAL_DIR = live_daphne, tmp_path
    monkeypatch.setenv("DATABASE_URL", database_url_for_tests())
    drop = make_drop(quantity=3)
    client = admin_client()
    page = client.get(f"/admin/shop/drop/{drop.pk}/change/")
    assert "none yet" in page.content.decode()
    # when
    answer = client.post(
        "/admin/shop/drop/", {"action": "rehearse_drop", "_selected_action": [drop.pk], "buyers": "12"},
        follow=True,
    )  # fmt: skip
    assert "started with 12 buyers" in answer.content.decode()
    deadline = time.monotonic() + 180
    while not RehearsalReport.objects.filter(drop=drop).exists():
        assert time.monotonic() < deadline, (tmp_path / f"{drop.slug}.log").read_text()
        time.sleep(0.5)
    # then the drop's page links it; the report is read from the database, not this host's files
    kept = RehearsalReport.objects.get(drop=drop)
    shutil.rmtree(tmp_path, ignore_errors=True)
    shown = client.get(f"/admin/shop/drop/{drop.pk}/change/").content.decode()
    assert f'href="/admin/shop/drop/{drop.pk}/rehearsal/"' in shown
    assert f'href="/admin/shop/drop/{drop.pk}/rehearsal/{kept.pk}/"' in shown and "12 buyers" in shown
    for address in (
        f"/admin/shop/drop/{drop.pk}/rehearsal/",
        f"/admin/shop/drop/{drop.pk}/rehearsal/{kept.pk}/",
    ):
        report = client.get(address)
        assert report.status_code == 200 and report["Content-Type"].startswith("text/html")
        assert f"Rehearsal of {drop.slug}" in report.content.decode()
    other = make_drop(quantity=1)  # another drop's address, a made-up id: nothing to show
    assert client.get(f"/admin/shop/drop/{other.pk}/rehearsal/{kept.pk}/").status_code == 404
    assert client.get(f"/admin/shop/drop/{drop.pk}/rehearsal/{kept.pk + 1000}/").status_code == 404
    # not a report's address at all: the admin's own answer for an unknown page (to its index)
    assert client.get(f"/admin/shop/drop/{drop.pk}/rehearsal/abc/").status_code == 302
    assert invariant(drop_id=Drop.objects.get(slug=f"{drop.slug}-rehearsal-1").pk).sold == 3
    assert not Hold.objects.filter(drop=drop).exists()
    assert Client().get(f"/admin/shop/drop/{drop.pk}/rehearsal/").status_code == 302  # staff only


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["x", "--buyers", "abc"], "invalid int value: 'abc'"),
        (["x", "--buyers", "0"], "--buyers must be between 1 and 20000"),
        (["x", "--base", "ftp://shop"], "--base must be an http(s) URL"),
        (["no-such-drop", "--buyers", "5"], "there is no drop 'no-such-drop'"),
    ],
)
def test_the_command_refuses_garbage_with_a_clear_error(args: list[str], said: str) -> None:
    done = rehearse(*args, timeout=60)
    assert done.returncode != 0 and said in done.stderr, done.stderr
    assert not Drop.objects.filter(slug__contains="rehearsal").exists()


@pytest.mark.parametrize(
    ("buyers", "said"),
    [("abc", "a whole number from 1 to 20000, not 'abc'"),
     ("0", "from 1 to 20000 (REHEARSAL_MAX_BUYERS), not 0"),
     ("99999", "from 1 to 20000 (REHEARSAL_MAX_BUYERS), not 99999")],
)  # fmt: skip
def test_the_admin_action_refuses_garbage_and_starts_nothing(
    buyers: str, said: str, tmp_path: Path, settings: Settings
) -> None:
    settings.REHEARSAL_DIR = tmp_path
    drop = make_drop(quantity=3)
    answer = admin_client().post(
        "/admin/shop/drop/", {"action": "rehearse_drop", "_selected_action": [drop.pk], "buyers": buyers},
        follow=True,
    )  # fmt: skip
    assert f"Not started: Buyers must be {said}" in answer.content.decode().replace("&#x27;", "'")
    assert list(tmp_path.iterdir()) == []


def test_the_admin_action_rehearses_one_drop_at_a_time(tmp_path: Path, settings: Settings) -> None:
    settings.REHEARSAL_DIR = tmp_path
    ids = [make_drop(quantity=3).pk, make_drop(quantity=3).pk]
    answer = admin_client().post(
        "/admin/shop/drop/", {"action": "rehearse_drop", "_selected_action": ids}, follow=True
    )
    assert "Rehearse one drop at a time." in answer.content.decode()
    assert list(tmp_path.iterdir()) == []


def test_a_second_rehearsal_of_a_drop_is_refused_while_one_runs(tmp_path: Path, settings: Settings) -> None:
    settings.REHEARSAL_DIR = tmp_path
    drop = make_drop(quantity=3)
    # given a rehearsal of it running (a process whose command line names devtools.rehearse)
    stand_in = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "devtools.rehearse"])
    (tmp_path / f"{drop.slug}.pid").write_text(str(stand_in.pid))
    try:
        answer = admin_client().post(
            "/admin/shop/drop/",
            {"action": "rehearse_drop", "_selected_action": [drop.pk], "buyers": "5"},
            follow=True,
        )
        page = answer.content.decode()
        assert f"Not started: A rehearsal of {drop.slug} is already running (process {stand_in.pid})." in page
        assert not (tmp_path / f"{drop.slug}.log").exists()
    finally:
        stand_in.kill()
        stand_in.wait()
