"""docs/ARCHITECTURE.md says only what is true: each claim in it that a test can check, checked."""

from __future__ import annotations

import ast
import builtins
import importlib
import re
import tomllib
from pathlib import Path

from django.apps import apps
from django.conf import settings

from core.errors import FloodgateError
from ops.schedule import BY_NAME, DUTIES

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
LINTER = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
LAYERS = next(c for c in LINTER["contracts"] if c["type"] == "layers")
PRODUCTION: list[str] = [name.strip() for line in LAYERS["layers"] for name in line.split("|")]
TICKED = re.findall(r"`([^`\n]+)`", DOC)


def _section(title: str) -> str:
    return DOC.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def _rows(section: str) -> list[list[str]]:
    """The cells of a section's table rows (headers too), the rules under the headers left out."""
    rows = [line.strip("|").split("|") for line in _section(section).splitlines() if line.startswith("| ")]
    cells = [[cell.strip() for cell in row] for row in rows]
    return [row for row in cells if set("".join(row)) != {"-"}]


def _modules(package: str) -> list[Path]:
    return [p for p in (ROOT / package).rglob("*.py") if "migrations" not in p.parts]


def test_the_map_is_at_most_300_lines() -> None:
    assert len(DOC.splitlines()) <= 300


def test_the_layers_table_is_import_linters_order() -> None:
    rows = _rows("The layers")[1:]
    stated = [(int(layer), package.strip("`")) for layer, package, _why in rows]
    contract = [(n, name.strip()) for n, line in enumerate(LAYERS["layers"], 1) for name in line.split("|")]
    assert stated == contract
    assert all(why.endswith(".") and why.count(". ") == 0 for _l, _p, why in rows)  # one sentence each


def test_the_public_names_are_the_contracts_only_ignored_imports() -> None:
    assert sorted(LAYERS["ignore_imports"]) == [
        "shop.asgi -> config.asgi",
        "shop.celery -> config.celery",
        "shop.settings -> config.settings",
    ]
    forbidden = next(c for c in LINTER["contracts"] if c["type"] == "forbidden")
    assert sorted(forbidden["source_modules"]) == sorted(PRODUCTION)
    assert forbidden["forbidden_modules"] == ["devtools"]


def test_every_production_package_says_why_it_exists() -> None:
    for package in PRODUCTION:
        tree = ast.parse((ROOT / package / "__init__.py").read_text())
        assert ast.get_docstring(tree), f"{package}/__init__.py has no docstring"


def test_every_path_in_backticks_exists() -> None:
    paths = {t for t in TICKED if " " not in t and "<" not in t and "/" in t and not t.startswith("/")}
    assert paths, "the document names no path"
    missing = [p for p in paths if not (ROOT / p.split(":")[0]).exists()]
    assert not missing


def test_every_module_and_name_in_backticks_exists() -> None:
    named = [t for t in TICKED if re.fullmatch(r"[a-z_]+(\.[A-Za-z_]+)+(:[a-z_]+)?", t)]
    tasks = {n for p in ROOT.glob("*/tasks.py") for n in re.findall(r'name="([a-z_.]+)"', p.read_text())}
    tasks |= set(BY_NAME)  # the duties' tasks, registered from their table
    named = [t for t in named if t.split(".")[0] in PRODUCTION and t not in tasks]  # a task is a name
    assert len(named) > 10
    for dotted in named:
        dotted, _, attr = dotted.partition(":")
        parts = dotted.split(".")
        if len(parts) == 2 and parts[1][0].isupper():  # a model, app_label.Model
            assert apps.get_model(dotted)
            continue
        for cut in range(len(parts), 0, -1):
            try:
                found: object = importlib.import_module(".".join(parts[:cut]))
            except ModuleNotFoundError:
                continue
            for name in [*parts[cut:], *([attr] if attr else [])]:
                assert hasattr(found, name), f"{dotted}: no {name}"
                found = getattr(found, name)
            break
        else:
            raise AssertionError(f"{dotted} is no module")


def test_every_link_to_a_document_resolves() -> None:
    links = re.findall(r"\]\(([^)]+)\)", DOC) + re.findall(r"\bdocs/([A-Z]+\.md)", DOC)
    assert len(links) >= 8
    for link in links:
        target, _, anchor = link.partition("#")
        path = (ROOT / "docs" / target).resolve()
        assert path.exists(), link
        if anchor:
            titles = re.findall(r"^#+ (.+)$", path.read_text(), re.M)
            slugs = {re.sub(r"[^\w\- ]", "", t).strip().lower().replace(" ", "-") for t in titles}
            assert anchor in slugs, link


def test_beats_schedule_is_the_tables() -> None:
    cells = [cell for row in _rows("Processes") if len(row) == 4 and row[0] != "task" for cell in row]
    stated = {cells[i].strip("`"): float(cells[i + 1]) for i in range(0, len(cells), 2) if cells[i]}
    schedule: dict[str, float] = {}
    for entry in settings.CELERY_BEAT_SCHEDULE.values():
        period = entry["schedule"]
        assert isinstance(period, int | float), entry  # seconds, as the table states them
        schedule[str(entry["task"])] = float(period)
    assert set(stated) == set(schedule)
    defaults = {duty.task for duty in DUTIES.values() if duty.every_from}  # the env's
    assert {t: p for t, p in stated.items() if t not in defaults} == {
        t: p for t, p in schedule.items() if t not in defaults
    }


def test_raw_sql_lives_in_sql_modules_but_the_advisory_locks() -> None:
    statement = re.compile(r"^\s*(SELECT|UPDATE|INSERT|DELETE|WITH)\s.*\b(FROM|SET|INTO|pg_)", re.S)
    outside = {
        str(path.relative_to(ROOT))
        for package in PRODUCTION
        for path in _modules(package)
        if path.name != "sql.py"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and statement.match(node.value)
    }
    assert outside == {"core/locks.py"}


def test_only_core_locks_takes_advisory_locks_and_only_transaction_scoped() -> None:
    takers = {
        str(path.relative_to(ROOT))
        for package in PRODUCTION
        for path in _modules(package)
        if re.search(r"pg_(try_)?advisory", path.read_text())
    }
    assert takers == {"core/locks.py"}
    assert not re.search(r"pg_(try_)?advisory_lock", (ROOT / "core" / "locks.py").read_text())


def test_only_checkout_views_imports_a_tasks_module() -> None:
    importers = set()
    for package in PRODUCTION:
        for path in _modules(package):
            if path.name == "tasks.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and (node.module or "").endswith(".tasks"):
                    importers.add(str(path.relative_to(ROOT)))
                if isinstance(node, ast.Import) and any(a.name.endswith(".tasks") for a in node.names):
                    importers.add(str(path.relative_to(ROOT)))
    assert importers == {"checkout/views.py"}


def test_mypy_is_strict_on_every_production_package_and_names_each_ignore() -> None:
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert mypy["strict"] is True
    assert set(PRODUCTION) <= set(mypy["files"])
    for override in mypy.get("overrides", []):
        if override.get("ignore_errors"):
            assert all(m.split(".")[0] not in PRODUCTION or ".migrations" in m for m in override["module"])
    bare = [
        f"{path.relative_to(ROOT)}:{n}"
        for package in PRODUCTION
        for path in _modules(package)
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"#\s*type:\s*ignore(?!\[)", line)
    ]
    assert not bare


def _literal_domain_raises() -> dict[str, int]:
    """Files raising a domain error whose detail is a plain literal (not gettext), and how often."""
    found: dict[str, int] = {}
    for package in PRODUCTION:
        for path in _modules(package):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args):
                    continue
                detail = node.exc.args[0]
                if not isinstance(detail, ast.JoinedStr | ast.Constant) or not isinstance(
                    getattr(detail, "value", ""), str
                ):
                    continue
                module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
                func = ast.unparse(node.exc.func)
                raised: object = getattr(builtins, func, None)
                if raised is None:
                    raised = importlib.import_module(module)
                    for name in func.split("."):
                        raised = getattr(raised, name, None)
                # a local name (`raise error(...)`) cannot be looked up: counted, to be safe
                if raised is None or (isinstance(raised, type) and issubclass(raised, FloodgateError)):
                    key = str(path.relative_to(ROOT))
                    found[key] = found.get(key, 0) + 1
    return found


def test_the_english_domain_errors_are_where_the_document_says() -> None:
    languages = DOC.split("**Languages.**", 1)[1].split("\n\n", 1)[0]
    named = set(re.findall(r"`([a-z_/]+\.py)`", languages)) | {"holds/management/commands/create_drop.py"}
    found = _literal_domain_raises()
    assert set(found) <= named, set(found) - named
    assert found.get("holds/services.py") == 1  # the one buyer's refusal the document names


def test_the_inventory_modes_live_where_the_document_says() -> None:
    assert "class InventoryMode" in (ROOT / "shop" / "models.py").read_text()
    branching = {
        package
        for package in PRODUCTION
        for path in _modules(package)
        if re.search(r"InventoryMode\.|inventory_mode\s*[!=]=|mode == \"units\"", path.read_text())
    }
    assert branching == {"shop", "inventory", "catalogue", "holds", "ops", "storefront"}
    docstring = ast.get_docstring(ast.parse((ROOT / "inventory" / "__init__.py").read_text())) or ""
    assert all(package in docstring for package in branching - {"inventory"})
    assert "only place that knows modes" not in DOC
