"""The package's shape: the import graph reads top-down by folder and has no cycle.

Layers, top to bottom (docs/architecture.md, "The map"): the tools (``tools/``, ``bench/``), the
front ends (the package's top-level modules), the engine, the graph rewrites (``passes/``), the
rule table (``rules/``), the runtime, and the two leaves every layer may read (``errors``,
``config``). A module imports only from its own layer or below, at module level or inside a
function alike.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "realify"
LAYERS = ("tools", "front ends", "engine", "passes", "rules", "runtime", "leaves")


def _module_name(path: pathlib.Path) -> str:
    parts = ["realify", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer(module: str) -> str:
    parts = module.split(".")
    if module in ("realify.errors", "realify.config"):
        return "leaves"
    if len(parts) > 2 and parts[1] in ("engine", "passes", "rules", "runtime"):
        return parts[1]
    if len(parts) > 1 and parts[1] in ("engine", "passes", "rules", "runtime"):
        return parts[1]
    if len(parts) > 1 and parts[1] in ("tools", "bench", "__main__"):
        return "tools"
    return "front ends"


def imports(module: str) -> set[str]:
    """The realify modules ``module`` imports anywhere in its text (a ``from X import name`` of a
    submodule ``name`` counts as that submodule)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("realify")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if not target.startswith("realify"):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in MODULES else target)
    return {m for m in found if m in MODULES and m != module}


GRAPH = {m: imports(m) for m in MODULES}


def test_every_import_points_to_the_same_layer_or_below():
    upward = [f"{m} ({layer(m)}) imports {t} ({layer(t)})" for m, targets in GRAPH.items() for t in sorted(targets)
              if t != "realify" and LAYERS.index(layer(t)) < LAYERS.index(layer(m))]
    assert not upward, "imports against the layers:\n" + "\n".join(upward)


def test_the_import_graph_has_no_cycle():
    # the package's own __init__ imports everything it exports; an import of `realify` itself
    # (to reach its public names) is the tools' business and not an edge of the layered graph
    graph = {m: {t for t in ts if t != "realify"} for m, ts in GRAPH.items() if m != "realify"}
    state: dict[str, int] = {}
    cycles = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                cycles.append(" -> ".join([*path[path.index(t):], t]))
            elif t not in state:
                visit(t, [*path, t])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


@pytest.mark.parametrize("folder", ["engine", "passes", "rules", "runtime", "tools", "bench"])
def test_each_folder_says_what_it_holds(folder):
    init = PACKAGE / folder / "__init__.py"
    assert ast.get_docstring(ast.parse(init.read_text())), f"realify/{folder}/__init__.py has no docstring"
