"""The package's import graph has no cycle, read from the source (ast), imports inside functions
included: a module that needs another only inside a function is still tied to it.

Importing ``a.b.c`` also runs ``a/__init__.py`` and ``a/b/__init__.py``; those implicit edges are
left out (a package's ``__init__`` importing its own modules is not a cycle), the explicit ones
(``from transformer_lab.models import GPT`` is an edge to ``transformer_lab.models``) are kept.
Imports under ``if TYPE_CHECKING:`` never run and are left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "transformer_lab"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skipped


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``name`` imports explicitly."""
    tree = ast.parse(path.read_text())
    skipped = _type_checking_nodes(tree)
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else base)
    return {m for m in found if m in modules and m != name}


def graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_package_has_no_import_cycle():
    found = cycles(graph())
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_cycle_finder_sees_a_cycle_through_a_function_level_import(tmp_path):
    a = "from transformer_lab.b import f\n"
    b = "def f():\n    from transformer_lab.a import g\n"
    c = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from transformer_lab.a import g\n"
    for name, text in {"a": a, "b": b, "c": c}.items():
        (tmp_path / f"{name}.py").write_text(text)
    modules = {f"transformer_lab.{n}": tmp_path / f"{n}.py" for n in "abc"}
    edges = {n: imports_of(n, p, modules) for n, p in modules.items()}
    assert edges["transformer_lab.c"] == set()
    assert cycles(edges) == [["transformer_lab.a", "transformer_lab.b"]]


def test_the_graph_reads_relative_and_package_imports():
    edges = graph()
    assert "transformer_lab.models.gpt_config" in edges["transformer_lab.models.gpt"]
    assert (
        "transformer_lab.checks.engine.core"
        in edges["transformer_lab.checks.nb01_self_attention.softmax"]
    )
    assert "transformer_lab.attention" in edges["transformer_lab"]


CORE = ("attention", "heads", "positional", "masks", "blocks", "models", "tiled", "gqa",
        "interpret", "bert_inputs", "_validate")  # fmt: skip
SUPPORT = ("checks", "grading", "widgets", "data", "train", "checkpoints", "pretrained")


def test_the_core_package_imports_nothing_of_the_course_support():
    edges = graph()
    core = [m for m in edges if m.split(".")[1:2] and m.split(".")[1] in CORE]
    assert len(core) > 10
    bad = {
        m: sorted(t for t in edges[m] if t.split(".")[1:2] and t.split(".")[1] in SUPPORT)
        for m in core
    }
    assert not {m: t for m, t in bad.items() if t}
