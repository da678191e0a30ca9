"""Imports run one way (ARCHITECTURE.md, "The layers, and what each may import"):
collectors <- warehouse <- models <- reports <- (joulehouse.daily, joulehouse.cli, dags), and no
two modules import each other, even inside a function or under TYPE_CHECKING. Read from the
source with ast, so an import that runs only on some path counts too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = {"collectors": "joulehouse.collectors", "warehouse": "joulehouse.warehouse", "models": "joulehouse.models",
           "reports": "joulehouse.reports", "dags": "joulehouse.dags", "joulehouse": "joulehouse"}
# What each layer may import of the package (itself included); anything else is an arrow the wrong way.
ALLOWED = {
    "joulehouse.collectors": ("joulehouse.collectors",),
    "joulehouse.warehouse": ("joulehouse.collectors", "joulehouse.warehouse"),
    "joulehouse.models": ("joulehouse.collectors", "joulehouse.warehouse", "joulehouse.models"),
    "joulehouse.reports": ("joulehouse.collectors", "joulehouse.warehouse", "joulehouse.models", "joulehouse.reports"),
}
# Arrows the wrong way that are known, each with why it is still there; a new one fails the test.
KNOWN = {
    ("joulehouse.warehouse.spark_engine", "joulehouse.models.settings"):
        "the Spark engine computes the power fit's training sums (the models' work) in the warehouse layer, "
        "so it reads the fit's window from [models]",
}


def _modules() -> dict[str, Path]:
    found = {}
    for folder, package in FOLDERS.items():
        for path in (REPO / folder).rglob("*.py"):
            parts = list(path.relative_to(REPO / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def _imports(path: Path) -> set[str]:
    """The package's modules that the file imports, at any depth of its code."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert not node.level, f"{path}: relative import; the package imports by its full names"
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return {n for n in names if n == "joulehouse" or n.startswith("joulehouse.")}


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = _modules()
    return {m: {n for n in _imports(p) if n in modules and n != m} for m, p in modules.items()}


def test_each_layer_imports_only_the_layers_below_it(graph):
    wrong = sorted(f"{m} imports {n}" for m, deps in graph.items() for n in deps
                   for layer, allowed in ALLOWED.items()
                   if (m == layer or m.startswith(layer + ".")) and not any(n == a or n.startswith(a + ".") for a in allowed)
                   and (m, n) not in KNOWN)
    assert not wrong, "\n".join(wrong)


def test_no_two_modules_import_each_other(graph):
    def cycle_from(start: str) -> list[str] | None:
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph[node]):
                if nxt == start:
                    return path + [start]
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))
        return None

    cycles = {" -> ".join(c) for m in sorted(graph) if (c := cycle_from(m))}
    assert not cycles, "\n".join(sorted(cycles))
