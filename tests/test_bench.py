"""bench claims end to end, small (--smoke): every baseline runs, and a broken one fails the run.

INSERT_HOLD once gained a parameter that the pgbench twin of reserve()'s transaction did not
set, and the naive baseline's call did not pass: both baselines broke, every ratio said n/a,
and the bench still exited 0. Here a statement that changes under a baseline fails a test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import claims
from tests.conftest import database_url_for_tests

ROOT = Path(__file__).resolve().parent.parent


def run_claims(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m bench.claims --smoke` on the test database (PGBIN: the embedded server's pgbench)."""
    env = {**os.environ, "DATABASE_URL": database_url_for_tests()}
    command = [sys.executable, "-m", "bench.claims", "--smoke", "--out", str(out), *args]
    return subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=240)


@pytest.mark.django_db(transaction=True)
def test_every_baseline_and_path_runs_and_every_ratio_is_printed(tmp_path: Path) -> None:
    done = run_claims(tmp_path)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-4000:]
    for scenario in claims.ORDER:
        for n in (1, 2):
            assert f"{scenario:<52} {n:>2} clients:" in done.stdout, scenario
    assert "n/a" not in done.stdout and "FAILED" not in done.stdout
    assert "units, last 10%" in done.stdout
    # the forkserver's clients must not run an imported bench.claims again (runpy's warning)
    assert "RuntimeWarning" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-4000:]


@pytest.mark.django_db(transaction=True)
def test_a_broken_pgbench_script_fails_the_run_in_one_line(tmp_path: Path) -> None:
    """The control: pgbench's script without the digest, as it was when it broke."""
    done = run_claims(tmp_path, "--break-pgbench", "--clients", "1", "--only", "buckets")
    assert done.returncode == 1, (done.stdout + done.stderr)[-4000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("bench claims: FAILED: 2 run(s): pgbench, same SQL, 1 row at 1 clients:"), last
    assert 'syntax error at or near ":"' in last
    assert "n/a" not in done.stdout and "Traceback" not in done.stderr


def test_a_parameter_the_pgbench_script_does_not_set_is_refused() -> None:
    with pytest.raises(claims.UnsetParameter, match="new_column"):
        claims.pgbench_sql("INSERT INTO t (a, b) SELECT %(drop)s, %(new_column)s")
    for buckets in (1, 16):
        assert ":digest" not in claims.pgbench_script(buckets)
        assert ":digest" in claims.pgbench_script(buckets, broken=True)


def test_a_failed_or_missing_run_is_named() -> None:
    cpu = claims.CpuWindow()
    good = {
        (scenario, 1): claims.Run(scenario, 1, 10, 1.0, cpu)
        for scenario in claims.ORDER
        if scenario != claims.NAIVE
    }
    broken = claims.Run(claims.NAIVE, 1, 0, 1.0, cpu, failed=["failed: ProgrammingError x9 (...)"])
    assert claims.failures({**good, (claims.NAIVE, 1): broken}, [1], None) == [
        f"{claims.NAIVE} at 1 clients: failed: ProgrammingError x9 (...)"
    ]
    assert claims.failures(good, [1], None) == [f"{claims.NAIVE} at 1 clients: not run"]
    assert (
        claims.failures({**good, (claims.NAIVE, 1): claims.Run(claims.NAIVE, 1, 5, 1.0, cpu)}, [1], None)
        == []
    )
