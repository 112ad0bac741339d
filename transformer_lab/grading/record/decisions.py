"""The review workflow: flagged submissions, and the instructor's decision on each (``tlab review``).

``tlab grade`` gives a submission the status ``needs_review`` when its score should not be used
before a person has looked (a cell stopped at the time limit, a suspicious edit, ...). It also
sets nbgrader's ``flagged`` on the submission's notebooks, so the formgrader's "Flagged?"
column lists it. A review is resolved in one of two ways:

- ``tlab review ASSIGNMENT STUDENT --accept --note WHY`` (keep the score) or
  ``--score X --note WHY`` (use X instead);
- in the formgrader: give a manual grade, or clear the flag. The next ``tlab review`` or
  ``tlab export`` records that as a decision made "in the formgrader".

Every decision is a row of the table ``tlab_review_decisions`` in the gradebook's own database
(SQLite or PostgreSQL; created if missing): who, when, why, and the fingerprint of the
submission it was made on. A decision holds only for that submission: a changed submission is
flagged again and needs a new one. ``tlab export`` writes resolved submissions. The command
itself (listing, showing, deciding) is :mod:`.review_command`.
"""

from __future__ import annotations

import datetime as _dt
import getpass
from dataclasses import dataclass
from pathlib import Path

from transformer_lab.grading.record.report import NEEDS_REVIEW, GradingReport

__all__ = [
    "TABLE",
    "Decision",
    "record_decision",
    "latest_decisions",
    "sync_flags",
    "formgrader_resolutions",
    "open_reviews",
    "reviewed",
]

TABLE = "tlab_review_decisions"
ACCEPT, OVERRIDE, FORMGRADER = "accept", "override", "formgrader"
FLAGGED = "flagged"  # not a decision: tlab grade set nbgrader's flag (the evidence it was set)


@dataclass
class Decision:
    assignment: str
    student_id: str
    fingerprint: str
    decision: str  # accept | override | formgrader
    score: float | None  # the score to export (None: the gradebook's score)
    note: str
    decided_by: str
    decided_at: str

    def describe(self) -> str:
        """The decision in words: what was decided, by whom, when and why."""
        if self.decision == FLAGGED:
            return f"flagged by {self.decided_by} at {self.decided_at}: {self.note}"
        what = {
            ACCEPT: "score accepted",
            OVERRIDE: f"score set to {self.score:g}" if self.score is not None else "override",
        }
        done = what.get(self.decision, "resolved in the formgrader")
        return f"{done} by {self.decided_by} at {self.decided_at}: {self.note}"


def _table():
    from sqlalchemy import Column, Float, Integer, MetaData, String, Table, Text

    meta = MetaData()
    table = Table(
        TABLE,
        meta,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("course_id", String(128), nullable=False),
        Column("assignment", String(128), nullable=False),
        Column("student_id", String(128), nullable=False),
        Column("fingerprint", String(128), nullable=False),
        Column("decision", String(16), nullable=False),
        Column("score", Float, nullable=True),
        Column("note", Text, nullable=False),
        Column("decided_by", String(128), nullable=False),
        Column("decided_at", String(32), nullable=False),
    )
    return meta, table


def _engine(url: str):
    from sqlalchemy import create_engine

    engine = create_engine(url, future=True)
    meta, table = _table()
    meta.create_all(engine, checkfirst=True)
    return engine, table


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def record_decision(url: str, course_id: str, decision: Decision) -> Decision:
    """Append ``decision`` to the gradebook's decisions table (earlier ones are kept)."""
    if decision.decision not in (ACCEPT, OVERRIDE, FORMGRADER, FLAGGED):
        raise ValueError(
            f"expected a decision accept, override or formgrader, but got {decision.decision!r}"
        )
    if not decision.note.strip():
        raise ValueError("expected a note saying why, but got an empty note")
    decision.decided_at = decision.decided_at or _now()
    decision.decided_by = decision.decided_by or getpass.getuser()
    engine, table = _engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                table.insert().values(
                    course_id=course_id,
                    assignment=decision.assignment,
                    student_id=decision.student_id,
                    fingerprint=decision.fingerprint,
                    decision=decision.decision,
                    score=decision.score,
                    note=decision.note,
                    decided_by=decision.decided_by,
                    decided_at=decision.decided_at,
                )
            )
    finally:
        engine.dispose()
    return decision


def decision_history(url: str, course_id: str, assignment: str, student: str) -> list[Decision]:
    """Every decision on one student's submission, oldest first."""
    return [d for d in _all_decisions(url, course_id, assignment) if d.student_id == student]


def _all_decisions(url: str, course_id: str, assignment: str) -> list[Decision]:
    engine, table = _engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                table.select()
                .where(table.c.course_id == course_id, table.c.assignment == assignment)
                .order_by(table.c.id)
            ).mappings()
            return [
                Decision(
                    r["assignment"],
                    r["student_id"],
                    r["fingerprint"],
                    r["decision"],
                    r["score"],
                    r["note"],
                    r["decided_by"],
                    r["decided_at"],
                )
                for r in rows
            ]
    finally:
        engine.dispose()


def latest_decisions(url: str, course_id: str, report: GradingReport) -> dict[str, Decision]:
    """The latest decision per student that was made on the submission graded now."""
    latest: dict[str, Decision] = {}
    for d in _all_decisions(url, course_id, report.assignment):
        row = report.students.get(d.student_id)
        if row is not None and row.fingerprint == d.fingerprint and d.decision != FLAGGED:
            latest[d.student_id] = d
    return latest


def _submission_notebooks(gb, assignment: str, student: str):
    from nbgrader.api import MissingEntry

    try:
        return list(gb.find_submission(assignment, student).notebooks)
    except MissingEntry:
        return []


def sync_flags(url: str, course_id: str, report: GradingReport, students: list[str]) -> None:
    """Set nbgrader's ``flagged`` of ``students``' submissions from their report status."""
    from nbgrader.api import Gradebook

    resolved = latest_decisions(url, course_id, report)
    flagged_before = _flagged_fingerprints(url, course_id, report.assignment)
    overridden = {
        d.student_id
        for d in _all_decisions(url, course_id, report.assignment)
        if d.decision == OVERRIDE
    }
    newly: list[Decision] = []
    with Gradebook(url, course_id) as gb:
        for sid in students:
            row = report.students.get(sid)
            if row is None:
                continue
            flag = row.status == NEEDS_REVIEW and sid not in resolved
            notebooks = _submission_notebooks(gb, report.assignment, sid)
            for nb in notebooks:
                nb.flagged = flag
            gb.db.commit()
            if flag and notebooks and (sid, row.fingerprint) not in flagged_before:
                if sid in overridden:  # tlab's manual scores were for the earlier submission
                    _clear_manual(notebooks)
                    gb.db.commit()
                newly.append(
                    Decision(
                        report.assignment,
                        sid,
                        row.fingerprint,
                        FLAGGED,
                        None,
                        row.reason or "needs review",
                        "tlab grade",
                        "",
                    )
                )
    for d in newly:
        record_decision(url, course_id, d)


def _clear_manual(notebooks) -> None:
    """Remove the manual scores tlab wrote for an override (see channels/publish.settle)."""
    for nb in notebooks:
        for grade in nb.grades:
            grade.manual_score = None
            grade.needs_manual_grade = grade.auto_score is None


def _flagged_fingerprints(url: str, course_id: str, assignment: str) -> set[tuple[str, str]]:
    return {
        (d.student_id, d.fingerprint)
        for d in _all_decisions(url, course_id, assignment)
        if d.decision == FLAGGED
    }


def formgrader_resolutions(url: str, course_id: str, report: GradingReport) -> list[Decision]:
    """Record (and return) reviews resolved in the formgrader since the last look.

    A ``needs_review`` submission without a decision is resolved in the formgrader when its
    flag was cleared there, or when it has a manual grade there.
    """
    from nbgrader.api import Gradebook

    decided = latest_decisions(url, course_id, report)
    flagged = _flagged_fingerprints(url, course_id, report.assignment)
    found: list[Decision] = []
    with Gradebook(url, course_id) as gb:
        for sid, row in sorted(report.students.items()):
            if row.status != NEEDS_REVIEW or sid in decided:
                continue
            if (sid, row.fingerprint) not in flagged:
                continue  # tlab never set this flag: a clear one proves nothing
            notebooks = _submission_notebooks(gb, report.assignment, sid)
            if not notebooks:
                continue
            manual = [g for nb in notebooks for g in nb.grades if g.manual_score is not None]
            if manual:
                why = "manual grade given in the formgrader"
            elif not any(nb.flagged for nb in notebooks):
                why = "flag cleared in the formgrader"
            else:
                continue
            found.append(
                Decision(
                    report.assignment, sid, row.fingerprint, FORMGRADER, None, why, "formgrader", ""
                )
            )
    for d in found:
        record_decision(url, course_id, d)
    return found


def reviewed(url: str, course_id: str, report: GradingReport) -> dict[str, str]:
    """needs_review submissions with a decision on them (student -> the decision, in words)."""
    return {
        sid: describe(d)
        for sid, d in latest_decisions(url, course_id, report).items()
        if report.students[sid].status == NEEDS_REVIEW
    }


def open_reviews(report: GradingReport, decided: dict[str, Decision]) -> list[str]:
    """Students whose submission needs review and has no decision yet."""
    return [
        sid
        for sid, r in sorted(report.students.items())
        if r.status == NEEDS_REVIEW and sid not in decided
    ]


def course_id_of(root: Path) -> str:
    from traitlets.config.loader import PyFileConfigLoader

    cfg = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    return cfg.get("CourseDirectory", {}).get("course_id", "default_course")


def describe(d: Decision) -> str:
    """One decision in words (:meth:`Decision.describe`)."""
    return d.describe()
