"""Structural similarity of a student's code to the package's own source (token winnowing).

The package ships its references, so a student can retype one, rename its variables, reflow it
or disguise it with Unicode look-alikes (``ｓｏｆｔｍａｘ``, which Python reads as ``softmax``).
What survives all of these is the sequence of token *kinds*:

1. NFKC-normalise the text (Python does the same to identifiers), drop comments and docstrings;
2. tokenize with Python's :mod:`tokenize`; the student's own names become ``V``, numbers ``N``,
   strings ``S``; keywords, operators, attribute names after a dot (``.amax``, ``.transpose``)
   and the names of well-known modules and built-ins (``torch``, ``math``, ``range``) stay;
3. hash every run of ``K`` tokens and keep, in each window of ``W`` consecutive hashes, the
   smallest (winnowing: Schleimer, Wilkerson and Aiken, SIGMOD 2003, the algorithm of MOSS).
   Any shared run of at least ``W + K - 1`` tokens is guaranteed to share a fingerprint.

``containment`` is the share of the student's fingerprints found in one unit of the package
(a function, method or class); ``jaccard`` is shared over union. Both are in [0, 1].

Nothing here imports torch or the package: the grader reads the package's files as text.
Steps 1-3 are :mod:`.winnowing` (its names are re-exported here); this module cuts code into
units, indexes the package's units and finds a student unit's best match.
"""

from __future__ import annotations

import ast
import bisect
import functools
from dataclasses import dataclass
from pathlib import Path

from transformer_lab.grading.scan import source_facts as _facts
from transformer_lab.grading.scan.winnowing import (
    K,
    W,
    _python_lines,
    fingerprints,
    normalise,
    token_kinds,
)

__all__ = [
    "K",
    "W",
    "Unit",
    "Match",
    "normalise",
    "token_kinds",
    "fingerprints",
    "units_of",
    "package_sources",
    "package_units",
    "best_match",
]

MIN_FINGERPRINTS = 6  # shorter units (one-liners) carry too little evidence to compare

PACKAGE = Path(__file__).resolve().parents[2]  # transformer_lab/
_SKIPPED_PARTS = {"grading", "widgets", "train", "__pycache__"}  # no exercise's reference


@dataclass(frozen=True)
class Unit:
    """One function, method or class: where it is and its fingerprints."""

    name: str  # "softmax", "MultiHeadAttention.forward"
    where: str  # "transformer_lab/attention.py:24", "helpers.py:3", "nb.ipynb cell 7 line 1"
    prints: frozenset[int]
    lines: dict  # hash -> line number (evidence)

    @property
    def size(self) -> int:
        return len(self.prints)


def units_of(source: str, where: str, line_offset: int = 0) -> list[Unit]:
    """Every function, method and class defined in ``source`` (the whole text if unparsable).

    Each top-level definition is first rewritten in canonical form (``ast.unparse`` without
    docstrings), so parentheses, line breaks, quotes and trailing commas do not count.
    ``where`` names the file (or cell); each unit's ``where`` adds its first line.
    """
    text = _python_lines(normalise(source))
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        kinds = token_kinds(source)
        return [_unit("<unparsable>", f"{where} line {1 + line_offset}", kinds, line_offset)]
    _drop_docstrings(tree)
    out = []
    for top, qualname in _definitions(tree):
        if "." in qualname:
            continue  # nested definitions are cut from their top-level definition below
        try:
            canon, again, to_source = _canonical(top)
        except (RecursionError, SyntaxError, ValueError):  # too deep to rewrite: as written
            canon, again, to_source = ast.get_source_segment(text, top) or "", top, int
            again = ast.parse(canon).body[0] if canon else top
        canon_kinds = token_kinds(canon)
        kinds = [(k, to_source(ln)) for k, ln in canon_kinds]
        canon_lines = [ln for _, ln in canon_kinds]
        for node, name in [(again, qualname), *_definitions(again, qualname + ".")]:
            lo = bisect.bisect_left(canon_lines, node.lineno)
            inside = kinds[lo : bisect.bisect_right(canon_lines, node.end_lineno, lo)]
            start = to_source(node.lineno)
            out.append(_unit(name, f"{where} line {start + line_offset}", inside, line_offset))
    return out


def _drop_docstrings(tree: ast.AST) -> None:
    """Remove every docstring from ``tree`` (in place): documentation is not code."""
    for sub in ast.walk(tree):
        body = getattr(sub, "body", None)
        if (
            isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            sub.body = body[1:] or [ast.Pass(lineno=body[0].lineno, col_offset=0)]


def _canonical(clean: ast.AST):
    """(canonical text of ``clean``, its re-parsed tree, canonical line -> source line)."""
    canon = ast.unparse(clean)
    again = ast.parse(canon).body[0]
    pairs = sorted(
        {
            (b.lineno, a.lineno)
            for a, b in zip(ast.walk(clean), ast.walk(again))
            if isinstance(a, ast.stmt) and type(a) is type(b)
        }
    )
    starts = [c for c, _ in pairs]

    def to_source(line: int) -> int:
        i = bisect.bisect_right(starts, line) - 1
        return pairs[max(i, 0)][1] if pairs else line

    return canon, again, to_source


def _definitions(tree: ast.AST, prefix: str = ""):
    """(node, qualified name) of every def and class, nested ones too (statements only)."""
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    for field in ("body", "orelse", "finalbody", "handlers", "cases"):
        for node in getattr(tree, field, None) or ():
            if isinstance(node, defs):
                qualname = f"{prefix}{node.name}"
                yield node, qualname
                yield from _definitions(node, qualname + ".")
            elif isinstance(node, ast.AST):
                yield from _definitions(node, prefix)


def _unit(name: str, where: str, kinds: list[tuple[str, int]], line_offset: int) -> Unit:
    prints = fingerprints(kinds)
    return Unit(name, where, frozenset(prints), {h: ln + line_offset for h, ln in prints.items()})


@functools.lru_cache(maxsize=4)
def package_sources(root: str = str(PACKAGE)) -> dict[str, str]:
    """{"transformer_lab/attention.py": text} for every module of the package but the grader."""
    base = Path(root)
    return {
        f"{base.name}/{path.relative_to(base).as_posix()}": path.read_text(encoding="utf-8")
        for path in sorted(base.rglob("*.py"))
        if not _SKIPPED_PARTS.intersection(path.relative_to(base).parts)
    }


@functools.lru_cache(maxsize=4)
def package_units(root: str = str(PACKAGE)) -> tuple[Unit, ...]:
    """Every function, method and class of the package's source (the grader excepted).

    Computed once per version of the package and kept on disk (:mod:`.source_facts`)."""

    def compute() -> tuple[Unit, ...]:
        out: list[Unit] = []
        for label, text in package_sources(root).items():
            out.extend(u for u in units_of(text, label) if u.size)
        return tuple(out)

    return _facts.cached("units", compute, _encode_units, _decode_units, root)


def _encode_units(units: tuple[Unit, ...]) -> list:
    return [[u.name, u.where, sorted(u.lines.items())] for u in units]


def _decode_units(data: list) -> tuple[Unit, ...]:
    if not data:
        raise ValueError("no units")  # the package always has some
    units = []
    for name, where, pairs in data:
        lines = {int(h): int(ln) for h, ln in pairs}
        if not (isinstance(name, str) and isinstance(where, str) and lines):
            raise ValueError("malformed unit")
        units.append(Unit(name, where, frozenset(lines), lines))
    return tuple(units)


@functools.lru_cache(maxsize=4)
def _index(root: str) -> dict[int, list[int]]:
    index: dict[int, list[int]] = {}
    for i, unit in enumerate(package_units(root)):
        for h in unit.prints:
            index.setdefault(h, []).append(i)
    return index


@dataclass(frozen=True)
class Match:
    """How much of a student's unit is found in one unit of the package."""

    student: Unit
    reference: Unit
    shared: int
    containment: float  # shared / student's fingerprints
    jaccard: float  # shared / union

    def describe(self) -> str:
        lines = sorted(self.student.lines[h] for h in self.student.prints & self.reference.prints)
        return (
            f"`{self.student.name}` ({self.student.where}) matches the package's reference "
            f"source `{self.reference.name}` ({self.reference.where}): "
            f"{self.containment:.0%} of its fingerprints ({self.shared} of {self.student.size}), "
            f"Jaccard {self.jaccard:.2f}; shared code starts on lines "
            f"{', '.join(str(n) for n in sorted(set(lines))[:6])}"
        )


def best_match(unit: Unit, root: str = str(PACKAGE)) -> Match | None:
    """The package unit sharing the largest share of ``unit``'s fingerprints (None: nothing)."""
    if unit.size < MIN_FINGERPRINTS:
        return None
    refs = package_units(root)
    counts: dict[int, int] = {}
    index = _index(root)
    for h in unit.prints:
        for i in index.get(h, ()):
            counts[i] = counts.get(i, 0) + 1
    if not counts:
        return None

    def score(i: int) -> tuple[float, float]:
        union = unit.size + refs[i].size - counts[i]
        return counts[i] / unit.size, counts[i] / union

    i = max(counts, key=lambda j: (score(j), -refs[j].size))
    containment, jaccard = score(i)
    return Match(unit, refs[i], counts[i], containment, jaccard)
