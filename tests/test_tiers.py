"""The fast tier's guard (tests/conftest.py, "tiers"): a process other than a PostgreSQL client
tool fails the test that starts it, so a test needing servers cannot slip into `test --fast`."""

from __future__ import annotations

import subprocess

import pytest

from devtools.pg_servers import pg_bin
from tests.conftest import _refuse_processes


def test_the_fast_tier_refuses_a_process_and_names_where_the_test_belongs(monkeypatch) -> None:
    monkeypatch.setattr(subprocess.Popen, "__init__", subprocess.Popen.__init__)  # put back after
    _refuse_processes()
    with pytest.raises(RuntimeError, match="it belongs in the full tier"):
        subprocess.run(["true"], check=True)


def test_control_a_postgresql_client_tool_still_runs_in_the_fast_tier(monkeypatch) -> None:
    monkeypatch.setattr(subprocess.Popen, "__init__", subprocess.Popen.__init__)
    _refuse_processes()
    done = subprocess.run([str(pg_bin() / "psql"), "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and "psql" in done.stdout
