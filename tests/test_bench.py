"""bench claims end to end, small (--smoke): every baseline runs, and a broken one fails the run.

INSERT_HOLD once gained a parameter that the pgbench twin of reserve()'s transaction did not
set, and the naive baseline's call did not pass: both baselines broke, every ratio said n/a,
and the bench still exited 0. Here a statement that changes under a baseline fails a test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from bench import claims, sweep
from tests.conftest import database_url_for_tests

ROOT = Path(__file__).resolve().parent.parent


def run_claims(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m bench.claims --smoke` on the test database (PGBIN: the embedded server's pgbench)."""
    env = {**os.environ, "DATABASE_URL": database_url_for_tests()}
    command = [sys.executable, "-m", "bench.claims", "--smoke", "--out", str(out), *args]
    return subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=240)


@pytest.mark.servers
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


@pytest.mark.servers
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


# bench crowd --sweep, its smallest form: the store, the bare ceiling, two sizes and two drops at once.


def run_sweep(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m bench.sweep` (`bench crowd --sweep`) on the test database, its table and picture
    into `out`."""
    env = {**os.environ, "DATABASE_URL": database_url_for_tests()}
    quick = ["--lead", "2", "--no-warmup"]  # the suite's smallest form: correct, not a measure
    command = [sys.executable, "-m", "bench.sweep", "--out", str(out), *quick, *args]
    return subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=240)


@pytest.mark.servers
@pytest.mark.django_db(transaction=True)
def test_the_sweep_draws_each_point_and_tables_it(tmp_path: Path) -> None:
    readme = sweep.README.read_text()
    done = run_sweep(
        tmp_path, "--sizes", "150,300", "--drops", "1,2", "--units", "20", "--open-early", "--profile"
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-4000:]
    assert "Traceback" not in done.stderr, done.stderr[-4000:]
    (picture,) = tmp_path.glob("sweep-*.svg")
    (table,) = tmp_path.glob("sweep-*.md")
    root = ElementTree.parse(picture).getroot()
    points: dict[tuple[str, str], list[float]] = {}
    for circle in root.iter("{http://www.w3.org/2000/svg}circle"):
        points.setdefault((circle.get("data-panel", ""), circle.get("data-series", "")), []).append(
            float(circle.get("data-x", "nan"))
        )
    for key in [
        ("answers", "the store"),
        ("answers", "bare ASGI (the client's ceiling)"),
        ("last-hold", "last hold"),
    ]:
        assert points[key] == [150, 300], (key, points)
    for panel in ("no-p99", "cpu", "rss"):
        assert [xs for (p, _), xs in points.items() if p == panel] == [[150, 300]], (panel, points)
    assert points["drops", "last hold"] == points["drops", '"no" p99'] == [1, 2]
    text = table.read_text()
    assert text in done.stdout
    assert text.count("20 / 20, drift 0 ok") == 3 and "40 / 40, drift 0 ok" in text  # 150, 300; 2 x 300
    assert "| 150 |" in text and "| 2 | 600 |" in text and "WRONG" not in text
    assert "--open-early" in text and "start to last hold (DB clock), claim transactions" in text
    (figures,) = tmp_path.glob("sweep-*.json")
    for point in json.loads(figures.read_text())["sizes"]:
        (after_start,) = point["server_last_hold"]
        assert 0 < after_start < 60 and 1 <= point["transactions"][0] <= 20  # 20 holds: 20 at most
    # --profile: py-spy's stacks of the web processes and their summary for each measured point
    profiles = {p.name for p in tmp_path.glob("sweep-*/profile-*")}
    assert {"profile-150x1.txt", "profile-300x1.txt", "profile-300x2.txt"} <= profiles, profiles
    summary = next(tmp_path.glob("sweep-*/profile-150x1.profile.md")).read_text()
    assert "by itself:" in summary and "with what it called:" in summary and "floodgate-web" in summary
    assert sweep.README.read_text() == readme  # only --write-readme touches it


def test_a_profile_is_summed_by_function_and_leaves_idle_waits_out() -> None:
    from bench import profile

    collapsed = "\n".join(
        [
            "process 1;thread (1);serve (granian);claim (sale/lane.py:10);execute (psycopg) 30",
            "process 1;thread (1);serve (granian);claim (sale/lane.py:10) 10",
            "process 1;thread (2);_worker (concurrent/futures/thread.py:89) 50",
            "garbage line",
        ]
    )
    s = profile.summarise(collapsed)
    assert (s.samples, s.idle) == (90, 50)
    assert s.by_itself == [("execute (psycopg)", 30), ("claim (sale/lane.py:10)", 10)]
    assert dict(s.with_callees)["claim (sale/lane.py:10)"] == 40
    assert "75.0%  execute (psycopg)" in s.text()  # a share of the 40 busy samples


@pytest.mark.servers
@pytest.mark.django_db(transaction=True)
def test_a_wrong_count_fails_the_sweep(tmp_path: Path) -> None:
    """The control: each drop one unit larger than the check expects sells one too many."""
    done = run_sweep(
        tmp_path, "--sizes", "150", "--drops", "1", "--units", "20", "--break-count", "--no-ceiling"
    )
    assert done.returncode == 2, (done.stdout + done.stderr)[-4000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last == (
        "bench crowd --sweep: FAILED: CORRECTNESS at 1 drop(s) x 150 buyers:"
        " drop(s) [1] held [21] of 20 units, drift [0]"
    ), last
    assert "21 / 20, drift 0 **WRONG**" in done.stdout


def test_the_readme_part_is_replaced_between_its_markers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    readme, picture, svg = tmp_path / "README.md", tmp_path / "sweep.svg", tmp_path / "new.svg"
    monkeypatch.setattr(sweep, "README", readme)
    monkeypatch.setattr(sweep, "PICTURE", picture)
    monkeypatch.setattr(sweep, "ROOT", tmp_path)
    svg.write_text("<svg/>")
    readme.write_text(f"# top\n\n{sweep.README_BEGIN}\nold table\n{sweep.README_END}\n\n## after\n")
    sweep.write_readme("first table", svg)
    sweep.write_readme("second table", svg)  # a rerun replaces, never appends
    text = readme.read_text()
    assert text.startswith("# top\n") and text.endswith("\n## after\n")
    assert "second table" in text and "first table" not in text and "old table" not in text
    assert text.count(sweep.README_BEGIN) == 1 and "![bench crowd --sweep](sweep.svg)" in text
    assert picture.read_text() == "<svg/>"
    readme.write_text("# no markers\n")
    with pytest.raises(SystemExit, match="markers"):
        sweep.write_readme("table", svg)


def test_growth_names_flat_linear_and_worse() -> None:
    assert sweep.growth([(1000, 5.0), (10000, 5.1)]).endswith("(flat)")
    assert sweep.growth([(1000, 1.0), (2000, 2.1), (5000, 4.8)]).endswith("(linear)")
    assert sweep.growth([(1000, 1.0), (10000, 100.0)]) == "~ n^2.00 (worse than linear)"
    assert sweep.growth([(1000, None), (2000, 1.0)]) == "-"


@pytest.mark.servers
@pytest.mark.django_db(transaction=True)
def test_the_line_scenarios_join_everyone_time_the_draw_and_tell_every_buyer(tmp_path: Path) -> None:
    """bench crowd's scenarios 6 and 7 (--quick: 2,000 join a 1,000-unit drop's line) end to end.
    6: every join answered, the draw seen and replayed, the snapshot read, nothing held. 7: the
    same line through its sale, every unit held, every loser told (by the draw's broadcast alone)
    and every page's exact number asked for."""
    env = {**os.environ, "DATABASE_URL": database_url_for_tests()}
    command = [sys.executable, "-m", "bench.crowd", "--quick", "--only", "6", "--only", "7"]
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-4000:]
    assert done.stdout.count("| joined before the start | 2,000 | 2,000 | PASS |") == 2, said[-4000:]
    assert "| holds created (DB) | 0 (client saw 0) | exactly 0" in done.stdout
    assert "for 2,000 entries |" in done.stdout  # the draw replayed on every entry
    assert "| published snapshot | " in done.stdout and " bytes |" in done.stdout
    assert "| holds created (DB) | 1000 (client saw 1000) | exactly 1,000 | PASS |" in done.stdout
    # every buyer of 7 had an answer: the line is drawn before the start (issue 41), so the 1,000
    # behind the units are told "unlikely" by the draw's broadcast, before the first wave lets in
    # 150% of the units; the 1,000 ahead of them are admitted and hold every unit
    assert "| buyers admitted (got a token) | 1,000 |" in done.stdout
    assert 'losers told "unlikely" or "sold out", p50 / p99 / last |' in done.stdout
    assert "(1,000 buyers) |" in done.stdout
    # the 500 told by their draw key asked for their exact number later, as the page does
    assert "| pages that learned their exact number, last after the start | 2,000, " in done.stdout
    assert done.stdout.count("| errors / no final answer | 0 / 0 |") >= 2 and "CORRECTNESS" not in said


@pytest.mark.servers
@pytest.mark.django_db(transaction=True)
def test_bench_queue_quick_runs_every_part_against_the_store_and_the_bare_socket() -> None:
    """bench queue --quick end to end: the fan-out beside its bare ceiling, the "no" path under
    wrk beside the trivial endpoint, and sockets held open with the servers' memory sampled."""
    env = {**os.environ, "DATABASE_URL": database_url_for_tests()}
    command = [sys.executable, "-m", "bench.queue", "--quick"]
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-4000:]
    assert "| 50 | 50 | " in done.stdout, said[-4000:]  # every fan-out socket connected
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert any(r.startswith("| sold out: POST") and "| 409 sold_out | hit |" in r for r in rows), rows
    assert any(r.startswith("| queue poll with the bearer token only") and "| hit |" in r for r in rows)
    store = next(r for r in rows if r.startswith("| store | 50 | 2 s | 0 |"))  # none closed on us
    assert store.endswith(("| PASS |", "| MISS |")) and " KiB |" in store
    assert any(r.startswith("| bare | 50 | 2 s | 0 |") for r in rows), rows
    assert "FAILED" not in said
