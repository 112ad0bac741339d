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
metadata, which ``--check`` validates the same way.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

__all__ = [
    "AuthoringResult",
    "normalise_notebook",
    "author_notebook",
    "author_paths",
    "find_notebooks",
]

GRADE_ID_RE = re.compile(r"^[A-Za-z0-9_-]+$")
TESTS_TAG_RE = re.compile(r"^tests:(.*)$")
ID_TAG_RE = re.compile(r"^id:(.*)$")
ROLE_TAGS = ("solution", "readonly")
BEGIN_SOLUTION, END_SOLUTION = "BEGIN SOLUTION", "END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"
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


def _is_tlab_tag(tag: str) -> bool:
    return tag in ROLE_TAGS or bool(TESTS_TAG_RE.match(tag)) or bool(ID_TAG_RE.match(tag))


def _parse_points(text: str) -> float | int | None:
    try:
        value = float(text)
    except ValueError:
        return None
    if not value > 0 or value != value or value == float("inf"):
        return None
    return int(value) if value.is_integer() else value


def _describe(index: int, cell) -> str:
    first = next((ln.strip() for ln in cell.source.splitlines() if ln.strip()), "")
    first = (first[:40] + "...") if len(first) > 40 else first
    return f"cell {index} ({cell.cell_type}, id {cell.get('id', '?')}, {first!r})"


def _markers_balanced(source: str, begin: str, end: str) -> tuple[int, str | None]:
    """Count begin/end regions; return (regions, problem or None)."""
    depth = regions = 0
    for line in source.splitlines():
        if begin in line:
            if depth:
                return regions, f"nested '### {begin}'"
            depth, regions = 1, regions + 1
        elif end in line:
            if not depth:
                return regions, f"'### {end}' without a matching '### {begin}'"
            depth = 0
    if depth:
        return regions, f"'### {begin}' without a matching '### {end}'"
    return regions, None


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


def _metadata_from_tags(index: int, cell, result: AuthoringResult) -> dict | None:
    """The nbgrader metadata that a cell's tags ask for (None if it has no tlab tags)."""
    tags = [t for t in cell.metadata.get("tags", []) if _is_tlab_tag(t)]
    if not tags:
        return None
    where = _describe(index, cell)
    solution = "solution" in tags
    readonly = "readonly" in tags
    points = None
    explicit_id = None
    for tag in tags:
        m = TESTS_TAG_RE.match(tag)
        if m:
            if points is not None:
                result.errors.append(f"{where}: more than one tests:N tag")
            points = _parse_points(m.group(1))
            if points is None:
                result.errors.append(
                    f"{where}: tag {tag!r} needs a positive number of points, e.g. tests:2"
                )
                points = 1
        m = ID_TAG_RE.match(tag)
        if m:
            if explicit_id is not None:
                result.errors.append(f"{where}: more than one id: tag")
            explicit_id = m.group(1)
            if not GRADE_ID_RE.match(explicit_id):
                result.errors.append(
                    f"{where}: grade id {explicit_id!r} must match [A-Za-z0-9_-]+ (letters, digits, _ and -)"
                )
    graded = points is not None
    if not (solution or graded or readonly):
        result.errors.append(
            f"{where}: an id: tag needs a role tag too (solution, tests:N or readonly)"
        )
        return None
    if readonly and (solution or graded):
        result.errors.append(f"{where}: 'readonly' cannot be combined with 'solution' or 'tests:N'")
    if cell.cell_type == "markdown" and graded != solution:
        result.errors.append(
            f"{where}: a markdown cell must be tagged both 'solution' and 'tests:N' "
            f"(a manually graded written answer), or 'readonly'"
        )
    if cell.cell_type == "raw" and (solution or graded):
        result.errors.append(f"{where}: raw cells cannot be answer or test cells")

    existing = cell.metadata.get("nbgrader", {}).get("grade_id")
    if explicit_id is not None:
        grade_id = explicit_id
    elif existing and not (existing.startswith("cell-") and existing != f"cell-{cell['id']}"):
        grade_id = existing  # keep a stable id (grades in a gradebook refer to it)
    else:
        grade_id = f"cell-{cell['id']}"  # derived; re-derived if the cell was copy-pasted

    meta = {
        "grade": graded,
        "grade_id": grade_id,
        "locked": readonly or (graded and not solution),
        "schema_version": 3,
        "solution": solution,
    }
    if graded:
        meta["points"] = points
    return meta


def _check_cell_content(index: int, cell, result: AuthoringResult) -> None:
    """Markers must sit in the right kind of cell and be balanced."""
    where = _describe(index, cell)
    nbg = cell.metadata.get("nbgrader", {})
    is_solution, is_grade = nbg.get("solution", False), nbg.get("grade", False)
    sol_regions, sol_problem = _markers_balanced(cell.source, BEGIN_SOLUTION, END_SOLUTION)
    hid_regions, hid_problem = _markers_balanced(cell.source, BEGIN_HIDDEN, END_HIDDEN)
    if sol_problem:
        result.errors.append(f"{where}: {sol_problem}")
    if hid_problem:
        result.errors.append(f"{where}: {hid_problem}")
    if sol_regions and not is_solution:
        result.errors.append(f"{where}: has a SOLUTION region but is not tagged 'solution'")
    if hid_regions and not is_grade:
        result.errors.append(f"{where}: has a HIDDEN TESTS region but is not tagged 'tests:N'")
    if is_solution and cell.cell_type == "code" and not sol_regions:
        result.errors.append(
            f"{where}: a code answer cell must mark its answer with '### BEGIN SOLUTION' / '### END SOLUTION'"
        )
    if is_grade and not is_solution and cell.cell_type == "code":
        if not hid_regions:
            result.warnings.append(
                f"{where}: test cell has no hidden tests (### BEGIN HIDDEN TESTS)"
            )
        if not cell.source.strip():
            result.errors.append(f"{where}: test cell is empty")


def _validate_nbgrader(nb, result: AuthoringResult) -> None:
    from nbgrader.nbgraderformat import MetadataValidator, ValidationError

    validator = MetadataValidator()
    seen: dict[str, int] = {}
    for index, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader")
        if meta is None:
            continue
        where = _describe(index, cell)
        if meta.get("schema_version") != 3:
            result.errors.append(f"{where}: nbgrader metadata must have schema_version 3")
        gid = meta.get("grade_id")
        if gid is not None:
            if not GRADE_ID_RE.match(str(gid)):
                result.errors.append(f"{where}: grade id {gid!r} must match [A-Za-z0-9_-]+")
            if gid in seen and (meta.get("grade") or meta.get("solution") or meta.get("locked")):
                result.errors.append(
                    f"{where}: duplicate grade id {gid!r} (also cell {seen[gid]}); give one an id:NAME tag"
                )
            seen.setdefault(gid, index)
        try:
            validator.validate_cell(copy.deepcopy(cell))
        except ValidationError as exc:
            result.errors.append(f"{where}: invalid nbgrader metadata: {exc}")
    try:
        nbformat.validate(nb)
    except nbformat.ValidationError as exc:
        result.errors.append(f"notebook is not valid nbformat: {str(exc).splitlines()[0]}")


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
        wanted = _metadata_from_tags(index, cell, result)
        if wanted is not None and cell.metadata.get("nbgrader") != wanted:
            cell.metadata["nbgrader"] = wanted
            result.changes.append(f"{_describe(index, cell)}: nbgrader metadata written from tags")
        _check_cell_content(index, cell, result)
    _validate_nbgrader(nb, result)
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
