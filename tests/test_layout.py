"""The layout holds (issue 8): no import cycle between the project's modules, and every contract of
``[tool.importlinter]`` in pyproject.toml (imports flow one way: api → services/selectors → models →
core) is kept. A planted upward import or a cycle fails here and in ``.ci/run``'s ``lint-imports``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

from tests.factories import BASE_DIR

PACKAGES = ("config", "core", "api", "compliance", "tenants", "agents", "memory", "devstack", "benchmarks")


def strongly_connected(graph: grimp.ImportGraph) -> list[list[str]]:
    """Tarjan's algorithm (1972) over the module import graph: the components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_no_module_imports_itself_back() -> None:
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True)
    cycles = strongly_connected(graph)
    assert cycles == [], f"import cycles: {cycles}"


def test_the_import_contracts_are_kept() -> None:
    lint_imports = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint_imports), "--no-cache"],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:  # pragma: no cover - the report is the message
        raise AssertionError(result.stdout[-4000:] + result.stderr[-2000:])


def test_the_cycle_finder_finds_cycles() -> None:
    graph = grimp.ImportGraph()
    for importer, imported in [
        ("p.a", "p.b"),
        ("p.b", "p.c"),
        ("p.c", "p.a"),
        ("p.c", "p.d"),
        ("p.d", "p.e"),
    ]:
        graph.add_import(importer=importer, imported=imported)
    assert strongly_connected(graph) == [["p.a", "p.b", "p.c"]]


LAYERS = ("episodic", "semantic", "knowledge", "working", "checkpoints", "procedural")


def test_consolidation_sits_above_the_layers() -> None:
    """No layer imports consolidation; consolidation reads and writes through episodic, semantic and
    knowledge only (the contract in pyproject.toml says the first; this pins the second)."""
    graph = grimp.build_graph("memory", exclude_type_checking_imports=True)
    for layer in LAYERS:
        assert not graph.chain_exists(
            importer=f"memory.{layer}", imported="memory.consolidation", as_packages=True
        )
    used = {
        imported.split(".")[1]
        for module in graph.find_descendants("memory.consolidation") | {"memory.consolidation"}
        for imported in graph.find_modules_directly_imported_by(module)
        if imported.startswith("memory.") and not imported.startswith("memory.consolidation")
    }
    assert used <= {"episodic", "semantic", "knowledge"}, used
