"""``tlab export``: the class's grades as the files an LMS imports (Canvas, Moodle).

One row per student, one column per notebook of every assignment released to students (with a
submission, or in nbgrader's exchange; name others to export them). Each cell is the decided
grade of the record (:mod:`.ledger`: the autograded score, the instructor's decision, the late
policy); whether a submission was really graded comes from ``tlab grade``'s report
(:mod:`.report`), because nbgrader records 0 both for a real zero and for a notebook it could
not run. A student without a usable score for a notebook is written as
**not graded, never 0**: not graded by ``tlab grade`` (dead kernel, not a notebook, ...),
flagged for review and not yet decided (:mod:`.decisions`), waiting for manual grading, or
nothing submitted. A reviewed submission is written with the decided score.

- ``canvas_grades.csv``: Canvas's gradebook import layout (``Student, ID, SIS User ID, SIS
  Login ID, Section``, as the imported Canvas roster wrote them, then one column per notebook,
  then a ``Points Possible`` row). A column is ``Title (12345)`` when the Canvas assignment id
  is given (``--canvas-id``), so Canvas updates that assignment instead of matching by title.
  Not graded is an empty cell: Canvas shows it as ungraded, but on re-import an empty cell
  clears a score already in Canvas.
- ``moodle_grades.csv``: Moodle's CSV grade import (``First name, Last name, ID number, Email
  address``, then per notebook a grade column and a feedback column). Not graded is ``-``,
  the one value Moodle's importer skips (an empty cell becomes 0 in a new grade item and wipes
  an existing grade). The feedback says ``NOT GRADED: reason``.
- ``not_graded.csv``: student, notebook, why (the list to follow up).
- ``unmatched.csv``: once a roster is imported (:mod:`.roster`), students not on it (no Canvas
  ID, no email) are left out of that LMS's file and listed here: one unmatched row aborts
  Moodle's import. Without a roster nothing can be checked: Canvas then matches only by SIS
  Login ID, Moodle by whatever column the import maps (``tlab export`` says so).

Identity: nbgrader's student id (the JupyterHub user name) is Canvas's SIS Login ID; Canvas's
``ID`` and Moodle's ``ID number`` come from that LMS's roster (else ``lms_user_id``), the email
from the roster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from transformer_lab.grading.course import CourseError
from transformer_lab.grading.inert import csv_writer
from transformer_lab.grading.record.decisions import formgrader_resolutions
from transformer_lab.grading.record.gradebook import (
    alembic_on_path,
    check_database,
    gradebook_url,
    guard_gradebook,
    sqlite_path,
)
from transformer_lab.grading.record.report import GradingReport

__all__ = ["Column", "ClassGrades", "collect_grades", "write_canvas", "write_moodle", "export"]

NOT_SUBMITTED = "nothing submitted"
NEEDS_REVIEW = "needs_review"  # report status: graded, but flagged for the instructor to look at
MANUAL = "needs manual grading"
MOODLE_SKIP = "-"  # the one grade value Moodle's CSV import leaves alone


@dataclass
class Column:
    """One notebook of one assignment."""

    assignment: str
    notebook: str
    title: str
    max_score: float


@dataclass
class Student:
    id: str
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    lms_user_id: str = ""
    sis_user_id: str = ""  # Canvas's SIS User ID, from the roster
    section: str = ""  # Canvas's Section, from the roster
    canvas: dict = field(default_factory=dict)  # the Canvas roster's own columns, as written
    moodle: dict = field(default_factory=dict)  # the Moodle roster's own columns, as written

    def lms_id(self, lms: str) -> str:
        """Canvas's ``ID`` or Moodle's ``ID number`` from that LMS's roster (a roster of the
        other LMS imported later does not replace it), else nbgrader's ``lms_user_id``."""
        own = self.canvas.get("ID") if lms == "canvas" else self.moodle.get("ID number")
        return own or self.lms_user_id

    def on_roster(self, lms: str) -> bool:
        """Does this student carry what ``lms`` matches on (from ``tlab roster import``)?"""
        return bool(self.lms_id("canvas")) if lms == "canvas" else bool(self.email)

    @property
    def name(self) -> str:
        full = f"{self.last_name}, {self.first_name}".strip(", ")
        return full or self.id


@dataclass
class ClassGrades:
    """Scores (None = no usable score) and the reason for every missing one."""

    columns: list[Column]
    students: list[Student]
    scores: dict[tuple[str, str], float | None] = field(default_factory=dict)
    reasons: dict[tuple[str, str], str] = field(default_factory=dict)
    unmatched: list[tuple[str, str, str]] = field(default_factory=list)  # (student, lms, why)
    skipped: list[str] = field(default_factory=list)  # assignments not released to students

    def has_roster(self, lms: str) -> bool:
        return any(s.on_roster(lms) for s in self.students)

    def unmatched_in(self, student: Student, lms: str) -> str:
        """Why ``lms`` cannot match ``student``'s row ("" if it can, or if no roster says)."""
        if not self.has_roster(lms) or student.on_roster(lms):
            return ""
        what = "Canvas ID" if lms == "canvas" else "email address"
        return f"not in the imported {lms.capitalize()} roster (no {what})"

    def missing(self) -> list[tuple[str, str, str]]:
        """(student, column title, reason) of every empty cell."""
        return [
            (s.id, c.title, self.reasons.get((s.id, c.title), NOT_SUBMITTED))
            for s in self.students
            for c in self.columns
            if self.scores.get((s.id, c.title)) is None
        ]


def collect_grades(root: Path, assignments: list[str] | None = None) -> ClassGrades:
    """Read the decided grades (:mod:`.ledger`) of ``assignments`` into one table (default:
    every assignment released to students, see :func:`released_assignments`)."""
    from nbgrader.api import Gradebook

    from transformer_lab.grading.record.decisions import course_id_of

    root = Path(root).resolve()
    url = _checked_url(root)
    course_id = course_id_of(root)
    with Gradebook(url, course_id) as gb:
        known = [a.name for a in gb.assignments]
        with_work = {a.name for a in gb.assignments if a.num_submissions}
    unknown = sorted(set(assignments or []) - set(known))
    if unknown:
        raise CourseError(
            f"expected assignments that are in the gradebook ({', '.join(sorted(known)) or 'none'}), "
            f"but got {', '.join(unknown)}."
        )
    wanted = assignments or released_assignments(root, known, with_work)
    students = _students(url, course_id)
    grades = ClassGrades([], [])
    grades.skipped = sorted(set(known) - set(wanted))
    for name in wanted:
        _collect_assignment(root, url, course_id, name, students, grades)
    grades.students = [students[s] for s in sorted(students)]
    return grades


def released_assignments(root: Path, known: list[str], with_work: set[str]) -> list[str]:
    """The assignments students have: with a submission (in the gradebook or ``submitted/``)
    or released through nbgrader's exchange (its ``outbound`` folder)."""
    from transformer_lab.grading.course import read_course_dirs

    submitted = root / read_course_dirs(root)["submitted"]
    handed = {p.name for p in submitted.glob("*/*") if p.is_dir()} if submitted.is_dir() else set()
    outbound = _exchange_outbound(root)
    return [a for a in sorted(known) if a in with_work or a in handed or a in outbound]


def _exchange_outbound(root: Path) -> set[str]:
    from traitlets.config.loader import PyFileConfigLoader

    cfg = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    exchange = Path(str(cfg.get("Exchange", {}).get("root", "/srv/nbgrader/exchange")))
    course = cfg.get("CourseDirectory", {}).get("course_id", "")
    folder = exchange / str(course) / "outbound"
    try:
        return {p.name for p in folder.iterdir() if p.is_dir()}
    except OSError:
        return set()


def _checked_url(root: Path) -> str:
    """The gradebook's URL, once it exists and its driver is installed (else a CourseError)."""
    from transformer_lab.grading.record.gradebook import check_driver_available

    url = gradebook_url(root)
    db_file = sqlite_path(url)
    if db_file is not None and not db_file.is_file():
        raise CourseError(
            f"expected the gradebook {db_file}, but it does not exist yet; run tlab grade first."
        )
    try:
        check_driver_available(url)
    except ValueError as exc:
        raise CourseError(str(exc)) from None
    check_database(url)
    alembic_on_path()
    guard_gradebook(url)  # wait for a grading process's write instead of "database is locked"
    return url


def _students(url: str, course_id: str) -> dict[str, Student]:
    """nbgrader's students with what the rosters added (SIS User ID, section, Canvas's name)."""
    from nbgrader.api import Gradebook

    from transformer_lab.grading.channels.roster import roster_extras

    with Gradebook(url, course_id) as gb:
        found = {
            s.id: Student(
                s.id, s.first_name or "", s.last_name or "", s.email or "", s.lms_user_id or ""
            )
            for s in gb.students
        }
    for sid, extra in roster_extras(url, course_id, "canvas").items():
        if sid in found:
            found[sid].sis_user_id, found[sid].section = extra.sis_user_id, extra.section
            found[sid].canvas = extra.extra
    for sid, extra in roster_extras(url, course_id, "moodle").items():
        if sid in found:
            found[sid].moodle = extra.extra
    return found


def _collect_assignment(root, url, course_id, name, students, grades: ClassGrades) -> None:
    """One assignment's columns: the decided grade per notebook, or why there is none."""
    from nbgrader.api import Gradebook, MissingEntry

    from transformer_lab.grading.channels.publish import settle
    from transformer_lab.grading.record.ledger import final_grades

    report = GradingReport.load(root, name)
    found = formgrader_resolutions(url, course_id, report)
    if found:
        settle(
            root, report, "resolved in the formgrader", "formgrader", [d.student_id for d in found]
        )
    finals = final_grades(root, report) if report.students else {}
    for sid in report.students:
        students.setdefault(sid, Student(sid))
    with Gradebook(url, course_id) as gb:
        notebooks = sorted(gb.find_assignment(name).notebooks, key=lambda n: n.name)
        for nb in notebooks:
            title = nb.name if len(notebooks) == 1 else f"{name}: {nb.name}"
            grades.columns.append(Column(name, nb.name, title, float(nb.max_score or 0)))
            for sid in students:
                key, final = (sid, title), finals.get(sid)
                if final is not None and final.score is None:
                    grades.scores[key] = None
                    why = "needs review" if final.status == NEEDS_REVIEW else "not graded"
                    grades.reasons[key] = f"{why}: {final.reason or 'see the grading report'}"
                    continue
                try:
                    sub = gb.find_submission_notebook(nb.name, name, sid)
                except MissingEntry:
                    grades.scores[key], grades.reasons[key] = None, NOT_SUBMITTED
                    continue
                if sub.needs_manual_grade and (final is None or final.decision is None):
                    grades.scores[key], grades.reasons[key] = None, MANUAL
                elif final is not None and len(notebooks) == 1:
                    grades.scores[key] = final.score  # the decided grade, late policy applied
                else:  # a notebook's share: the gradebook holds decisions as manual scores
                    factor = final.late_factor if final is not None else 1.0
                    grades.scores[key] = round(float(sub.score) * factor, 2)


def _num(x: float | None) -> str:
    if x is None:
        return ""
    return str(int(x)) if float(x).is_integer() else f"{x:.2f}"


def canvas_header(column: Column, canvas_ids: dict[str, str]) -> str:
    """``Title (12345)`` when the Canvas assignment id is known, else the title."""
    cid = canvas_ids.get(column.title) or canvas_ids.get(column.assignment)
    return f"{column.title} ({cid})" if cid else column.title


def write_canvas(grades: ClassGrades, path: Path, canvas_ids: dict[str, str] | None = None) -> Path:
    """Canvas's gradebook import CSV (empty cell = not graded); matched students only."""
    for key, cid in (canvas_ids or {}).items():
        if not str(cid).isdigit():
            raise CourseError(
                f"expected a numeric Canvas assignment id for {key}, but got {cid!r}."
            )
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv_writer(fh)
        w.writerow(
            ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
            + [canvas_header(c, canvas_ids or {}) for c in grades.columns]
        )
        w.writerow(
            ["Points Possible", "", "", "", ""] + [_num(c.max_score) for c in grades.columns]
        )
        for s in grades.students:
            if grades.unmatched_in(s, "canvas"):
                continue
            login = s.canvas.get("SIS Login ID") or s.id
            w.writerow(
                [s.canvas.get("Student") or s.name, s.lms_id("canvas"), s.sis_user_id, login]
                + [s.section]
                + [_num(grades.scores.get((s.id, c.title))) for c in grades.columns]
            )
    return path


def write_moodle(grades: ClassGrades, path: Path) -> Path:
    """Moodle's CSV grade import: a grade and a feedback column per notebook."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv_writer(fh)
        header = ["First name", "Last name", "ID number", "Email address"]
        for c in grades.columns:
            header += [c.title, f"{c.title} feedback"]
        w.writerow(header)
        for s in grades.students:
            if grades.unmatched_in(s, "moodle"):
                continue
            row = [s.first_name, s.last_name, s.lms_id("moodle") or s.id, s.email]
            for c in grades.columns:
                score = grades.scores.get((s.id, c.title))
                reason = grades.reasons.get((s.id, c.title), NOT_SUBMITTED)
                if score is None:
                    row += [MOODLE_SKIP, f"NOT GRADED: {reason}"]
                else:
                    row += [_num(score), ""]
            w.writerow(row)
    return path


def export(
    root: Path,
    assignments: list[str] | None = None,
    out_dir: Path | None = None,
    formats=("canvas", "moodle"),
    canvas_ids: dict[str, str] | None = None,
) -> tuple[ClassGrades, list[Path]]:
    """Write the requested LMS files, ``not_graded.csv`` and ``unmatched.csv`` into ``out_dir``
    (default reports/). Students an LMS cannot match are left out of its file."""
    grades = collect_grades(root, assignments)
    out_dir = Path(out_dir) if out_dir else Path(root) / "reports"
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    grades.unmatched = [
        (s.id, lms, grades.unmatched_in(s, lms))
        for lms in formats
        for s in grades.students
        if grades.unmatched_in(s, lms)
    ]
    with open(out_dir / "unmatched.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv_writer(fh)
        w.writerow(["student_id", "lms", "reason"])
        w.writerows(grades.unmatched)
    if "canvas" in formats:
        written.append(write_canvas(grades, out_dir / "canvas_grades.csv", canvas_ids))
    if "moodle" in formats:
        written.append(write_moodle(grades, out_dir / "moodle_grades.csv"))
    with open(out_dir / "not_graded.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv_writer(fh)
        w.writerow(["student_id", "notebook", "reason"])
        w.writerows(grades.missing())
    written.append(out_dir / "not_graded.csv")
    return grades, written
