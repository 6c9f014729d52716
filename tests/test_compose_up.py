"""docker-compose.yml started for real: the bounded form of `prove compose` (devtools/compose.py).

A dockerd of the run's own, images from Debian's packages (the first run on a machine makes the
base with debootstrap and builds every image, about 4 minutes; later runs find them cached), the
shipped compose files with the rehearsal overlay, a crowd through HAProxy with a web replica
killed mid-sale. The machine must be as it was afterwards, also when the run is stopped midway.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from devtools import compose

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.servers  # a dockerd and the containers it runs
# What runs inside the run's containers, as the machine's process table shows it.
CONTAINED = (
    r"granian|celery -A shop.celery|haproxy -W -db|postgres -D /var/lib/postgresql/data|pgbouncer /etc"
)


def machine() -> dict[str, object]:
    """What the run may touch on this machine: firewall, forwarding, links, routes."""
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return {
        "iptables": compose.firewall(),
        "ip_forward": compose.forwarding(),
        "bridges": sorted(re.findall(r"^\d+: (br-\w+|docker0|veth\w+)", links, re.M)),
        "routes": subprocess.run(["ip", "route"], capture_output=True, text=True).stdout,
    }


def left_running() -> str:
    found = subprocess.run(
        ["pgrep", "-af", rf"dockerd.*{compose.EXEC_ROOT}|containerd-shim.*{compose.EXEC_ROOT}|{CONTAINED}"],
        capture_output=True,
        text=True,
    )
    return found.stdout


def run(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "devtools.compose", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.mark.timeout(1500)
def test_compose_up_sells_a_drop_exactly_through_the_balancer_with_a_web_replica_killed(
    tmp_path: Path,
) -> None:
    before = machine()
    outcome_path = tmp_path / "outcome.json"

    process = run("--buyers", "120", "--units", "20", "--kill-after", "8", "--out", str(outcome_path))
    output, _ = process.communicate(timeout=1400)

    assert process.returncode == 0, output[-5000:]
    outcome = json.loads(outcome_path.read_text())
    database = outcome["database"]
    assert outcome["passed"] is True
    assert database["drift"] == 0 and database["real_drop_unchanged"] is True
    assert 0 < database["sold"] == database["orders_confirmed"] <= 20
    assert outcome["server_errors"] == 0 and outcome["unanswered"] == 0 and "201" in outcome["statuses"]
    assert outcome["replaced_s"] is not None and outcome["unhealthy"] == []
    assert outcome["down_clean"] is True
    assert "PostgreSQL" in outcome["postgres"]
    assert machine() == before
    assert left_running() == ""


@pytest.mark.timeout(600)
def test_a_compose_run_stopped_midway_leaves_the_machine_as_it_was() -> None:
    before = machine()
    process = run("--buyers", "50", "--units", "10")
    assert process.stdout is not None
    deadline = time.monotonic() + 500
    for line in process.stdout:  # stopped while compose brings the services up
        assert time.monotonic() < deadline, "the run never reached `compose up`"
        if "compose up" in line:
            time.sleep(5)
            break
    process.send_signal(signal.SIGTERM)
    rest, _ = process.communicate(timeout=300)

    assert process.returncode != 0
    assert "down -v: nothing left" in rest, rest[-3000:]
    assert machine() == before
    assert left_running() == ""
