"""python/segops is layered: every import of a segops module (at module
level or inside a function) reaches its own layer or one below, and the
import graph has no cycle. A new module gets a layer here."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "segops"

# Bottom to top.
LAYERS: list[set[str]] = [
    # Native loading, the op library's records, dtypes.
    {"_dtypes", "_bundle", "_extensions", "_library", "_gpusim", "_output_cache"},
    # The op table and argument validation.
    {"_validation", "_op_table"},
    # The library ops.
    {"_columns", "ops", "graph"},
    # segops.jit: tracing, lowering, compiling, widths compiled at run time.
    {"_compiler", "_jit_pointwise", "_jit_trace", "_jit_promote", "_fusion_index",
     "_jit_lengths", "_jit_stages", "_jit", "_wide"},
    # segops.fusion.
    {"_fusion_translate", "_fusion_cluster", "fusion"},
    # segops.export: packaging models for C++.
    {"export"},
    # The package's API.
    {"__init__"},
]


def _layer(module: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if module in layer)


def _imports(path: Path) -> set[str]:
    """The segops modules `path` imports anywhere (extensions excluded)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            if parts[0] != "segops" or parts[1:2] == ["_native"]:
                continue
            if len(parts) > 1:
                found.add(parts[1])
            else:
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "segops" and len(parts) > 1 and parts[1] != "_native":
                    found.add(parts[1])
    return found


def _graph() -> dict[str, set[str]]:
    return {path.stem: _imports(path) - {path.stem} for path in PACKAGE.glob("*.py")}


def test_every_module_has_a_layer() -> None:
    modules = {path.stem for path in PACKAGE.glob("*.py")}
    assert modules == set().union(*LAYERS)


def test_no_import_reaches_a_higher_layer() -> None:
    upward = [(module, target) for module, targets in _graph().items()
              for target in targets if _layer(target) > _layer(module)]
    assert not upward


def test_the_import_graph_has_no_cycle() -> None:
    graph = _graph()
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        assert module not in path, " -> ".join([*path, module])
        if module in done:
            return
        for target in sorted(graph[module]):
            visit(target, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])


def test_no_module_imports_another_modules_private_names() -> None:
    """`from segops.x import _name` and `x._name` of another module are what
    a module's public names are for."""
    offenders = []
    modules = {path.stem for path in PACKAGE.glob("*.py")}
    for path in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.ImportFrom) and node.module
                    and node.module.startswith("segops.") and node.module != "segops._native"):
                offenders += [(path.stem, node.module, a.name) for a in node.names
                              if a.name.startswith("_") and a.name not in modules]
            elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                  and node.value.id in modules and node.value.id != path.stem
                  and node.attr.startswith("_") and not node.attr.startswith("__")):
                offenders.append((path.stem, node.value.id, node.attr))
    assert not offenders
