"""The shipped alerting rules: valid for Prometheus, firing when they should, on metrics that exist.

promtool is Debian's (`floodgate.py test` installs the `prometheus` package for it).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from django.test import Client, override_settings
from django.utils import timezone

from admission import drawing
from admission.models import Queue
from tests.factories import make_drop

pytestmark = pytest.mark.servers  # Debian's promtool and the store

RULES = Path(__file__).resolve().parent.parent / "deploy" / "prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def promtool(*args: str, cwd: Path = RULES) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_promtool_accepts_the_rules() -> None:
    checked = promtool("check", "rules", "alerts.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 12 rules found" in checked.stdout


def test_each_alert_fires_when_it_should_and_not_on_a_healthy_shop() -> None:
    tested = promtool("test", "rules", "alerts_test.yml")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    rules = yaml.safe_load((RULES / "alerts.yml").read_text())
    tests = (RULES / "alerts_test.yml").read_text()
    names = [r["alert"] for g in rules["groups"] for r in g["rules"]]
    assert all(f"alertname: {name}, exp_alerts: []" in tests for name in names)  # quiet when healthy
    assert all(re.search(rf"alertname: {name}\n\s+exp_alerts:\n\s+- exp_labels", tests) for name in names)


@pytest.mark.parametrize(
    ("alert", "rule", "blunted"),
    [
        (
            "FloodgateSnapshotStale",
            "floodgate_snapshot_age_seconds) > 10",
            "floodgate_snapshot_age_seconds) > 1000",
        ),
        (
            "FloodgateDutyLate",
            "> floodgate_duty_late_after_seconds)",
            "> 100 * floodgate_duty_late_after_seconds)",
        ),
        ("FloodgateDutyCovered", "(floodgate_duty_covered) == 1", "(floodgate_duty_covered) == 2"),
        (
            "FloodgateDrawBeaconUnreachable",
            "(floodgate_draw_beacon_unreachable) == 1",
            "(floodgate_draw_beacon_unreachable) == 2",
        ),
    ],
)
def test_control_a_rule_that_never_fires_fails_its_unit_test(
    tmp_path: Path, alert: str, rule: str, blunted: str
) -> None:
    broken = (RULES / "alerts.yml").read_text().replace(rule, blunted)
    assert broken != (RULES / "alerts.yml").read_text()
    (tmp_path / "alerts.yml").write_text(broken)
    shutil.copy(RULES / "alerts_test.yml", tmp_path)

    tested = promtool("test", "rules", "alerts_test.yml", cwd=tmp_path)

    assert tested.returncode != 0 and alert in tested.stdout + tested.stderr


@pytest.mark.django_db
def test_every_metric_the_rules_name_is_in_a_real_scrape(settings) -> None:
    make_drop(slug="scraped", quantity=5)
    settings.DRAW_BEACON = "quicknet"  # a waiting room within the hour whose relays were checked
    soon = make_drop(slug="checked", waiting_room=True, starts_at=timezone.now() + timedelta(minutes=30))
    drawing.open_queues([soon])
    Queue.objects.filter(pk=soon.pk).update(preflight_ok=False, preflight_at=timezone.now())
    from core import metrics

    metrics.observe_reserve(drop_id=make_drop(slug="sold", quantity=1).pk, outcome="held", seconds=0.01)
    with override_settings(DEBUG=True):
        text = Client().get("/metrics").content.decode()
    exposed = set(re.findall(r"^(floodgate_[a-z_]+)", text, re.MULTILINE))

    named = set(re.findall(r"floodgate_[a-z_]+", (RULES / "alerts.yml").read_text()))

    assert named and named <= exposed, sorted(named - exposed)
