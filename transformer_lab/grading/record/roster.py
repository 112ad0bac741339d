"""``tlab roster import FILE``: the LMS's own class list into nbgrader's students.

Reads the file an LMS exports, unchanged:

- Canvas: the gradebook export (Grades > Export > CSV). Columns ``Student`` ("Last, First"),
  ``ID`` (Canvas's user id), ``SIS User ID``, ``SIS Login ID``, ``Section``, then assignments;
  rows such as "Points Possible" and Canvas's "Student, Test" are skipped.
- Moodle: the grade export as a CSV file (Grade administration > Export > Plain text file).
  Columns ``First name``, ``Last name``, ``ID number``, ``Institution``, ``Department``,
  ``Email address``, then grade items (a ``Username`` column is used when present).

Each row becomes (or updates) an nbgrader student: the id is the column naming the JupyterHub
user (``--id-column``; default ``SIS Login ID`` for Canvas, ``Username`` or else ``ID number``
for Moodle), with first and last name, email, and the LMS's own id in ``lms_user_id`` (Canvas's
``ID``; Moodle's ``ID number``). ``tlab export`` writes these back, so the LMS can match every row.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from transformer_lab.grading.course import CourseError

__all__ = ["RosterEntry", "read_roster", "import_roster"]

CANVAS, MOODLE = "canvas", "moodle"
_CANVAS_SKIP = ("Points Possible", "Student, Test")


@dataclass
class RosterEntry:
    id: str
    first_name: str
    last_name: str
    email: str
    lms_user_id: str


def _detect(header: list[str]) -> str:
    if {"Student", "ID", "SIS Login ID"} <= set(header):
        return CANVAS
    if {"First name", "Last name", "Email address"} <= set(header):
        return MOODLE
    raise CourseError(
        "expected Canvas's gradebook export (Student, ID, SIS Login ID, ...) or Moodle's grade "
        f"export (First name, Last name, Email address, ...), but the header is {header[:6]}."
    )


def read_roster(path: Path, id_column: str | None = None) -> tuple[str, list[RosterEntry]]:
    """(LMS, entries) of a Canvas or Moodle export; students without the id column are errors."""
    with open(path, newline="", encoding="utf-8-sig") as fh:
        rows = list(csv.reader(fh))
    if not rows:
        raise CourseError(f"expected a roster CSV with a header row, but {path} is empty.")
    header = [h.strip() for h in rows[0]]
    lms = _detect(header)
    if id_column is None:
        if lms == CANVAS:
            id_column = "SIS Login ID"
        else:
            id_column = "Username" if "Username" in header else "ID number"
    if id_column not in header:
        raise CourseError(f"expected a column {id_column!r} in {path}, but the header is {header}.")
    entries: list[RosterEntry] = []
    missing: list[int] = []
    for n, raw in enumerate(rows[1:], start=2):
        row = dict(zip(header, (v.strip() for v in raw)))
        if lms == CANVAS:
            name = row.get("Student", "")
            if not name or name.startswith(_CANVAS_SKIP):
                continue
            last, _, first = name.partition(",")
            entry = RosterEntry(
                row.get(id_column, ""), first.strip(), last.strip(), "", row.get("ID", "")
            )
        else:
            if not any(row.values()):
                continue
            entry = RosterEntry(
                row.get(id_column, ""),
                row.get("First name", ""),
                row.get("Last name", ""),
                row.get("Email address", ""),
                row.get("ID number", ""),
            )
        if not entry.id:
            missing.append(n)
            continue
        entries.append(entry)
    if missing:
        raise CourseError(
            f"expected every student to have a {id_column!r} (their JupyterHub user name), but "
            f"line(s) {', '.join(map(str, missing[:10]))} of {path} have none; nothing imported."
        )
    return lms, entries


def import_roster(root: Path, path: Path, id_column: str | None = None) -> tuple[str, int]:
    """Create or update nbgrader's students from the roster; returns (LMS, count)."""
    from nbgrader.api import Gradebook

    from transformer_lab.grading.record.decisions import course_id_of
    from transformer_lab.grading.record.export import _alembic_on_path
    from transformer_lab.grading.record.gradebook import gradebook_url, guard_gradebook

    lms, entries = read_roster(Path(path), id_column)
    url = gradebook_url(root)
    _alembic_on_path()
    guard_gradebook(url)
    with Gradebook(url, course_id_of(root)) as gb:
        for e in entries:
            gb.update_or_create_student(
                e.id,
                first_name=e.first_name or None,
                last_name=e.last_name or None,
                email=e.email or None,
                lms_user_id=e.lms_user_id or None,
            )
    return lms, len(entries)
