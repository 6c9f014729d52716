"""The tooling's modules (bench/, devtools/) import each other without a cycle, counting the imports
inside functions too: a cycle is not dodged by hiding one of its imports in a function."""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest

TOOLING = ("bench", "devtools")


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The graph's import cycles: each strongly connected group of modules (Tarjan), sorted."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported not in order:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], order[imported])
        if low[module] == order[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1 or module in graph.find_modules_directly_imported_by(module):
                found.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in order:
            visit(module)
    return sorted(found)


def test_bench_and_devtools_import_each_other_without_a_cycle() -> None:
    graph = grimp.build_graph(*TOOLING, exclude_type_checking_imports=True, cache_dir=None)
    assert {module.split(".")[0] for module in graph.modules} == set(TOOLING)  # both were read
    assert cycles(graph) == []


def test_a_cycle_closed_by_an_import_inside_a_function_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "cyclic_tooling"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "runner.py").write_text("from cyclic_tooling import helper\n")
    # the dodge: helper needs runner, but imports it only when called
    dodged = "def run():\n    from cyclic_tooling import runner\n\n    return runner\n"
    (package / "helper.py").write_text(dodged)
    (package / "alone.py").write_text("from cyclic_tooling import helper\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    graph = grimp.build_graph("cyclic_tooling", cache_dir=None)

    assert cycles(graph) == [["cyclic_tooling.helper", "cyclic_tooling.runner"]]
