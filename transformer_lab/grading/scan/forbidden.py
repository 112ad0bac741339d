"""What each exercise may not call, read from the instant checks' source (no torch imported).

Every check lists the references it disables while the student's function runs, as
``Forbidden(label, function=..., codes={...}, builtin_names=(...))`` calls in
``transformer_lab/checks/**/*.py``. The grader needs the same list to flag, in the student's code,
a call of the package's reference for the very thing an exercise asks (which a recompiled copy
can hide from the kernel). Importing the checks would import torch (~2 s per grading process);
reading their syntax tree takes milliseconds and always agrees with the checks as shipped.

    forbidden_table() -> {"softmax": (Rule(label, paths, builtin_names), ...), ...}

``paths`` are dotted names such as ``transformer_lab.attention.softmax`` or
``torch.nn.functional.softmax`` (methods are reduced to their class: ``SelfAttention.forward``
forbids ``transformer_lab.attention.SelfAttention``); ``builtin_names`` are PyTorch built-ins
forbidden under any spelling (``torch.softmax``, ``x.softmax``).
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Rule", "forbidden_table", "checks_dir", "encode_table", "decode_table"]

_METHOD_NAMES = {"forward", "__init__", "generate", "_forward_cached", "to_conv2d", "_ff_block"}


def checks_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "checks"


@dataclass(frozen=True)
class Rule:
    """One forbidden reference: how the checks name it and how code can reach it."""

    label: str
    paths: tuple[str, ...]
    builtin_names: tuple[str, ...]


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Module-level import aliases: {"_ref": "transformer_lab.attention", "F": ...}."""
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _strings(node: ast.AST | None) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for elt in node.elts for s in _strings(elt)]
    return []


def _paths(node: ast.AST | None, env: dict[str, list[str]]) -> list[str]:
    """Dotted names an expression of a checks module can denote (empty: unknown)."""
    if isinstance(node, ast.Name):
        return env.get(node.id, [])
    if isinstance(node, ast.Attribute):
        if node.attr == "__code__":
            return _paths(node.value, env)
        return [f"{base}.{node.attr}" for base in _paths(node.value, env)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
        args = node.args
        if len(args) >= 2:
            names = _strings(args[1]) or env.get(getattr(args[1], "id", ""), [])
            if names == ["__wrapped__"]:
                return _paths(args[0], env)  # getattr(f, "__wrapped__", f): f itself
            return [f"{base}.{n}" for base in _paths(args[0], env) for n in names]
    if isinstance(node, (ast.Set, ast.Tuple, ast.List)):
        return [p for elt in node.elts for p in _paths(elt, env)]
    return []


def _callable_path(path: str) -> str:
    """``pkg.mod.Class.forward`` -> ``pkg.mod.Class`` (using the class is using its method)."""
    head, _, last = path.rpartition(".")
    return (
        head if last in _METHOD_NAMES and head[:1] and head.split(".")[-1][:1].isupper() else path
    )


def _rules_in(body: list[ast.stmt], env: dict[str, list[str]]) -> list[Rule]:
    env = dict(env)
    rules: list[Rule] = []
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                env[target.id] = _paths(node.value, env) or _strings(node.value)
        elif isinstance(node, ast.For) and isinstance(node.target, ast.Name):
            env[node.target.id] = _strings(node.iter)
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Forbidden"):
            continue
        first = node.args[0] if node.args else None
        label = first.value if isinstance(first, ast.Constant) else "a reference of the package"
        kw = {k.arg: k.value for k in node.keywords}
        paths = _paths(kw.get("function"), env) + _paths(kw.get("codes"), env)
        rules.append(
            Rule(
                label,
                tuple(dict.fromkeys(_callable_path(p) for p in paths)),
                tuple(_strings(kw.get("builtin_names"))),
            )
        )
    return rules


class _Module:
    """One checks module: its import aliases and its module-level helpers."""

    def __init__(self, path: Path, root: Path):
        parts = path.relative_to(root).with_suffix("").parts  # ("nb01_self_attention", "softmax")
        self.name = ".".join(("transformer_lab.checks", *parts))
        self.tree = ast.parse(path.read_text(encoding="utf-8"))
        self.env = {k: [v] for k, v in _aliases(self.tree).items()}
        self.helpers: dict[str, list[ast.stmt]] = {}  # name -> statements to read for rules
        for node in self.tree.body:
            if isinstance(node, ast.FunctionDef):
                self.helpers[node.name] = node.body
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    pairs = [(target, node.value)]
                    if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                        pairs = list(zip(target.elts, node.value.elts))  # a, b = x.f, x.g
                    for name, value in pairs:
                        if isinstance(name, ast.Name):
                            self.helpers[name.id] = [node]
                            self.env[name.id] = _paths(value, self.env)


def _label_filter(test: ast.expr, var: str):
    """A predicate on a rule's label for ``[f for f in ... if "x" not in f.label or ...]``."""
    if isinstance(test, ast.BoolOp):
        parts = [_label_filter(v, var) for v in test.values]
        join = all if isinstance(test.op, ast.And) else any
        return lambda label: join(p(label) for p in parts)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _label_filter(test.operand, var)
        return lambda label: not inner(label)
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.In, ast.NotIn))
        and _strings(test.left)
        and ast.unparse(test.comparators[0]) == f"{var}.label"
    ):
        word, negate = _strings(test.left)[0], isinstance(test.ops[0], ast.NotIn)
        return lambda label: (word in label) != negate
    return lambda label: True  # a condition we cannot read: keep the rule (flag more, not less)


def _check_rules(modules: dict[str, _Module], module: _Module, body: list[ast.stmt], seen=None):
    """Rules of one check body: its own, and those of the helpers it names (any module)."""
    seen = set() if seen is None else seen
    rules = _rules_in(body, module.env)
    filtered: dict[str, object] = {}  # helper name -> label filter of a comprehension over it
    for sub in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(sub, ast.ListComp) and len(sub.generators) == 1:
            gen = sub.generators[0]
            if gen.ifs and isinstance(gen.target, ast.Name):
                test = gen.ifs[0] if len(gen.ifs) == 1 else ast.BoolOp(ast.And(), gen.ifs)
                keep = _label_filter(test, gen.target.id)
                for n in ast.walk(gen.iter):
                    if isinstance(n, ast.Name):
                        filtered[n.id] = keep
    for sub in ast.walk(ast.Module(body=body, type_ignores=[])):
        name = getattr(sub, "id", None)
        if name is None:
            continue
        target_module, target_name = module, name
        if name not in module.helpers:  # imported from another checks module?
            origin = module.env.get(name, [""])[0]
            target_module = modules.get(origin.rpartition(".")[0])
            target_name = origin.rpartition(".")[2]
        if target_module is None or target_name not in target_module.helpers:
            continue
        key = (target_module.name, target_name)
        if key in seen:
            continue
        seen.add(key)
        found = _check_rules(modules, target_module, target_module.helpers[target_name], seen)
        keep = filtered.get(name, lambda label: True)
        rules += tuple(r for r in found if keep(r.label))
    return tuple(dict.fromkeys(rules))


def encode_table(table: dict[str, tuple[Rule, ...]]) -> dict:
    """The table as plain JSON data (the grader keeps it on disk: :mod:`.source_facts`)."""
    return {
        name: [[r.label, list(r.paths), list(r.builtin_names)] for r in rules]
        for name, rules in table.items()
    }


def decode_table(data: dict) -> dict[str, tuple[Rule, ...]]:
    """:func:`encode_table`'s data back as the table (raises on anything malformed)."""
    table = {}
    for name, rules in data.items():
        table[str(name)] = tuple(
            Rule(str(label), tuple(map(str, paths)), tuple(map(str, names)))
            for label, paths, names in rules
        )
    return table


@functools.lru_cache(maxsize=2)
def forbidden_table(folder: str | None = None) -> dict[str, tuple[Rule, ...]]:
    """{exercise: forbidden references} for every check that forbids something."""
    root = Path(folder or checks_dir())
    modules = {m.name: m for m in (_Module(p, root) for p in sorted(root.rglob("*.py")))}
    table: dict[str, tuple[Rule, ...]] = {}
    for module in modules.values():
        for node in module.tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("check_"):
                rules = _check_rules(modules, module, node.body, {(module.name, node.name)})
                if rules:
                    table[node.name[len("check_") :]] = rules
    return table
