"""The grading report: who was graded with what score, and who could not be graded and why.

nbgrader's CSV export shows 0.0 both for a real zero and for a submission that could not be
run (a dead kernel, a file that is not a notebook). The report written here keeps them apart:
every row has a ``status`` column, and a submission that was not graded has an *empty* score
and a ``reason``. The report is rebuilt on every run from a small JSON store, so students graded
in earlier runs keep their rows and scores; a failed regrade keeps the last good score in
``previous_score``.

Files (per assignment A, under the course directory):
    reports/A_grades.csv      the report (open it in a spreadsheet)
    .tlab/grading/A.json      the store behind it
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from transformer_lab.grading.inert import csv_dict_writer

__all__ = [
    "StudentResult",
    "GradingReport",
    "report_lock",
    "merge_stored",
    "report_lock",
    "merge_stored",
    "GRADED",
    "NOT_GRADED",
    "NEEDS_REVIEW",
]

GRADED = "graded"
NOT_GRADED = "not_graded"
NEEDS_REVIEW = "needs_review"  # graded, but a person must look before the score is used
CSV_COLUMNS = [
    "assignment",
    "student_id",
    "status",
    "score",
    "max_score",
    "autograded_score",
    "late_penalty",
    "decision",
    "reason",
    "flags",
    "notes",
    "previous_score",
    "graded_at",
    "seconds",
]


@dataclass
class StudentResult:
    """The latest grading outcome of one student."""

    student_id: str
    status: str = NOT_GRADED
    score: float | None = None
    max_score: float | None = None
    reason: str = ""
    notes: list[str] = field(default_factory=list)
    previous_score: float | None = None
    graded_at: str = ""
    seconds: float | None = None
    fingerprint: str = ""
    timeouts: int = 0
    flags: list[str] = field(default_factory=list)  # why a person should look (NEEDS_REVIEW)
    handed_in: str = ""  # nbgrader's timestamp.txt, ISO 8601 UTC ("" = none)
    tests_note: str = ""  # graded again after the tests changed, or kept under old tests


@dataclass
class GradingReport:
    """All students of one assignment, persisted between runs."""

    assignment: str
    max_score: float | None = None
    students: dict[str, StudentResult] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    graded_now: list[str] = field(default_factory=list)  # processed in this run
    # needs_review submissions a person has decided on (student -> the decision, in words):
    # read from the gradebook's decisions table by ``tlab grade`` (decisions.py), not stored
    reviewed: dict[str, str] = field(default_factory=dict)
    # each student's decided grade (ledger.FinalGrade), set by channels/publish.settle: the CSV's status
    # and score are the decided ones when it is known, the autograded score beside them
    finals: dict = field(default_factory=dict)

    # -- persistence ----------------------------------------------------------------------
    @staticmethod
    def store_path(root: Path, assignment: str) -> Path:
        return root / ".tlab" / "grading" / f"{assignment}.json"

    @staticmethod
    def csv_path(root: Path, assignment: str) -> Path:
        return root / "reports" / f"{assignment}_grades.csv"

    @classmethod
    def load(cls, root: Path, assignment: str) -> GradingReport:
        path = cls.store_path(root, assignment)
        report = cls(assignment)
        if path.is_file():
            data = json.loads(path.read_text(encoding="utf-8"))
            report.max_score = data.get("max_score")
            for sid, row in data.get("students", {}).items():
                report.students[sid] = StudentResult(**row)
        return report

    def save(self, root: Path) -> Path:
        store = self.store_path(root, self.assignment)
        store.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "assignment": self.assignment,
            "max_score": self.max_score,
            "students": {sid: asdict(r) for sid, r in sorted(self.students.items())},
        }
        tmp = store.with_name(f"{store.name}.{os.getpid()}.tmp")  # one per process
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        tmp.replace(store)  # atomic: an interrupted run never leaves half a store
        out = self.csv_path(root, self.assignment)
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("w", newline="", encoding="utf-8") as fh:
            writer = csv_dict_writer(fh, CSV_COLUMNS)
            writer.writeheader()
            for sid, r in sorted(self.students.items()):
                writer.writerow(self._csv_row(sid, r))
        return out

    def _csv_row(self, sid: str, r: StudentResult) -> dict:
        """The CSV's row: the decided status and score when known, the autograded one beside."""
        final = self.finals.get(sid)
        status, score = r.status, r.score
        decision, penalty = "", ""
        if final is not None:
            status, score = final.status, final.score
            if final.decision is not None:
                decision = final.decision.describe()
            penalty = _num(final.late_penalty) if final.late_seconds > 0 else ""
        notes = r.notes + ([r.tests_note] if r.tests_note else [])
        return {
            "assignment": self.assignment,
            "student_id": sid,
            "status": status,
            "score": "" if score is None else _num(score),
            "max_score": "" if r.max_score is None else _num(r.max_score),
            "autograded_score": "" if r.score is None else _num(r.score),
            "late_penalty": penalty,
            "decision": decision,
            "reason": r.reason,
            "flags": "; ".join(r.flags),
            "notes": "; ".join(notes),
            "previous_score": "" if r.previous_score is None else _num(r.previous_score),
            "graded_at": r.graded_at,
            "seconds": "" if r.seconds is None else f"{r.seconds:.1f}",
        }

    # -- summary --------------------------------------------------------------------------
    @property
    def all_graded(self) -> bool:
        """Every submission has a score (some may still need review)."""
        return all(r.status in (GRADED, NEEDS_REVIEW) for r in self.students.values())

    @property
    def flagged(self) -> list[StudentResult]:
        """Submissions that need review and have no decision yet."""
        return [
            r
            for sid, r in sorted(self.students.items())
            if r.status == NEEDS_REVIEW and sid not in self.reviewed
        ]

    def summary(self) -> str:
        lines = [
            f"Grading report for {self.assignment} (max score "
            f"{_num(self.max_score) if self.max_score is not None else '?'}):"
        ]
        graded = [r for r in self.students.values() if r.status in (GRADED, NEEDS_REVIEW)]
        failed = [r for r in self.students.values() if r.status not in (GRADED, NEEDS_REVIEW)]
        width = max([len(s) for s in self.students] + [7])
        for r in sorted(graded, key=lambda r: r.student_id):
            fresh = "" if r.student_id in self.graded_now else "  (earlier run)"
            notes = f"  [{'; '.join(r.notes)}]" if r.notes else ""
            review = ""
            if r.status == NEEDS_REVIEW:
                decided = self.reviewed.get(r.student_id)
                review = f"  REVIEWED: {decided}" if decided else "  NEEDS REVIEW"
            lines.append(
                f"  {r.student_id:<{width}}  {_num(r.score):>6} / {_num(r.max_score)}{review}{fresh}{notes}"
            )
        if failed:
            lines.append("Could not be graded (no score recorded; NOT a zero):")
            for r in sorted(failed, key=lambda r: r.student_id):
                prev = (
                    f" (previous score {_num(r.previous_score)} kept)"
                    if r.previous_score is not None
                    else ""
                )
                lines.append(f"  {r.student_id:<{width}}  {r.reason}{prev}")
        if self.flagged:
            lines.append("Flagged for review (score kept until a person has looked):")
            for r in self.flagged:
                lines.append(f"  {r.student_id:<{width}}  {r.reason}")
        decided = sum(
            1 for r in graded if r.status == NEEDS_REVIEW and r.student_id in self.reviewed
        )
        lines.append(
            f"In the report: {len(graded)} graded, {len(failed)} could not be graded "
            f"({len(self.flagged)} of the graded need review"
            + (f"; {decided} reviewed)." if decided else ").")
        )
        for w in self.warnings:
            lines.append(f"warning: {w}")
        return "\n".join(lines)


def _num(x: float | None) -> str:
    if x is None:
        return ""
    return str(int(x)) if float(x).is_integer() else f"{x:.2f}"


@contextlib.contextmanager
def report_lock(root: Path, assignment: str):
    """Held while a process reads, merges and writes the stored report of ``assignment``
    (several ``tlab grade`` processes, shards, ``tlab review`` may write it at once): the
    gradebook's file lock (reentrant within a process) on ``<store>.lock``."""
    from transformer_lab.grading.record.gradebook import _file_lock

    lock = _file_lock(GradingReport.store_path(root, assignment))
    lock.acquire()
    try:
        yield
    finally:
        lock.release()


def merge_stored(report: GradingReport, root: Path) -> None:
    """``report`` takes the stored report's rows (what other processes saved), keeping its own
    rows graded in this run; call it holding :func:`report_lock`."""
    merged = GradingReport.load(root, report.assignment)
    for sid in report.graded_now:
        merged.students[sid] = report.students[sid]
    if report.max_score is not None:
        merged.max_score = report.max_score
    report.students = merged.students
    report.max_score = merged.max_score
