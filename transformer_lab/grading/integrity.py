"""Pre-flight of submissions, before nbgrader sees them.

For every student, :func:`preflight` reads the submitted notebooks and decides:

- **not a notebook** (invalid JSON, not nbformat 4): the student is reported as
  "could not be graded" with the reason, and nbgrader never runs on the file;
- **renamed notebook** (one unknown ``.ipynb`` instead of the expected name): graded under the
  expected name, with a note;
- **deleted cells**: every answer, test or read-only cell of the released notebook that is
  missing from the submission is put back, after the nearest surviving cell that preceded it
  in the release. nbgrader then restores the source of test and read-only cells from the
  gradebook and grades them as usual. (nbgrader 0.9.6's own ``add_missing_cells`` raises
  KeyError when the deleted test cell follows a non-graded cell, so we never rely on it.)

The fixed copies are written to a staging folder; the students' original files are untouched.
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

__all__ = ["Preflight", "preflight", "restore_missing_cells", "fingerprint"]


@dataclass
class Preflight:
    """What pre-flight found in one student's submission."""

    student: str
    ok: bool = True
    reason: str = ""  # why the submission cannot be graded (when not ok)
    notes: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)  # grade ids put back


def _grade_id(cell) -> str | None:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    if meta.get("grade") or meta.get("solution") or meta.get("locked"):
        return meta.get("grade_id")
    return None


def restore_missing_cells(submitted, released) -> tuple[object, list[str]]:
    """Put back every nbgrader cell of ``released`` that ``submitted`` lacks.

    Returns the repaired notebook (a copy) and the grade ids that were restored.
    """
    nb = copy.deepcopy(submitted)
    present = {gid for gid in map(_grade_id, nb.cells) if gid}
    restored: list[str] = []
    for r_index, r_cell in enumerate(released.cells):
        gid = _grade_id(r_cell)
        if not gid or gid in present:
            continue
        # Anchor: the closest earlier release cell that the submission still has.
        position = 0
        for prev in reversed(released.cells[:r_index]):
            prev_gid, prev_id = _grade_id(prev), prev.get("id")
            found = next(
                (
                    i
                    for i, c in enumerate(nb.cells)
                    if (prev_gid and _grade_id(c) == prev_gid)
                    or (not prev_gid and prev_id and c.get("id") == prev_id)
                ),
                None,
            )
            if found is not None:
                position = found + 1
                break
        cell = copy.deepcopy(r_cell)
        if any(c.get("id") == cell.get("id") for c in nb.cells):
            cell["id"] = f"restored-{gid}"[:64]
        nb.cells.insert(position, cell)
        present.add(gid)
        restored.append(gid)
    return nb, restored


def _read_notebook(path: Path):
    """Parse and validate; raises ValueError with a short reason."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError("not a notebook: the file is not UTF-8 text") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not a notebook: invalid JSON ({exc.msg} at line {exc.lineno})") from None
    if (
        not isinstance(raw, dict)
        or raw.get("nbformat") != 4
        or not isinstance(raw.get("cells"), list)
    ):
        raise ValueError("not a notebook: the JSON is not an nbformat-4 notebook")
    try:
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
    except Exception as exc:  # nbformat raises several kinds of validation errors
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"not a valid notebook: {first[:200]}") from None
    return nb


def preflight(
    student: str, submission: Path, released: dict[str, object], staging: Path
) -> Preflight:
    """Check one submission folder and write a gradable copy into ``staging``.

    Args:
        student: the student id.
        submission: ``submitted/STUDENT/ASSIGNMENT``.
        released: notebook name (without .ipynb) -> the released student notebook.
        staging: the folder to receive the gradable copy (created).
    """
    result = Preflight(student)
    if not submission.is_dir():
        result.ok, result.reason = False, "no submission folder"
        return result
    expected = set(released)
    found = {p.stem: p for p in submission.glob("*.ipynb")}
    if not found:
        result.ok, result.reason = False, "no notebook in the submission"
        return result
    missing = sorted(expected - set(found))
    unknown = sorted(set(found) - expected)
    renames: dict[str, Path] = {}
    if len(missing) == 1 and len(unknown) == 1:
        renames[missing[0]] = found[unknown[0]]
        result.notes.append(
            f"graded {unknown[0]}.ipynb as {missing[0]}.ipynb (renamed by the student)"
        )
        missing = []
    for name in missing:
        result.notes.append(f"{name}.ipynb missing: scored 0")

    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    for item in submission.iterdir():  # timestamp.txt, data files, ...
        if item.suffix != ".ipynb" and item.is_file():
            shutil.copy2(item, staging / item.name)
    stamp = staging / "timestamp.txt"
    if stamp.is_file() and not _timestamp_ok(stamp):
        # nbgrader aborts the whole submission on an unreadable timestamp; grade it without one.
        stamp.unlink()
        result.notes.append("timestamp.txt unreadable: graded without a submission time")
    for name in sorted(expected):
        path = renames.get(name) or found.get(name)
        if path is None:
            continue
        try:
            nb = _read_notebook(path)
        except ValueError as exc:
            result.ok, result.reason = False, f"{path.name}: {exc}"
            shutil.rmtree(staging)
            return result
        nb, restored = restore_missing_cells(nb, released[name])
        if restored:
            result.restored += restored
            result.notes.append(f"{name}.ipynb: restored deleted cell(s) {', '.join(restored)}")
        nbformat.write(nb, staging / f"{name}.ipynb")
    return result


def _timestamp_ok(path: Path) -> bool:
    try:
        from nbgrader.utils import parse_utc

        parse_utc(path.read_text(encoding="utf-8").strip())
        return True
    except Exception:
        return False


def fingerprint(submission: Path) -> str:
    """A hash of the submission's files, to regrade only what changed."""
    digest = hashlib.sha256()
    if submission.is_dir():
        for path in sorted(p for p in submission.rglob("*") if p.is_file()):
            digest.update(str(path.relative_to(submission)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
