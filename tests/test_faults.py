"""Two of `floodgate.py prove faults`' runs inside the suite: a backend killed mid-claim and
Redis paused (SIGSTOP) under a buying crowd, each on servers of its own (devtools/faults.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_crowd_loses_no_hold_and_gets_no_500_when_a_backend_dies_or_redis_stops(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "devtools.faults",
            "--only",
            "backend-killed",
            "--only",
            "redis-paused",
            "--rate",
            "100",
            "--before",
            "3",
            "--after",
            "3",
            "--pause",
            "3",
            "--out",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )

    results = json.loads((tmp_path / "faults.json").read_text())
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert [r["fault"] for r in results] == ["backend-killed", "redis-paused"]
    for result in results:
        assert all(result["passed"].values()), result
        assert result["told"] > 100 and result["missing"] == 0 and result["drift"] == 0
        assert result["in_fault"].get("503", 0) > 0, result  # buyers were told to wait, not left hanging
