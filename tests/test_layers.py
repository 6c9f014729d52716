"""The layering contracts (pyproject.toml) pass, and fail on an upward import or a cycle."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = [
    *(
        "config",
        "ops",
        "storefront",
        "accounts",
        "checkout",
        "holds",
        "admission",
        "shop",
        "inventory",
        "core",
    ),
    "devtools",
]
LINT = str(Path(sys.executable).with_name("lint-imports"))


def lint(where: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LINT, "--no-cache"], cwd=where, capture_output=True, text=True, timeout=120)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the source packages and pyproject.toml to break on purpose."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_layers_hold() -> None:
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_an_upward_import_breaks_the_layers(tree: Path) -> None:
    # Hidden inside a function, the way cycles used to be dodged: still an arrow up.
    upward = "def f():\n    from holds import services\n\n    return services\n"
    (tree / "inventory" / "upward.py").write_text(upward)
    result = lint(tree)
    assert result.returncode != 0
    assert "inventory is not allowed to import holds" in result.stdout


def test_a_cycle_inside_a_package_is_refused(tree: Path) -> None:
    (tree / "checkout" / "outbox.py").write_text(
        (tree / "checkout" / "outbox.py").read_text() + "\n\ndef back():\n    from checkout import services\n"
    )
    result = lint(tree)
    assert result.returncode != 0
    assert "No cycles between the modules of a package BROKEN" in result.stdout.replace("\n", " ")


def test_production_code_may_not_import_dev_tooling(tree: Path) -> None:
    (tree / "core" / "leak.py").write_text("from devtools import embedded\n")
    result = lint(tree)
    assert result.returncode != 0
    assert "core.leak -> devtools.embedded" in result.stdout
