"""Review flags from reading the student's code (in the grader, where the student cannot reach).

The kernel reports what it saw (``checks.engine.grading_hooks.findings``), but a student who controls the
kernel can silence it. What the student *wrote* cannot be hidden from the grader:
:func:`scan_submission` reads every file the kernel could execute (every code cell of every
notebook in the submission folder, and every ``.py``, ``.pth``, ``.txt`` and ``.json`` file
beside it, never following a symlink), NFKC-normalised as Python itself reads identifiers,
so ``ｉｎｓｐｅｃｔ.ｓｔａｃｋ()`` is read as ``inspect.stack()``. Cells exactly as released
(the instructor's code) are skipped. It names, with the file, cell and line:

- dynamic code (``exec``, ``eval``, ``compile``, ``runpy``, ``importlib``, ``marshal``, ...),
  frame and garbage-collector introspection, IPython hooks and input transformers, trace and
  audit hooks, reading the package's source files, touching the checks' internals;
- the package's reference (or PyTorch's built-in) for what an exercise asks, used in that
  exercise's answer or in code the answer reaches (the list comes from the instant checks'
  ``Forbidden(...)`` declarations: :mod:`.forbidden`);
- an answer that is structurally a copy of the package's source (:mod:`.similarity`);
- files beside the notebook that would be imported instead of an installed module, compiled
  files, files too large to read (:mod:`._review_files`);
- the older patterns: patched modules, threads, files, processes, network, ... (:data:`PATTERNS`).

Which cells are the student's, and which exercises each answers, is :mod:`._review_cells`.

A flag is for a person to look at, never a lost point: the submission is marked needs_review
and keeps its score until someone has looked.
"""

from __future__ import annotations

import functools
from pathlib import Path

from transformer_lab.grading.scan import _cells as _review_cells
from transformer_lab.grading.scan import _files as _review_files
from transformer_lab.grading.scan import _names as _review_names
from transformer_lab.grading.scan import _rules as _review_rules
from transformer_lab.grading.scan import _tree as _review_tree
from transformer_lab.grading.scan import forbidden as _forbidden
from transformer_lab.grading.scan import similarity as _similarity
from transformer_lab.grading.scan import source_facts as _facts

PATTERNS = _review_rules.PATTERNS
MAX_FILE_BYTES = _review_files.MAX_FILE_BYTES
student_cells = _review_cells.student_cells  # re-exported from :mod:`._review_cells`

__all__ = [
    "PATTERNS",
    "SIMILARITY_THRESHOLD",
    "scan_source",
    "student_cells",
    "scan_notebook",
    "scan_submission",
]

# A student's function or class is flagged as a copy of the package when at least this share
# of its winnowed fingerprints is found in one unit of the package's source, and it has at
# least MIN_FLAG_FINGERPRINTS of them. Calibrated in tests/test_grading_review.py (run it as a
# script for the table): honest alternatives (loops, einsum) reach at most 0.32, the 1,188
# students' mistakes of tests/holdout (written from the notebooks alone) 0.91; the solutions'
# own answers up to 0.91 (softmax 0.91, causal_lm_loss 0.86, merge_heads 0.83: several were
# written close to the package's code); verbatim, renamed, reflowed and full-width copies of all
# 25 references 1.00; copies with the validation also cut out 0.50-1.00 (12 of 25 flagged).
SIMILARITY_THRESHOLD = 0.95
MIN_FLAG_FINGERPRINTS = 12


def scan_source(source: str) -> list[str]:
    """The flags one cell's source raises (each with its line), without exercise context."""
    return [f"line {line}: {why}: `{text}`" for line, why, text in _findings(source)]


def _findings(source: str, context: dict | None = None) -> list[tuple[int, str, str]]:
    """(line, why, the line's code), from the tree reader and the text patterns."""
    text = _similarity.normalise(source)
    tree_found = _review_tree.python_findings(text, source, context or {})
    found = tree_found or []
    by_tree = {line for line, _, _ in found}
    # A line the tree reader explained needs no vaguer text-pattern flag as well.
    regex = _review_rules.regex_findings(text, parsed=tree_found is not None)
    found += [f for f in regex if f[0] not in by_tree]
    merged: dict[tuple[int, str], tuple[list[str], str]] = {}
    for line, why, snippet in sorted(found):
        head, detail = _split(why)
        details, _ = merged.setdefault((line, head), ([], snippet[:100]))
        if detail and detail not in details:
            details.append(detail)
    return [
        (line, f"{head} ({', '.join(details)})" if details else head, snippet)
        for (line, head), (details, snippet) in sorted(merged.items())
    ]


_HEADS = (
    _review_rules.DYNAMIC,
    _review_rules.FRAMES,
    _review_rules.HOOKS,
    _review_rules.SOURCE,
    _review_rules.INTERNALS,
    _review_tree.LOOKALIKE,
)


def _split(why: str) -> tuple[str, str]:
    """ "category (detail)" -> (category, detail), so one line gets one flag per category."""
    for head in _HEADS:
        if why.startswith(head + " (") and why.endswith(")"):
            return head, why[len(head) + 2 : -1]
    return why, ""


def scan_notebook(nb, released) -> list[str]:
    """Flags for every student-written cell of ``nb`` (``released``: the student version)."""
    return _scan(
        _review_cells.notebook_sources("notebook", nb, released),
        [nb, released],
        {"notebook": released},
    )


def scan_submission(folder, released_notebooks: dict) -> list[str]:
    """Review flags, with evidence, for everything in a submission folder the kernel could run.

    Args:
        folder: the student's submission folder (or its sealed copy).
        released_notebooks: {notebook name without .ipynb: released notebook (nbformat or dict)}.
    Returns:
        Human-readable flags such as
        ``"01_self_attention.ipynb cell 7 (softmax_impl) line 3: reads the call stack
        (inspect.stack): `frames = inspect.stack()`"``. Never raises for what a submission
        holds: a failure of the scan itself is returned as a flag.
    """
    try:
        return _scan_submission(Path(folder), released_notebooks)
    except Exception as exc:  # a grader must grade the others whatever one submission holds
        return [f"the code scan failed ({type(exc).__name__}: {exc}): review the code by hand"]


def _scan_submission(root: Path, released_notebooks: dict) -> list[str]:
    sources: list[_review_cells.Source] = []
    notes: list[str] = []
    notebooks = list(released_notebooks.values())
    for path in _review_files.files(root, notes):
        rel = path.relative_to(root).as_posix()
        if path.suffix in _review_files.COMPILED_SUFFIXES:
            notes.append(f"{rel}: compiled code beside the notebook (importable, not readable)")
            continue
        if path.suffix == ".ipynb":
            nb = _review_files.read_notebook(path)
            if nb is None:  # not a notebook: read as text
                sources.append(
                    _review_cells.Source(rel, path.read_text(encoding="utf-8", errors="replace"))
                )
                continue
            notebooks.append(nb)
            released = released_notebooks.get(path.stem)
            if released is None:  # another notebook: matched by content to any released one
                released = {
                    "cells": [
                        c for r in released_notebooks.values() for c in _review_cells.cells(r)
                    ]
                }
            sources.extend(_review_cells.notebook_sources(rel, nb, released))
        else:
            sources.append(
                _review_cells.Source(rel, path.read_text(encoding="utf-8", errors="replace"))
            )
    course = [
        _review_cells.source_of(c)
        for nb in released_notebooks.values()
        for c in _review_cells.cells(nb)
    ]
    notes += _review_files.shadowing(root, _review_files.imported_modules(course))
    return notes + _scan(sources, notebooks, released_notebooks)


def _scan(sources: list[_review_cells.Source], notebooks: list, released: dict) -> list[str]:
    """Flags for ``sources``; ``notebooks`` give the imports, ``released`` the instructor's code."""
    trees = [
        _review_names.parse(_similarity.normalise(_review_cells.source_of(c)))
        for nb in notebooks
        if nb is not None
        for c in _review_cells.cells(nb)
        if c.get("cell_type") == "code"
    ]
    context = {
        "aliases": _review_names.aliases_of(trees),  # every import of the notebooks counts
        "pool": _review_tree.definitions(
            [(s.where, s.text) for s in sources]
            + [
                pair
                for name, nb in released.items()
                for pair in _review_cells.instructor_code(name, nb)
            ]
        ),
        "table": _forbidden_table(),
        "reexports": _reexports(),
        "elsewhere": [],  # (where, line, why, code): found in code an answer reaches
    }
    flags: list[str] = []
    for source in sources:
        context.update(answer_to=source.answer_to, where=source.where)
        try:
            for line, why, snippet in _findings(source.text, context):
                flags.append(f"{source.where} line {line}: {why}: `{snippet}`")
            flags.extend(_copies(source))
        except (RecursionError, MemoryError, ValueError, SyntaxError) as exc:
            # e.g. expressions nested thousands deep: never let a submission stop the grader
            flags.append(
                f"{source.where}: the code scan could not read it "
                f"({type(exc).__name__}): review by hand"
            )
    for where, line, why, snippet in context["elsewhere"]:
        flags.append(f"{where} line {line}: {why}: `{snippet[:100]}`")
    return list(dict.fromkeys(flags))


_REEXPORTS: dict[str, str] = {}


@functools.lru_cache(maxsize=1)  # once per process: every submission's scan reads it
def _forbidden_table() -> dict:
    """What each exercise forbids, read once per version of the package (:mod:`.source_facts`)."""
    return _facts.cached(
        "forbidden", _forbidden.forbidden_table, _forbidden.encode_table, _forbidden.decode_table
    )


def _reexports() -> dict[str, str]:
    """The package's re-exports, read once per version of the package (:mod:`.source_facts`)."""
    if not _REEXPORTS:
        _REEXPORTS.update(
            _facts.cached(
                "reexports",
                lambda: _review_names.reexports(_similarity.package_sources()),
                dict,
                lambda data: {str(k): str(v) for k, v in data.items()},
            )
        )
    return _REEXPORTS


def _copies(source: _review_cells.Source) -> list[str]:
    """Units of ``source`` that are structural copies of the package's source."""
    out = []
    for unit in _similarity.units_of(source.text, source.where):
        if unit.size < MIN_FLAG_FINGERPRINTS:
            continue
        match = _similarity.best_match(unit)
        if match is not None and match.containment >= SIMILARITY_THRESHOLD:
            out.append(match.describe())
    return out
