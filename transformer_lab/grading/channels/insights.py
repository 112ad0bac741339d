"""What the class got wrong: every check's verdict kept per submission, counted per exercise.

The grader decides each graded cell with the instant checks (``decide/judge.py``); a failing
check names the student's mistake from its exercise's catalogue when the evidence fits, or
describes what it saw (a *generic* failure). ``tlab grade`` stores each decided check here
(table ``tlab_verdicts`` in the gradebook's database, beside nbgrader's), and ``tlab insights``
counts them from the gradebook alone (SQLite or PostgreSQL; never the notebooks):

    store_verdicts   the record step: one row per decided check of one submission
    read_class       verdicts, nbgrader's per-cell scores, names and review decisions
    count            per exercise: students, pass rate, score distribution, mistakes ranked
    write_csv        ``reports/A_insights.csv``: one row per exercise and mistake

A submission whose latest review decision overrides its score (set to 0 for copying, say)
says nothing about a misconception: it is set aside, and the page says how many were.
The HTML page is :mod:`.insights_page`.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from transformer_lab.grading.inert import csv_writer
from transformer_lab.grading.record.tables import now

__all__ = [
    "TABLE",
    "GENERIC",
    "mistake_name",
    "store_verdicts",
    "read_class",
    "count",
    "write_csv",
    "ClassRecord",
    "Insights",
    "ExerciseInsight",
    "MistakeCount",
    "CSV_COLUMNS",
]

TABLE = "tlab_verdicts"
GENERIC = "generic failure (no mistake named)"
VISIBLE, HIDDEN = "visible", "hidden"
CSV_COLUMNS = [
    "assignment",
    "exercise",
    "mistake",
    "named",
    "tests",
    "students",
    "share_of_class",
    "class_size",
    "example_message",
]
_PACKAGE = Path(__file__).resolve().parents[2]  # transformer_lab/
_STORED = ("graded", "needs_review")  # report statuses whose verdicts decided a score


def _table(meta):
    from sqlalchemy import Boolean, Column, Integer, String, Table, Text

    return Table(
        TABLE,
        meta,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("course_id", String(128), nullable=False),
        Column("assignment", String(128), nullable=False),
        Column("student_id", String(128), nullable=False),
        Column("fingerprint", String(128), nullable=False),  # the submission's
        Column("grade_id", String(128), nullable=False),
        Column("exercise", String(128), nullable=False),
        Column("lane", String(8), nullable=False),  # visible | hidden
        Column("passed", Boolean, nullable=False),
        Column("mistake", Text, nullable=True),  # the named mistake's message; None: generic
        Column("message", Text, nullable=False),  # the verdict's first line, as shown
        Column("recorded_at", String(32), nullable=False),
    )


def _engine(url: str):
    from sqlalchemy import MetaData, create_engine

    engine = create_engine(url, future=True)
    meta = MetaData()
    table = _table(meta)
    meta.create_all(engine, checkfirst=True)
    return engine, table


def exercise_of_cells() -> dict[str, tuple[str, str]]:
    """``grade_id`` -> (exercise, notebook), from ``checks/exercises.json`` (read, not imported)."""
    try:
        data = json.loads((_PACKAGE / "checks" / "exercises.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {
        cell["grade_id"]: (ex["name"], ex["notebook"])
        for ex in data.get("exercises", [])
        for cell in ex.get("cells", [])
    }


def store_verdicts(url: str, course_id: str, assignment: str, student: str,
                   fingerprint: str, verdicts: list[dict] | None, status: str,
                   builds_on: dict[str, tuple] | None = None) -> int:  # fmt: skip
    """Replace ``student``'s stored verdicts of ``assignment`` with this grading's; returns how
    many were stored. Nothing changes when the submission was not graded (the previous grade,
    and so its verdicts, stay) or the grading process sent none (an older grader).

    ``builds_on`` (``publish.failing_dependencies``): a failing cell whose answer calls an
    earlier failing answer is counted as "fails because <that exercise> fails", not as a mistake
    of its own (the check's message stays in ``message``)."""
    if verdicts is None or status not in _STORED:
        return 0
    cells = exercise_of_cells()
    builds_on = builds_on or {}

    def mistake(v: dict) -> str | None:
        if v.get("passed"):
            return None
        if v.get("grade_id") in builds_on:
            cause, names = builds_on[v["grade_id"]]
            return f"fails because {cells.get(cause, (cause,))[0]} fails (calls {names})"
        return v.get("mistake") or None

    stamp = now()
    rows = [
        {
            "course_id": course_id,
            "assignment": assignment,
            "student_id": student,
            "fingerprint": fingerprint or "",
            "grade_id": str(v.get("grade_id", "")),
            "exercise": cells.get(v.get("grade_id", ""), (None,))[0]
            or str(v.get("check", "")).removeprefix("check_")
            or str(v.get("grade_id", "")),
            "lane": HIDDEN if v.get("hidden") else VISIBLE,
            "passed": bool(v.get("passed")),
            "mistake": mistake(v),
            "message": str(v.get("message") or "")[:2000],
            "recorded_at": stamp,
        }
        for v in verdicts
    ]
    engine, table = _engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                table.delete().where(
                    table.c.course_id == course_id,
                    table.c.assignment == assignment,
                    table.c.student_id == student,
                )
            )
            if rows:
                conn.execute(table.insert(), rows)
    finally:
        engine.dispose()
    return len(rows)


def _first_clause(text: str) -> str:
    depth = 0
    for match in re.finditer(r"[()]|: |; |\. (?=[A-Z])| — ", text):
        mark = match.group(0)
        depth += {"(": 1, ")": -1}.get(mark, 0)
        if mark not in "()" and depth <= 0:  # a clause ends outside parentheses
            return text[: match.start()].strip().rstrip(".") or text[:120]
    return text.rstrip(".")


# Messages that open with what was observed and name the mistake after it.
_RAISED = re.compile(r"^your function raised (\w+)\b.*? — (.+)$", re.S)
_OBSERVED = re.compile(r"^[^.]*\bbut (?:received|yours (?:is|has|was))\b[^.]*\.\s+(?=[A-Z])")


def mistake_name(mistake: str | None) -> str:
    """How a mistake is counted: the catalogue message's first clause (its name), or GENERIC.

    ``"overflow: exp() of large scores is inf, ..."`` -> ``"overflow"``. Where the message opens
    with what was observed, the name is the diagnosis after it: ``"for T=3 ... the count is 72,
    but received 144. That is FLOPs ..."`` -> ``"That is FLOPs ..."``; ``"your function raised
    RuntimeError: ... — the reductions need keepdim=True ..."`` -> ``"raised RuntimeError: the
    reductions need keepdim=True ..."`` (so that one mistake is one row, whatever the case)."""
    if not mistake:
        return GENERIC
    text = mistake.strip()
    raised = _RAISED.match(text)
    if raised:
        return f"raised {raised.group(1)}: {_first_clause(raised.group(2).strip())}"
    observed = _OBSERVED.match(text)
    if observed and text[observed.end() :].strip():
        return _first_clause(text[observed.end() :].strip())
    return _first_clause(text)


# ---------------------------------------------------------------------------------------------
# reading the gradebook


@dataclass
class Verdict:
    student: str
    grade_id: str
    exercise: str
    lane: str
    passed: bool
    mistake: str | None
    message: str


@dataclass
class ClassRecord:
    """One assignment as the gradebook holds it (``read_class``)."""

    assignment: str
    students: list[str] = field(default_factory=list)  # submitted, in a stable order
    names: dict[str, str] = field(default_factory=dict)  # id -> "First Last" (or the id)
    exercises: list[str] = field(default_factory=list)  # in the course's order
    cell_exercise: dict[str, str] = field(default_factory=dict)  # grade_id -> exercise
    scores: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)
    verdicts: list[Verdict] = field(default_factory=list)
    set_aside: dict[str, str] = field(default_factory=dict)  # student -> the decision, in words


def _nbgrader_scores(conn, course_id: str, assignment: str):
    """(student, grade_id, score, max_score) of every graded cell of ``assignment``."""
    from sqlalchemy import text

    return conn.execute(
        text(
            "SELECT sa.student_id, bc.name, g.auto_score, g.manual_score, g.extra_credit, "
            "gc.max_score FROM grade g "
            "JOIN submitted_notebook sn ON g.notebook_id = sn.id "
            "JOIN submitted_assignment sa ON sn.assignment_id = sa.id "
            "JOIN assignment a ON sa.assignment_id = a.id "
            "JOIN grade_cells gc ON g.cell_id = gc.id "
            "JOIN base_cell bc ON gc.id = bc.id "
            "WHERE a.name = :a AND a.course_id = :c"
        ),
        {"a": assignment, "c": course_id},
    ).all()


def _names(conn) -> dict[str, str]:
    from sqlalchemy import text

    rows = conn.execute(text("SELECT id, first_name, last_name FROM student")).all()
    return {r[0]: " ".join(p for p in (r[1], r[2]) if p) or r[0] for r in rows}


def assignments_in(url: str, course_id: str) -> list[str]:
    """The assignments the gradebook has submissions of, in name order."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url, future=True)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT DISTINCT a.name FROM assignment a JOIN submitted_assignment sa "
                    "ON sa.assignment_id = a.id WHERE a.course_id = :c"
                ),
                {"c": course_id},
            ).all()
    finally:
        engine.dispose()
    return sorted(r[0] for r in rows)


def read_class(url: str, course_id: str, assignment: str) -> ClassRecord:
    """Everything :func:`count` needs about one assignment, from the gradebook alone."""
    from sqlalchemy import select

    engine, table = _engine(url)
    record = ClassRecord(assignment)
    cells = exercise_of_cells()
    prints: dict[str, str] = {}
    try:
        with engine.connect() as conn:
            record.names = _names(conn)
            for sid, gid, auto, manual, extra, top in _nbgrader_scores(conn, course_id, assignment):
                score = (manual if manual is not None else auto or 0.0) + (extra or 0.0)
                record.scores[(sid, gid)] = (float(score), float(top or 0.0))
            c = table.c
            rows = conn.execute(
                select(c.student_id, c.grade_id, c.exercise, c.lane, c.passed, c.mistake)
                .add_columns(c.message, c.fingerprint)
                .where(c.course_id == course_id, c.assignment == assignment)
                .order_by(c.id)
            )
            for *fields, fingerprint in rows:
                verdict = Verdict(*fields)
                record.verdicts.append(verdict)
                record.cell_exercise.setdefault(verdict.grade_id, verdict.exercise)
                prints[verdict.student] = fingerprint
    finally:
        engine.dispose()
    for _sid, gid in record.scores:
        record.cell_exercise.setdefault(gid, cells.get(gid, (gid.removesuffix("_tests"),))[0])
    order = [name for name, _nb in dict.fromkeys(cells.values())]
    found = set(record.cell_exercise.values())
    record.exercises = [e for e in order if e in found] + sorted(found - set(order))
    record.students = sorted({s for s, _ in record.scores} | set(prints))
    record.set_aside = _overridden(url, course_id, assignment, prints)
    return record


def _overridden(url: str, course_id: str, assignment: str, prints: dict[str, str]):
    """Students whose latest review decision on the submission graded set its score."""
    from transformer_lab.grading.record.decisions import OVERRIDE, describe, latest_decisions
    from transformer_lab.grading.record.report import GradingReport, StudentResult

    report = GradingReport(assignment)
    for sid, fingerprint in prints.items():
        report.students[sid] = StudentResult(sid, fingerprint=fingerprint)
    latest = latest_decisions(url, course_id, report)
    return {sid: describe(d) for sid, d in latest.items() if d.decision == OVERRIDE}


# ---------------------------------------------------------------------------------------------
# counting


@dataclass
class MistakeCount:
    name: str  # mistake_name(...), or GENERIC
    named: bool
    lane: str  # visible | hidden | "visible, hidden" (made in both by different students)
    students: list[str]
    share: float  # of the exercise's class
    example: str  # one verdict's message, as a student saw it


@dataclass
class ExerciseInsight:
    exercise: str
    class_size: int  # students counted (verdicts recorded, not set aside)
    passed: int
    fractions: list[float]  # each counted student's score / max for this exercise
    mistakes: list[MistakeCount]

    @property
    def pass_rate(self) -> float:
        return self.passed / self.class_size if self.class_size else 0.0


@dataclass
class Insights:
    assignment: str
    students: list[str]  # every student with a submission, stable order
    exercises: list[ExerciseInsight]
    fraction: dict[tuple[str, str], float]  # (student, exercise) -> score / max
    set_aside: dict[str, str]
    names: dict[str, str]


def _exercise_fractions(record: ClassRecord) -> dict[tuple[str, str], float]:
    got: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for (sid, gid), (score, top) in record.scores.items():
        pair = got[(sid, record.cell_exercise.get(gid, gid))]
        pair[0] += score
        pair[1] += top
    return {key: (s / t if t else 0.0) for key, (s, t) in got.items()}


def count(record: ClassRecord) -> Insights:
    """Per exercise: who passed every check, the score distribution, the mistakes ranked by the
    number of students who made them (a student counts once per mistake)."""
    fraction = _exercise_fractions(record)
    by_exercise: dict[str, dict[str, list[Verdict]]] = defaultdict(lambda: defaultdict(list))
    for v in record.verdicts:
        if v.student not in record.set_aside:
            by_exercise[v.exercise][v.student].append(v)
    out = []
    for exercise in record.exercises:
        students = by_exercise.get(exercise, {})
        size = len(students)
        passed = sum(all(v.passed for v in vs) for vs in students.values())
        made: dict[str, dict[str, Verdict]] = defaultdict(dict)  # name -> student -> first
        for sid in sorted(students):
            for v in students[sid]:
                if not v.passed:
                    made[mistake_name(v.mistake)].setdefault(sid, v)
        mistakes = [
            MistakeCount(
                name,
                name != GENERIC,
                ", ".join(sorted({v.lane for v in who.values()}, key=[VISIBLE, HIDDEN].index)),
                sorted(who),
                len(who) / size if size else 0.0,
                next(iter(who.values())).message,
            )
            for name, who in made.items()
        ]
        mistakes.sort(key=lambda m: (-len(m.students), not m.named, m.name))
        counted = [s for s in record.students if s not in record.set_aside and s in students]
        fractions = [fraction.get((s, exercise), 0.0) for s in counted]
        out.append(ExerciseInsight(exercise, size, passed, fractions, mistakes))
    return Insights(
        record.assignment, record.students, out, fraction, record.set_aside, record.names
    )


def csv_rows(insights: Insights) -> list[list]:
    """The CSV's rows (without its header) for one assignment."""
    rows = []
    for ex in insights.exercises:
        for m in ex.mistakes:
            rows.append(
                [
                    insights.assignment,
                    ex.exercise,
                    m.name,
                    "yes" if m.named else "no",
                    m.lane,
                    len(m.students),
                    f"{m.share:.3f}",
                    ex.class_size,
                    m.example,
                ]
            )
    return rows


def write_csv(all_insights: list[Insights], path: Path) -> Path:
    """One row per exercise and mistake (formula-looking cells neutralised: grading/inert.py)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv_writer(fh)
        writer.writerow(CSV_COLUMNS)
        for insights in all_insights:
            writer.writerows(csv_rows(insights))
    return path


def resolve_assignment(wanted: str, known: list[str]) -> str:
    """``01`` or ``01_self_attention`` -> the assignment of the gradebook it names."""
    if wanted in known:
        return wanted
    found = [a for a in known if a.split("_", 1)[0] == wanted or a.startswith(wanted)]
    if len(found) == 1:
        return found[0]
    listed = ", ".join(known) or "none"
    if not found:
        raise ValueError(f"expected an assignment of the gradebook ({listed}), but got {wanted!r}")
    raise ValueError(f"{wanted!r} names several assignments ({', '.join(found)}); give one in full")
