"""`floodgate.py prove faults` inside the suite, bounded: every fault once on one waiting-room sale
(the chaos run's `--every-fault` form) on servers of its own (devtools/faults.py). The full runs
(every fault on each phase of a sale of its own, two minutes of chaos) are `python3 floodgate.py
prove faults`; the suite's budget has room for one sale."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from devtools.faults import ONE_SERVER, PATRONI

pytestmark = pytest.mark.servers  # the fault runs

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--buyers", "400", "--units", "24", "--join-rate", "400"]


def prove(tmp_path: Path, dump: dict[str, str], *args: str) -> list[dict]:
    done = subprocess.run(
        [sys.executable, "-m", "devtools.faults", *SMALL, *args, "--out", str(tmp_path)],
        env={**os.environ, **dump},  # the suite's migrated database restored, not migrated again
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert (tmp_path / "faults.json").exists(), done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads((tmp_path / "faults.json").read_text())
    assert done.returncode == 0, json.dumps([r["details"] for r in results], indent=1)[-4000:]
    return results


@pytest.mark.django_db  # pytest-django makes the test database, which is dumped, for db tests only
@pytest.mark.migrated_dump
def test_every_fault_lands_on_one_waiting_room_sale_and_it_still_sells_out_exactly(
    tmp_path: Path, migrated_dump: dict[str, str]
) -> None:
    (result,) = prove(tmp_path, migrated_dump, "--chaos", "--every-fault", "--seed", "3")

    assert result["run"] == "chaos"
    assert sorted({i["fault"] for i in result["injections"]}) == sorted(ONE_SERVER)
    assert all(result["passed"].values()), result["passed"]
    assert result["sold"] == result["units"] == 24 and result["held"] == 0 and result["drift"] == 0
    assert result["holds_lost"] == result["orders_lost"] == 0
    assert result["admission_exact"] and result["offers_in_order"] and result["offers"] > 0
    assert result["statuses"].get("503", 0) > 0  # buyers were told to wait, not left hanging


@pytest.mark.django_db  # pytest-django makes the test database, which is dumped, for db tests only
@pytest.mark.migrated_dump
def test_the_patroni_leader_killed_at_the_sell_out_is_replaced_and_rejoins_and_the_sale_sells_out(
    tmp_path: Path, migrated_dump: dict[str, str]
) -> None:
    # the sale's PostgreSQL is two nodes under Patroni; the leader dies once every unit is held
    (result,) = prove(tmp_path, migrated_dump, "--only", PATRONI, "--phase", "sell-out")

    assert [(i["fault"], i["phase"]) for i in result["injections"]] == [(PATRONI, "sell-out")]
    assert all(result["passed"].values()), result["passed"]
    assert result["sold"] == result["units"] == 24 and result["held"] == 0 and result["drift"] == 0
    assert result["holds_lost"] == result["orders_lost"] == 0
    assert result["admission_exact"] and result["offers_in_order"]
    assert result["moved_again"] is not None  # the sale moved on the promoted standby
    assert result["details"]["rejoined"], result["details"]  # the dead leader is a sync standby again


def test_a_standstill_counts_only_time_in_which_buyers_waited_and_nobody_was_answered() -> None:
    from devtools.faults import standstill

    # (waited since, answered at): one buyer waits through a fault from 2 s to 4 s
    caught = [(0.0, 1.0), (1.5, 6.5), (6.0, 7.0)]
    idle = [(0.0, 1.0), (6.0, 6.5)]  # nobody waiting from 1 s to 6 s

    assert standstill(caught, 2.0, 4.0) == 4.5  # from the start (2) to the first answer after it (6.5)
    assert standstill(idle, 2.0, 4.0) == 0.0  # an idle sale did not stand still
    assert standstill(caught, 2.0, 8.0) is None  # never moved after the fault's end
