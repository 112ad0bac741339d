"""Author nbgrader notebooks with cell tags: ``tlab author [PATHS] [--check]``.

Writing nbgrader's cell metadata by hand is error-prone (schema 3 allows no extra keys, every
graded cell needs a unique ``grade_id`` and test cells need ``points``). Authors instead tag
cells (JupyterLab: property inspector, "Cell Tags") and let ``tlab author`` write the metadata:

    solution        answer cell; a code cell must contain ``### BEGIN SOLUTION`` / ``### END SOLUTION``
    tests:N         graded test cell worth N points; visible asserts, then an optional hidden part
                    between ``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS``
    solution+tests:N  a manually graded answer (e.g. a written answer in a markdown cell)
    readonly        locked cell (students cannot edit it; nbgrader restores it when grading)
    id:NAME         explicit grade id (letters, digits, ``_`` and ``-``); otherwise the cell keeps
                    its existing grade id, or gets ``cell-<nbformat cell id>``

The tags stay in the notebook, so running ``tlab author`` again changes nothing. It also strips
outputs and execution counts and validates the result; ``--check`` only reports (exit code 1 if
any notebook is not normalised or invalid). Cells without tags keep hand-written nbgrader
metadata, which ``--check`` validates the same way. What each tag means and the rules a cell
must follow are :mod:`.cell_tags`; this module normalises and writes whole notebooks.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from transformer_lab.grading.authoring.tags import (
    check_cell_content,
    describe_cell,
    metadata_from_tags,
    validate_nbgrader,
)

__all__ = [
    "AuthoringResult",
    "normalise_notebook",
    "author_notebook",
    "author_paths",
    "find_notebooks",
]

# Cell metadata that only records a past execution; it makes diffs noisy and carries no meaning.
VOLATILE_CELL_METADATA = ("execution", "ExecuteTime", "collapsed", "scrolled")
DEFAULT_KERNELSPEC = {
    "display_name": "Python 3 (ipykernel)",
    "language": "python",
    "name": "python3",
}


@dataclass
class AuthoringResult:
    """What ``tlab author`` found (and, unless checking, fixed) in one notebook."""

    path: Path
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)  # what normalisation changed / would change
    written: bool = False

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def normalised(self) -> bool:
        return not self.changes


def _ensure_cell_ids(nb) -> list[str]:
    """Upgrade to nbformat 4.5 (cell ids) with ids derived from content, unique per notebook."""
    changes = []
    if nb.nbformat_minor < 5:
        nb.nbformat_minor = 5
        changes.append("upgraded to nbformat 4.5 (cell ids)")
    seen: set[str] = set()
    for index, cell in enumerate(nb.cells):
        cid = cell.get("id")
        if not cid or cid in seen or not re.match(r"^[a-zA-Z0-9-_]{1,64}$", cid):
            digest = hashlib.sha1(f"{index}\0{cell.source}".encode()).hexdigest()
            cid = digest[:8]
            while cid in seen:
                digest = hashlib.sha1(digest.encode()).hexdigest()
                cid = digest[:8]
            cell["id"] = cid
            changes.append(f"cell {index}: assigned cell id {cid}")
        seen.add(cid)
    return changes


def normalise_notebook(nb, result: AuthoringResult):
    """Return a normalised deep copy of ``nb``; record changes and problems in ``result``."""
    nb = copy.deepcopy(nb)
    result.changes.extend(_ensure_cell_ids(nb))
    for key in ("widgets",):  # saved widget state: large, volatile, useless in a source notebook
        if key in nb.metadata:
            del nb.metadata[key]
            result.changes.append(f"removed notebook metadata {key!r}")
    if "kernelspec" not in nb.metadata:
        nb.metadata["kernelspec"] = dict(DEFAULT_KERNELSPEC)
        result.changes.append("added a python3 kernelspec")
    lang = nb.metadata.get("language_info")
    if isinstance(lang, dict) and set(lang) - {"name"}:
        nb.metadata["language_info"] = {"name": lang.get("name", "python")}
        result.changes.append("reduced language_info to its name (the rest depends on the machine)")

    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            if cell.get("outputs"):
                result.changes.append(f"cell {index}: stripped outputs")
            if cell.get("execution_count") is not None:
                result.changes.append(f"cell {index}: cleared execution count")
            cell.outputs = []
            cell.execution_count = None
        for key in VOLATILE_CELL_METADATA:
            if key in cell.metadata:
                del cell.metadata[key]
                result.changes.append(f"cell {index}: removed metadata {key!r}")
        if cell.cell_type != "code" and "attachments" in cell and not cell.attachments:
            del cell["attachments"]
        wanted = metadata_from_tags(index, cell, result)
        if wanted is not None and cell.metadata.get("nbgrader") != wanted:
            cell.metadata["nbgrader"] = wanted
            result.changes.append(
                f"{describe_cell(index, cell)}: nbgrader metadata written from tags"
            )
        check_cell_content(index, cell, result)
    validate_nbgrader(nb, result)
    if not any(c.metadata.get("nbgrader", {}).get("grade") for c in nb.cells):
        result.warnings.append("no graded cells (tag test cells with tests:N)")
    return nb


def _serialise(nb) -> str:
    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"


def author_notebook(path: str | Path, check: bool = False) -> AuthoringResult:
    """Normalise one notebook in place (or, with ``check``, only report)."""
    path = Path(path)
    result = AuthoringResult(path)
    try:
        original = path.read_text(encoding="utf-8")
        nb = nbformat.reads(original, as_version=4)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, nbformat.reader.NotJSONError) as exc:
        result.errors.append(f"cannot read the notebook: {exc}")
        return result
    normalised = normalise_notebook(nb, result)
    text = _serialise(normalised)
    if text != original and not result.changes:
        result.changes.append("JSON layout differs from nbformat's canonical form")
    if not check and result.ok and text != original:
        path.write_text(text, encoding="utf-8")
        result.written = True
    return result


def find_notebooks(paths: list[str | Path]) -> list[Path]:
    """Expand files and folders into the notebooks under them (checkpoints skipped)."""
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found.extend(
                q for q in sorted(p.rglob("*.ipynb")) if ".ipynb_checkpoints" not in q.parts
            )
        elif p.suffix == ".ipynb":
            found.append(p)
        else:
            raise FileNotFoundError(
                f"expected a notebook or a folder of notebooks, but received {str(p)!r}."
            )
    return found


def author_paths(paths: list[str | Path], check: bool = False) -> list[AuthoringResult]:
    """Run :func:`author_notebook` over every notebook under ``paths``."""
    return [author_notebook(p, check=check) for p in find_notebooks(paths)]
