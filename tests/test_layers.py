"""The layering contracts (pyproject.toml) pass, and fail on an upward import or a cycle; no
statement reads a table of a layer above its own, which import-linter cannot see."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from django.apps import apps

ROOT = Path(__file__).resolve().parent.parent
LINTER = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
PACKAGES: list[str] = LINTER["root_packages"]
# Top first; packages of one "a | b" line are independent: neither may read the other's tables.
LAYERS: list[list[str]] = [
    [name.strip() for name in line.split("|")]
    for contract in LINTER["contracts"]
    if contract["type"] == "layers"
    for line in contract["layers"]
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


@pytest.mark.servers
def test_the_layers_hold() -> None:
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.servers
def test_an_upward_import_breaks_the_layers(tree: Path) -> None:
    # Hidden inside a function, the way cycles used to be dodged: still an arrow up.
    upward = "def f():\n    from holds import services\n\n    return services\n"
    (tree / "inventory" / "upward.py").write_text(upward)
    result = lint(tree)
    assert result.returncode != 0
    assert "inventory is not allowed to import holds" in result.stdout


@pytest.mark.servers
def test_a_cycle_inside_a_package_is_refused(tree: Path) -> None:
    (tree / "checkout" / "outbox.py").write_text(
        (tree / "checkout" / "outbox.py").read_text() + "\n\ndef back():\n    from checkout import services\n"
    )
    result = lint(tree)
    assert result.returncode != 0
    assert "No cycles between the modules of a package BROKEN" in result.stdout.replace("\n", " ")


@pytest.mark.servers
def test_production_code_may_not_import_dev_tooling(tree: Path) -> None:
    (tree / "core" / "leak.py").write_text("from devtools import embedded\n")
    result = lint(tree)
    assert result.returncode != 0
    assert "core.leak -> devtools.embedded" in result.stdout


def _layer(package: str) -> int | None:
    return next((n for n, line in enumerate(LAYERS) if package in line), None)


def tables_by_package() -> dict[str, str]:
    """Every table of the project's models (join tables too), by the package that owns it."""
    return {
        model._meta.db_table: model._meta.app_config.name
        for model in apps.get_models(include_auto_created=True)
        if _layer(model._meta.app_config.name) is not None
    }


def tables_above(package: str, source: str) -> list[str]:
    """Tables named in the module's strings (its SQL) that belong to a layer above `package`,
    or to a package beside it on the same layer (independent of it)."""
    own = _layer(package)
    assert own is not None, package
    strings = " ".join(
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    )
    named = set(re.findall(r"\b[a-z]+_[a-z_]+\b", strings))
    found = []
    for table, owner in tables_by_package().items():
        layer = _layer(owner)
        assert layer is not None
        if table in named and owner != package and layer <= own:
            found.append(f"{package} reads {table} ({owner})")
    return sorted(found)


def sql_modules() -> list[Path]:
    return sorted(path for line in LAYERS for package in line for path in (ROOT / package).glob("sql.py"))


def test_every_layer_has_sql_modules_to_check() -> None:
    assert {path.parent.name for path in sql_modules()} >= {
        "shop",
        "inventory",
        "holds",
        "admission",
        "checkout",
    }


@pytest.mark.parametrize("module", sql_modules(), ids=lambda path: f"{path.parent.name}/sql.py")
def test_no_statement_reads_a_table_of_a_higher_layer(module: Path) -> None:
    assert tables_above(module.parent.name, module.read_text()) == []


def test_an_upper_table_in_a_lower_statement_is_found() -> None:
    # The read that used to live in inventory/sql.py: stock counting the holds above it.
    source = (ROOT / "inventory" / "sql.py").read_text() + (
        '\nEXPIRED = "SELECT sum(quantity) FROM holds_hold WHERE drop_id = %(drop)s"\n'
    )
    assert tables_above("inventory", source) == ["inventory reads holds_hold (holds)"]
    # A comment is not a statement; a table of the package's own or a lower layer is fine.
    assert (
        tables_above("inventory", "# holds_hold\nQ = 'SELECT 1 FROM inventory_unit JOIN shop_drop'\n") == []
    )
    # Beside it on an independent layer counts too (ops and storefront are one "a | b" line).
    assert tables_above("storefront", "Q = 'SELECT * FROM ops_duty'\n") == ["storefront reads ops_duty (ops)"]
