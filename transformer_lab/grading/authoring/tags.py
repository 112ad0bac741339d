"""What ``tlab author``'s cell tags mean, and the rules an authored cell must follow.

:func:`metadata_from_tags` turns a cell's tags (``solution``, ``tests:N``, ``readonly``,
``id:NAME``; see :mod:`.authoring`) into nbgrader's schema-3 metadata;
:func:`check_cell_content` checks its ``### BEGIN/END`` markers; :func:`validate_nbgrader`
checks every cell's metadata as nbgrader will (unique grade ids included). Problems are
appended to an :class:`~.authoring.AuthoringResult`, never raised.
"""

from __future__ import annotations

import copy
import re
from typing import TYPE_CHECKING

import nbformat

if TYPE_CHECKING:
    from transformer_lab.grading.authoring.author import AuthoringResult

__all__ = ["describe_cell", "metadata_from_tags", "check_cell_content", "validate_nbgrader"]

GRADE_ID_RE = re.compile(r"^[A-Za-z0-9_-]+$")
TESTS_TAG_RE = re.compile(r"^tests:(.*)$")
ID_TAG_RE = re.compile(r"^id:(.*)$")
ROLE_TAGS = ("solution", "readonly")
BEGIN_SOLUTION, END_SOLUTION = "BEGIN SOLUTION", "END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"


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


def describe_cell(index: int, cell) -> str:
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


def metadata_from_tags(index: int, cell, result: AuthoringResult) -> dict | None:
    """The nbgrader metadata that a cell's tags ask for (None if it has no tlab tags)."""
    tags = [t for t in cell.metadata.get("tags", []) if _is_tlab_tag(t)]
    if not tags:
        return None
    where = describe_cell(index, cell)
    solution, readonly = "solution" in tags, "readonly" in tags
    points, explicit_id = _points_and_id(tags, where, result)
    graded = points is not None
    if not (solution or graded or readonly):
        result.errors.append(
            f"{where}: an id: tag needs a role tag too (solution, tests:N or readonly)"
        )
        return None
    _check_roles(cell, where, solution, graded, readonly, result)
    meta = {
        "grade": graded,
        "grade_id": _grade_id(cell, explicit_id),
        "locked": readonly or (graded and not solution),
        "schema_version": 3,
        "solution": solution,
    }
    if graded:
        meta["points"] = points
    return meta


def _points_and_id(tags: list[str], where: str, result: AuthoringResult):
    """(points of the tests:N tag or None, the id: tag's grade id or None); errors recorded."""
    points = explicit_id = None
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
    return points, explicit_id


def _check_roles(cell, where: str, solution: bool, graded: bool, readonly: bool, result) -> None:
    """The role tags a cell of this type may carry together."""
    if readonly and (solution or graded):
        result.errors.append(f"{where}: 'readonly' cannot be combined with 'solution' or 'tests:N'")
    if cell.cell_type == "markdown" and graded != solution:
        result.errors.append(
            f"{where}: a markdown cell must be tagged both 'solution' and 'tests:N' "
            f"(a manually graded written answer), or 'readonly'"
        )
    if cell.cell_type == "raw" and (solution or graded):
        result.errors.append(f"{where}: raw cells cannot be answer or test cells")


def _grade_id(cell, explicit_id: str | None) -> str:
    """The id: tag's id, else a stable existing id, else one derived from the cell's id."""
    existing = cell.metadata.get("nbgrader", {}).get("grade_id")
    if explicit_id is not None:
        return explicit_id
    if existing and not (existing.startswith("cell-") and existing != f"cell-{cell['id']}"):
        return existing  # keep a stable id (grades in a gradebook refer to it)
    return f"cell-{cell['id']}"  # derived; re-derived if the cell was copy-pasted


def check_cell_content(index: int, cell, result: AuthoringResult) -> None:
    """Markers must sit in the right kind of cell and be balanced."""
    where = describe_cell(index, cell)
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


def validate_nbgrader(nb, result: AuthoringResult) -> None:
    from nbgrader.nbgraderformat import MetadataValidator, ValidationError

    validator = MetadataValidator()
    seen: dict[str, int] = {}
    for index, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader")
        if meta is None:
            continue
        where = describe_cell(index, cell)
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
