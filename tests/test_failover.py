"""A short `prove failover` in the suite: the primary SIGKILLed under an HTTP crowd, the
synchronous standby promoted, no hold a buyer was told about lost (devtools/failover.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.servers  # two PostgreSQL servers

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.django_db  # pytest-django makes the test database, which is dumped, for db tests only
@pytest.mark.migrated_dump
def test_a_promoted_synchronous_standby_loses_no_hold_and_the_sale_goes_on(
    tmp_path: Path, migrated_dump: dict[str, str]
) -> None:
    # its own two PostgreSQL servers, Redis and floodgate-web: nothing shared with the suite's
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "devtools.failover",
            "--rate",
            "100",
            "--before",
            "3",
            "--detect",
            "0.5",
            "--after",
            "4",
            "--out",
            str(tmp_path),
        ],
        env={**os.environ, **migrated_dump},  # the suite's migrated database restored, not migrated
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads((tmp_path / "failover.json").read_text())
    assert all(result["checks"].values()) and len(result["checks"]) == 8
    assert result["lost"] == result["lost_orders"] == 0 and result["invariant"]["drift"] == 0
    assert result["told"] > 100 and result["orders"] > 20
    assert result["statuses"].get("503", 0) > 0 and result["gap"] is not None
