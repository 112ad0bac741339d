"""``tlab review``: list the open reviews, show one student's evidence, or record a decision.

The decisions themselves, their table and nbgrader's flags are :mod:`.decisions`.
"""

from __future__ import annotations

from pathlib import Path

from transformer_lab.grading.channels.publish import settle
from transformer_lab.grading.record.decisions import (
    ACCEPT,
    OVERRIDE,
    Decision,
    course_id_of,
    decision_history,
    describe,
    formgrader_resolutions,
    latest_decisions,
    open_reviews,
    record_decision,
    sync_flags,
)
from transformer_lab.grading.record.ledger import describe_change, score_history
from transformer_lab.grading.record.report import NEEDS_REVIEW, GradingReport

__all__ = ["review"]


def review(
    root: Path,
    assignment: str,
    student: str | None = None,
    accept: bool = False,
    score: float | None = None,
    note: str = "",
    by: str = "",
) -> str:
    """``tlab review``: list open reviews, show one student's evidence, or record a decision."""
    from transformer_lab.grading.course import CourseError
    from transformer_lab.grading.record.gradebook import (
        check_database,
        gradebook_url,
        guard_gradebook,
    )

    root = Path(root).resolve()
    report = GradingReport.load(root, assignment)
    if not report.students:
        raise CourseError(
            f"expected a grading report for {assignment}, but it has not been graded yet."
        )
    url, course = gradebook_url(root), course_id_of(root)
    check_database(url)
    guard_gradebook(url)
    found = formgrader_resolutions(url, course, report)
    lines = [f"recorded: {d.student_id} resolved in the formgrader ({d.note})" for d in found]
    if found:
        settle(
            root, report, "resolved in the formgrader", "formgrader", [d.student_id for d in found]
        )
    if student is None:
        return "\n".join(lines + _listing(url, course, report))
    row = report.students.get(student)
    if row is None:
        raise CourseError(f"expected a student graded in {assignment}, but got {student!r}.")
    if accept or score is not None:
        d = _decide(url, course, report, student, accept, score, note, by)
        settle(root, report, f"review: {describe(d)}", d.decided_by, [student])
        return "\n".join([*lines, f"recorded: {student} {describe(d)}"])
    return "\n".join(lines + _evidence(url, course, report, student))


def _listing(url: str, course: str, report: GradingReport) -> list[str]:
    """The open reviews, then the decided ones."""
    decided = latest_decisions(url, course, report)
    open_ = open_reviews(report, decided)
    lines = [f"{report.assignment}: {len(open_)} submission(s) to review"]
    lines += [f"  {sid:<16} {report.students[sid].reason}" for sid in open_]
    done = [sid for sid in sorted(decided) if report.students[sid].status == NEEDS_REVIEW]
    if done:
        lines.append("reviewed:")
        lines += [f"  {sid:<16} {describe(decided[sid])}" for sid in done]
    return lines


def _decide(url, course, report, student, accept, score, note, by) -> Decision:
    """Record an accept or an override of one flagged submission (checked first)."""
    from transformer_lab.grading.course import CourseError

    row = report.students[student]
    if accept and score is not None:
        raise CourseError("expected either --accept or --score, but got both.")
    if row.status != NEEDS_REVIEW:
        raise CourseError(
            f"expected a submission that needs review, but {student}'s status is {row.status}."
        )
    if score is not None and row.max_score is not None and not 0 <= score <= row.max_score:
        raise CourseError(f"expected a score between 0 and {row.max_score:g}, but got {score:g}.")
    kind = ACCEPT if accept else OVERRIDE
    try:
        d = record_decision(
            url,
            course,
            Decision(report.assignment, student, row.fingerprint, kind, score, note, by, ""),
        )
    except ValueError as exc:
        raise CourseError(str(exc)) from None
    sync_flags(url, course, report, [student])
    return d


def _evidence(url: str, course: str, report: GradingReport, student: str) -> list[str]:
    """One student's status, flags, notes, decisions and grade history."""
    row = report.students[student]
    lines = [
        f"{report.assignment} / {student}: {row.status}, score {row.score} of {row.max_score}"
        f" (graded {row.graded_at})",
        "flags:" if row.flags else "flags: none",
        *[f"  - {f}" for f in row.flags],
        "notes:" if row.notes else "notes: none",
        *[f"  - {n}" for n in row.notes],
    ]
    history = decision_history(url, course, report.assignment, student)
    lines.append("history:" if history else "history: none")
    for d in history:
        stale = "" if d.fingerprint == row.fingerprint else " (on an earlier submission)"
        lines.append(f"  {describe(d)}{stale}")
    changes = score_history(url, course, report.assignment).get(student, [])
    lines.append("grade changes:" if changes else "grade changes: none")
    lines += [f"  {describe_change(h)}" for h in changes]
    return lines
