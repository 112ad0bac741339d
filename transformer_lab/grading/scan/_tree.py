"""The syntax-tree reader of the code scan: names resolved through imports, then the rules.

``from inspect import stack as s; s()`` is read as ``inspect.stack``, ``F.softmax`` as
``torch.nn.functional.softmax`` and ``transformer_lab.softmax`` as the package's
``transformer_lab.attention.softmax`` (through its re-exports, :mod:`._review_names`), so
renaming hides nothing. The imports of every cell of the notebook count (the instructor's setup
cell imports ``torch`` and ``F``), and an exercise's answer is read together with the student's
code it reaches by name (a helper cell, a ``helpers.py``).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import unicodedata

from transformer_lab.grading.scan import _rules as rules
from transformer_lab.grading.scan._names import aliases_of, canonical, parse, paths_of, string_of

__all__ = ["definitions", "python_findings"]

LOOKALIKE = "writes names in look-alike Unicode characters"
NOT_TORCH = ("numpy", "scipy", "math", "jax", "tensorflow")


def _matches(path: str, table: dict[str, str]) -> str | None:
    if path.startswith(("transformer_lab.checks._", "transformer_lab.checks.engine")):  # private
        return rules.INTERNALS
    parts = path.split(".")
    for n in range(len(parts), 0, -1):
        why = table.get(".".join(parts[:n]))
        if why:
            return why
    return None


def _why(path: str, rex: dict[str, str]) -> str | None:
    """What using ``path`` means; a public name the checks re-export from a private module
    (``checks.diagnose`` is ``checks.engine.api.diagnose``) is public."""
    why = _matches(canonical(path, rex), rules.DOTTED)
    if why == rules.INTERNALS and _matches(path, rules.DOTTED) != rules.INTERNALS:
        return None
    return why


def _general(tree: ast.Module, text: str, aliases, rex) -> list[tuple[int, str, str]]:
    out = []
    docstrings = {
        id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and string_of(n.value)
    }
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        found: list[tuple[str, str]] = []
        if isinstance(node, ast.Import):
            found += [(a.name, _matches(a.name, rules.DOTTED)) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [f"{node.module}.{a.name}" for a in node.names]
            found += [(p, _why(p, rex)) for p in names]
        elif isinstance(node, (ast.Name, ast.Attribute, ast.Call)):
            found += [(p, _why(p, rex)) for p in paths_of(node, aliases)]
            if isinstance(node, ast.Attribute) and node.attr in rules.ATTRIBUTES:
                found.append((f".{node.attr}", rules.ATTRIBUTES[node.attr]))
            if isinstance(node, ast.Attribute) and node.attr == "register":
                if getattr(node.value, "attr", None) == "events":  # IPython's event callbacks
                    found.append((".events.register", rules.HOOKS))
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") in (
                "getattr",
                "setattr",
            ):
                attr = string_of(node.args[1]) if len(node.args) > 1 else None
                if attr in rules.ATTRIBUTES:
                    found.append((f".{attr}", rules.ATTRIBUTES[attr]))
                elif len(node.args) > 1 and attr is None:  # getattr(inspect, "st" + "ack")
                    found.append((node.func.id, "reads or changes an attribute by a computed name"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings and node.value in rules.NAMES_AS_TEXT:
                found.append((repr(node.value), rules.NAMES_AS_TEXT[node.value]))
            if id(node) not in docstrings:
                found += [
                    (repr(node.value[:40]), why)
                    for pattern, why in rules.STRINGS
                    if re.search(pattern, node.value)
                ]
        out += [(line, f"{why} ({what})", rules._line(text, line)) for what, why in found if why]
    return out


def _lookalikes(raw: str) -> list[tuple[int, str, str]]:
    """Identifiers written with compatibility characters (Python reads them NFKC-normalised):
    one finding for the whole source, at the first such line, naming a few of them."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(raw).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []
    names: dict[str, str] = {}
    lines: list[int] = []
    for tok in tokens:
        if tok.type == tokenize.NAME and not tok.string.isascii():
            plain = unicodedata.normalize("NFKC", tok.string)
            if plain != tok.string and plain.isascii():
                names.setdefault(tok.string, plain)
                lines += [] if tok.start[0] in lines else [tok.start[0]]
    if not names:
        return []
    shown = ", ".join(f"`{w}` is read as `{p}`" for w, p in list(names.items())[:4])
    more = f" and {len(names) - 4} more" if len(names) > 4 else ""
    where = f"on {len(lines)} line(s): {', '.join(map(str, lines[:8]))}"
    why = f"{LOOKALIKE} ({shown}{more}; {where})"
    return [(lines[0], why, _raw_line(raw, lines[0]))]


def _raw_line(raw: str, lineno: int) -> str:
    return rules._line(raw, lineno)


def definitions(sources: list[tuple[str, str]]) -> dict[str, list[tuple[str, ast.stmt, str]]]:
    """{name: [(where, top-level statement defining it, its source's text)]} for the pool."""
    pool: dict[str, list[tuple[str, ast.stmt, str]]] = {}
    for where, raw in sources:
        text = unicodedata.normalize("NFKC", raw)
        tree = parse(text)
        for stmt in tree.body if tree else ():
            for name in _defined(stmt):
                pool.setdefault(name, []).append((where, stmt, text))
    return pool


def _defined(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return [a.asname or a.name.split(".")[0] for a in stmt.names]
    targets = getattr(stmt, "targets", None) or [getattr(stmt, "target", None)]
    return [n.id for t in targets if t is not None for n in ast.walk(t) if isinstance(n, ast.Name)]


def _used(node: ast.AST) -> set[str]:
    """Names a statement reads but does not bind itself (its free names, roughly)."""
    read, bound = set(), set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            (read if isinstance(n.ctx, ast.Load) else bound).add(n.id)
        elif isinstance(n, ast.Attribute):
            read.add(n.attr)  # helpers.fast_softmax reaches a helper file's fast_softmax
        elif isinstance(n, ast.arg):
            bound.add(n.arg)
    return read - bound


def _exercise(tree, where, text, exercise, context) -> list[tuple[int, str, str]]:
    """Uses of what ``exercise`` forbids, in its answer or in the student code it reaches."""
    rex, aliases = context["reexports"], context["aliases"]
    forbidden = context["table"].get(exercise, ())
    targets: dict[str, str] = {}  # path -> the checks' label(s) for it
    for r in forbidden:
        for p in r.paths:
            key = canonical(p, rex)
            if r.label not in targets.get(key, ""):
                targets[key] = f"{targets[key]} / {r.label}" if key in targets else r.label
    builtins = {b: r.label for r in forbidden for b in r.builtin_names}
    reached = [(where, stmt, text) for stmt in tree.body]
    seen = {id(stmt) for stmt in tree.body}
    todo = set().union(*(_used(s) for s in tree.body)) if tree.body else set()
    done: set[str] = set()
    while todo:
        name = todo.pop()
        done.add(name)
        for entry in context["pool"].get(name, ()):
            if id(entry[1]) not in seen:
                seen.add(id(entry[1]))
                reached.append(entry)
                todo |= _used(entry[1]) - done
    out = []
    for src_where, stmt, src_text in reached:
        for node in ast.walk(stmt):
            label = None
            for p in paths_of(node, aliases) if isinstance(node, (ast.Name, ast.Attribute)) else ():
                p = canonical(p, rex)
                label = label or next(
                    (targets[t] for t in targets if p == t or p.startswith(t + ".")), None
                )
                if p.startswith("torch") and p.rpartition(".")[2] in builtins:
                    label = label or builtins[p.rpartition(".")[2]]
            if isinstance(node, ast.Attribute) and node.attr in builtins:
                bases = {canonical(b, rex) for b in paths_of(node.value, aliases)}
                if not any(b.startswith(NOT_TORCH) for b in bases):
                    label = label or builtins[node.attr]
            if label:
                why = f"uses {label}, which the exercise `{exercise}` forbids"
                found = (node.lineno, why, rules._line(src_text, node.lineno))
                if src_where == where:
                    out.append(found)
                else:  # reported where it is, naming the answer that reaches it
                    why += f" (reached from the answer in {where})"
                    context["elsewhere"].append((src_where, found[0], why, found[2]))
    return out


def python_findings(text: str, raw: str, context: dict) -> list[tuple[int, str, str]] | None:
    """Findings of the tree reader for one source (None: the text is not Python)."""
    tree = parse(text)
    if tree is None:
        return None
    rex = context.get("reexports") or {}
    aliases = aliases_of([tree])
    for local, dotted in context.get("aliases", {}).items():
        aliases.setdefault(local, set()).update(dotted)
    context = {**context, "aliases": aliases, "reexports": rex}
    out = _general(tree, text, aliases, rex) + _lookalikes(raw)
    for exercise in context.get("answer_to", ()):
        out += _exercise(tree, context.get("where", ""), text, exercise, context)
    return out
