"""``tlab review``: list the open reviews, show one student's evidence, or record a decision.

The decisions themselves, their table and nbgrader's flags are :mod:`.decisions`.
"""

from __future__ import annotations

from pathlib import Path

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
    from transformer_lab.grading.record.gradebook import gradebook_url, guard_gradebook

    root = Path(root).resolve()
    report = GradingReport.load(root, assignment)
    if not report.students:
        raise CourseError(
            f"expected a grading report for {assignment}, but it has not been graded yet."
        )
    url, course = gradebook_url(root), course_id_of(root)
    guard_gradebook(url)
    found = formgrader_resolutions(url, course, report)
    lines = [f"recorded: {d.student_id} resolved in the formgrader ({d.note})" for d in found]
    decided = latest_decisions(url, course, report)
    if student is None:
        open_ = open_reviews(report, decided)
        lines.append(f"{assignment}: {len(open_)} submission(s) to review")
        for sid in open_:
            lines.append(f"  {sid:<16} {report.students[sid].reason}")
        done = [sid for sid in sorted(decided) if report.students[sid].status == NEEDS_REVIEW]
        if done:
            lines.append("reviewed:")
            for sid in done:
                d = decided[sid]
                lines.append(f"  {sid:<16} {describe(d)}")
        return "\n".join(lines)
    row = report.students.get(student)
    if row is None:
        raise CourseError(f"expected a student graded in {assignment}, but got {student!r}.")
    if accept or score is not None:
        if accept and score is not None:
            raise CourseError("expected either --accept or --score, but got both.")
        if row.status != NEEDS_REVIEW:
            raise CourseError(
                f"expected a submission that needs review, but {student}'s status is {row.status}."
            )
        if score is not None and row.max_score is not None and not 0 <= score <= row.max_score:
            raise CourseError(
                f"expected a score between 0 and {row.max_score:g}, but got {score:g}."
            )
        try:
            d = record_decision(
                url,
                course,
                Decision(
                    assignment,
                    student,
                    row.fingerprint,
                    ACCEPT if accept else OVERRIDE,
                    score,
                    note,
                    by,
                    "",
                ),
            )
        except ValueError as exc:
            raise CourseError(str(exc)) from None
        sync_flags(url, course, report, [student])
        lines.append(f"recorded: {student} {describe(d)}")
        return "\n".join(lines)
    lines += [
        f"{assignment} / {student}: {row.status}, score {row.score} of {row.max_score}"
        f" (graded {row.graded_at})",
        "flags:" if row.flags else "flags: none",
        *[f"  - {f}" for f in row.flags],
        "notes:" if row.notes else "notes: none",
        *[f"  - {n}" for n in row.notes],
    ]
    history = decision_history(url, course, assignment, student)
    lines.append("history:" if history else "history: none")
    for d in history:
        stale = "" if d.fingerprint == row.fingerprint else " (on an earlier submission)"
        lines.append(f"  {describe(d)}{stale}")
    return "\n".join(lines)
