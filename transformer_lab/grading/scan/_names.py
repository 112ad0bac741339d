"""Names in the code scan's syntax trees, resolved through imports and the package's re-exports.

``from inspect import stack as s; s()`` is read as ``inspect.stack``, ``F.softmax`` as
``torch.nn.functional.softmax`` and ``transformer_lab.softmax`` as the package's
``transformer_lab.attention.softmax``: :func:`aliases_of` collects what each local name may
stand for, :func:`reexports` what the package's names stand for, :func:`paths_of` the dotted
names an expression may mean and :func:`canonical` their place of definition. The rules that
read these names are :mod:`._review_tree`.
"""

from __future__ import annotations

import ast

from transformer_lab.grading.scan import _rules as rules

__all__ = ["parse", "aliases_of", "reexports", "canonical", "paths_of", "string_of"]

DEFAULT_ALIASES = {
    "torch": {"torch"},
    "F": {"torch.nn.functional"},
    "nn": {"torch.nn"},
    "np": {"numpy"},
    "math": {"math"},
    "transformer_lab": {"transformer_lab"},
}
BUILTINS = {
    *("exec", "eval", "compile", "__import__", "execfile", "get_ipython", "breakpoint"),
    "__builtins__",
}


def parse(text: str) -> ast.Module | None:
    """The tree of NFKC-normalised ``text`` with IPython lines blanked (None: not Python)."""
    python = "".join("\n" if rules._MAGIC.match(ln) else ln for ln in text.splitlines(True))
    try:
        return ast.parse(python)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None  # nested too deep for the parser: the text patterns read it


def _imports(tree: ast.AST) -> list[tuple[str, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out.append(
                    (a.asname or a.name.split(".")[0], a.name if a.asname else a.name.split(".")[0])
                )
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.extend((a.asname or a.name, f"{node.module}.{a.name}") for a in node.names)
    return out


def aliases_of(trees) -> dict[str, set[str]]:
    """{local name: dotted names it may stand for} from every import in ``trees``."""
    out = {k: set(v) for k, v in DEFAULT_ALIASES.items()}
    for tree in trees:
        if tree is not None:
            for local, dotted in _imports(tree):
                out.setdefault(local, set()).add(dotted)
    return out


def reexports(package_sources: dict[str, str]) -> dict[str, str]:
    """{"transformer_lab.softmax": "transformer_lab.attention.softmax", ...} (module level)."""
    out: dict[str, str] = {}
    for label, text in package_sources.items():
        module = label[: -len(".py")].replace("/", ".").removesuffix(".__init__")
        package = module if label.endswith("__init__.py") else module.rpartition(".")[0]
        tree = parse(text)
        for node in tree.body if tree else ():
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                if base.startswith("transformer_lab"):
                    for a in node.names:
                        out[f"{module}.{a.asname or a.name}"] = f"{base}.{a.name}"
    return out


def canonical(path: str, rex: dict[str, str]) -> str:
    """``path`` followed through the package's re-exports to where it is defined."""
    for _ in range(8):
        parts = path.split(".")
        for n in range(len(parts), 1, -1):
            head = ".".join(parts[:n])
            if head in rex and rex[head] != head:
                path = ".".join([rex[head], *parts[n:]])
                break
        else:
            return path
    return path


def paths_of(node: ast.AST, aliases: dict[str, set[str]]) -> set[str]:
    """The dotted names ``node`` may stand for (a name, an attribute, ``getattr``, ``__import__``)."""
    if isinstance(node, ast.Name):
        return aliases.get(node.id) or ({node.id} if node.id in BUILTINS else set())
    if isinstance(node, ast.Attribute):
        return {f"{p}.{node.attr}" for p in paths_of(node.value, aliases)}
    if isinstance(node, ast.Call) and node.args:
        name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
        text = string_of(node.args[1] if name == "getattr" and len(node.args) > 1 else node.args[0])
        if name == "getattr" and text:
            return {f"{p}.{text}" for p in paths_of(node.args[0], aliases)}
        if name in ("__import__", "import_module") and text:
            return {text}
    return set()


def string_of(node: ast.AST) -> str | None:
    """The value of a string constant (None for any other node)."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
