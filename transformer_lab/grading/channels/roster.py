"""``tlab roster import FILE``: the LMS's own class list into nbgrader's students, or a refusal.

Reads the file an LMS exports, unchanged, as each LMS documents it:

- Canvas: the gradebook export (Grades > Export > CSV). Columns ``Student`` (Canvas's sortable
  name, "Last, First"), ``ID`` (Canvas's user id), ``SIS User ID``, ``SIS Login ID``,
  ``Section``, then assignments; rows such as "Points Possible" and Canvas's "Student, Test"
  are skipped. The id is ``SIS Login ID`` (the login name) unless ``--id-column`` says otherwise.
- Moodle: the grade export as a CSV file (Grade administration > Export > Plain text file).
  Columns ``First name``, ``Last name``, ``ID number``, ``Institution``, ``Department``,
  ``Email address``, then grade items. Moodle exports no user name by default, so the column
  holding the JupyterHub user name must be named (``--id-column "ID number"``, or
  ``Username`` when the export was made with that field).

Nothing is imported when anything cannot be mapped: no id column, a row without an id, the same
id twice (each named by its line). Names are kept as the LMS wrote them (a sortable name with a
suffix, "King, Jr., Martin", keeps "King, Jr." as the last name); the LMS's own ids, SIS id and
section are kept (table ``tlab_roster``) and written back by ``tlab export``.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

from transformer_lab.grading.course import CourseError

__all__ = ["RosterEntry", "read_roster", "import_roster", "roster_extras"]

CANVAS, MOODLE = "canvas", "moodle"
_CANVAS_SKIP = ("Points Possible", "Student, Test")
_SUFFIXES = {"jr", "jr.", "sr", "sr.", "ii", "iii", "iv", "v"}
_MOODLE_IDS = ("Username", "ID number", "Email address")


@dataclass
class RosterEntry:
    id: str
    first_name: str
    last_name: str
    email: str
    lms_user_id: str
    sis_user_id: str = ""
    section: str = ""
    extra: dict = field(default_factory=dict)  # the LMS's identity columns, as written


def _detect(header: list[str]) -> str:
    if {"Student", "ID", "SIS Login ID"} <= set(header):
        return CANVAS
    if {"First name", "Last name", "Email address"} <= set(header):
        return MOODLE
    raise CourseError(
        "expected Canvas's gradebook export (Student, ID, SIS Login ID, ...) or Moodle's grade "
        f"export (First name, Last name, Email address, ...), but the header is {header[:6]}."
    )


def _id_column(lms: str, header: list[str], chosen: str | None, path: Path) -> str:
    if chosen is not None:
        if chosen not in header:
            raise CourseError(
                f"expected a column {chosen!r} in {path}, but the header is {header[:8]}."
            )
        return chosen
    if lms == CANVAS:
        return "SIS Login ID"
    if "Username" in header:
        return "Username"
    found = [c for c in _MOODLE_IDS if c in header]
    raise CourseError(
        f"expected --id-column naming the column of {path} that holds each student's JupyterHub "
        f"user name (Moodle exports no user name by default), one of {found}."
    )


def split_sortable(name: str) -> tuple[str, str]:
    """(first, last) of a sortable name "Last, First"; "King, Jr., Martin" -> ("Martin",
    "King, Jr."); a name without a comma is all first name."""
    parts = [p.strip() for p in name.split(",")]
    if len(parts) == 1:
        return parts[0], ""
    if len(parts) >= 3 and parts[1].lower() in _SUFFIXES:
        return ", ".join(parts[2:]), f"{parts[0]}, {parts[1]}"
    if len(parts) >= 3 and parts[-1].lower() in _SUFFIXES:
        return ", ".join(parts[1:]), parts[0]
    return ", ".join(parts[1:]), parts[0]


def _entry(lms: str, row: dict, id_column: str) -> RosterEntry | None:
    if lms == CANVAS:
        name = row.get("Student", "")
        if not name or name.startswith(_CANVAS_SKIP):
            return None
        first, last = split_sortable(name)
        keep = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
        return RosterEntry(
            row.get(id_column, ""), first, last, "", row.get("ID", ""),
            row.get("SIS User ID", ""), row.get("Section", ""),
            {k: row.get(k, "") for k in keep},
        )  # fmt: skip
    if not any(row.values()):
        return None
    keep = ("First name", "Last name", "ID number", "Institution", "Department", "Email address")
    return RosterEntry(
        row.get(id_column, ""), row.get("First name", ""), row.get("Last name", ""),
        row.get("Email address", ""), row.get("ID number", ""), row.get("ID number", ""),
        row.get("Department", ""), {k: row.get(k, "") for k in keep if k in row},
    )  # fmt: skip


def read_roster(path: Path, id_column: str | None = None) -> tuple[str, list[RosterEntry]]:
    """(LMS, entries) of a Canvas or Moodle export; anything unmappable is an error."""
    with open(path, newline="", encoding="utf-8-sig") as fh:
        rows = list(csv.reader(fh))
    if not rows:
        raise CourseError(f"expected a roster CSV with a header row, but {path} is empty.")
    header = [h.strip() for h in rows[0]]
    lms = _detect(header)
    id_column = _id_column(lms, header, id_column, path)
    entries, lines, missing = [], [], []
    for n, raw in enumerate(rows[1:], start=2):
        entry = _entry(lms, dict(zip(header, (v.strip() for v in raw))), id_column)
        if entry is None:
            continue
        if not entry.id:
            missing.append(n)
            continue
        entries.append(entry)
        lines.append(n)
    if missing:
        raise CourseError(
            f"expected every student to have a {id_column!r} (their JupyterHub user name), but "
            f"line(s) {', '.join(map(str, missing[:10]))} of {path} have none; nothing imported."
        )
    _refuse_duplicates(entries, lines, id_column, path)
    return lms, entries


def _refuse_duplicates(entries, lines, id_column: str, path: Path) -> None:
    seen: dict[str, list[int]] = {}
    for e, n in zip(entries, lines):
        seen.setdefault(e.id, []).append(n)
    twice = {sid: ns for sid, ns in seen.items() if len(ns) > 1}
    if twice:
        said = "; ".join(f"{sid!r} on lines {', '.join(map(str, ns))}" for sid, ns in twice.items())
        raise CourseError(
            f"expected each {id_column!r} once in {path}, but found {said}; nothing imported."
        )


def import_roster(
    root: Path, path: Path, id_column: str | None = None
) -> tuple[str, int, list[str]]:
    """Create or update nbgrader's students from the roster.

    Returns (LMS, count, the students with a submission folder who are not on the roster).
    """
    from nbgrader.api import Gradebook

    from transformer_lab.grading.course import read_course_dirs
    from transformer_lab.grading.record.decisions import course_id_of
    from transformer_lab.grading.record.gradebook import (
        alembic_on_path,
        check_database,
        gradebook_url,
        guard_gradebook,
    )

    lms, entries = read_roster(Path(path), id_column)
    url, course = gradebook_url(root), course_id_of(root)
    check_database(url)
    alembic_on_path()
    guard_gradebook(url)
    with Gradebook(url, course) as gb:
        for e in entries:
            gb.update_or_create_student(
                e.id,
                first_name=e.first_name or None,
                last_name=e.last_name or None,
                email=e.email or None,
                lms_user_id=e.lms_user_id or None,
            )
    _store_extras(url, course, lms, entries)
    submitted = Path(root) / read_course_dirs(Path(root))["submitted"]
    folders = (
        sorted(p.name for p in submitted.iterdir() if p.is_dir()) if submitted.is_dir() else []
    )
    ids = {e.id for e in entries}
    return lms, len(entries), [s for s in folders if s not in ids]


def _store_extras(url: str, course: str, lms: str, entries: list[RosterEntry]) -> None:
    from transformer_lab.grading.record.tables import connect

    if not entries:
        return
    with connect(url) as (conn, t):
        table = t["tlab_roster"]
        ids = [e.id for e in entries]
        conn.execute(
            table.delete().where(
                table.c.course_id == course, table.c.lms == lms, table.c.student_id.in_(ids)
            )
        )
        conn.execute(
            table.insert(),
            [
                {
                    "course_id": course,
                    "student_id": e.id,
                    "lms": lms,
                    "sis_user_id": e.sis_user_id,
                    "section": e.section,
                    "extra": json.dumps(e.extra, ensure_ascii=False),
                }  # fmt: skip
                for e in entries
            ],
        )


def roster_extras(url: str, course: str, lms: str) -> dict[str, RosterEntry]:
    """student -> what the ``lms`` roster said beyond nbgrader's columns (SIS id, section)."""
    from transformer_lab.grading.record.tables import connect

    found = {}
    with connect(url) as (conn, t):
        table = t["tlab_roster"]
        for r in conn.execute(
            table.select().where(table.c.course_id == course, table.c.lms == lms)
        ):
            found[r.student_id] = RosterEntry(
                r.student_id, "", "", "", "", r.sis_user_id, r.section, json.loads(r.extra)
            )
    return found
