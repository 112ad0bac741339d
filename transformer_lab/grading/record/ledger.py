"""The grade record: one decided grade per submission, and its history.

A submission's grade is decided from, in order: its autograded score (``tlab grade``'s report
and nbgrader's gradebook), the instructor's latest decision on that very submission
(:mod:`.decisions`), and the late policy with the student's extension (:mod:`.late`). The
decided grade (:class:`FinalGrade`) is then written to every channel by
``channels/publish.settle``, with this module's :func:`write_gradebook` and
:func:`append_history`:

- nbgrader's gradebook: an override becomes the manual score of the submission's graded cells
  (so the formgrader, nbgrader's export and nbgrader's own ``generate_feedback`` show it); the
  late penalty becomes nbgrader's ``late_submission_penalty``; the hand-in time and extension
  nbgrader's ``timestamp`` and ``extension``;
- the feedback pages in ``feedback/`` (what ``nbgrader release_feedback`` sends): the decided
  grade in the heading, and a box saying how it was decided; a flagged submission without a
  decision says "under review" and shows no final grade (``channels/publish``);
- the report CSV (``status`` ``reviewed`` and the decided ``score``, the autograded score
  beside it) and the LMS files (``channels/export``);
- the history (table ``tlab_score_history``): every change of the decided grade, old and new,
  what changed it, who and when.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from pathlib import Path

from transformer_lab.grading.record.decisions import ACCEPT, FORMGRADER, OVERRIDE, Decision
from transformer_lab.grading.record.late import LatePolicy, lateness
from transformer_lab.grading.record.report import GRADED, NEEDS_REVIEW, GradingReport
from transformer_lab.grading.record.tables import connect, now

__all__ = [
    "FinalGrade",
    "final_grade",
    "final_grades",
    "write_gradebook",
    "append_history",
    "score_history",
    "REVIEWED",
]

REVIEWED = "reviewed"  # needs_review, and a person has decided: the decided grade holds
UNDER_REVIEW = NEEDS_REVIEW


@dataclass
class FinalGrade:
    """One submission's decided grade and how it came to be."""

    student_id: str
    status: str  # graded | reviewed | needs_review | not_graded
    score: float | None  # the grade to release (None: none yet, never 0)
    max_score: float | None
    autograded: float | None
    late_seconds: float = 0.0
    late_factor: float = 1.0
    decision: Decision | None = None
    reason: str = ""

    before_late: float | None = None  # the grade before the late policy

    @property
    def late_penalty(self) -> float:
        """Points taken for lateness."""
        if self.score is None or self.before_late is None:
            return 0.0
        return round(self.before_late - self.score, 2)

    def late_text(self) -> str:
        if self.late_seconds <= 0:
            return ""
        hours = self.late_seconds / 3600
        when = f"{hours:.1f} h" if hours < 48 else f"{hours / 24:.1f} days"
        if self.late_factor >= 1.0:
            return f"handed in {when} after the due date (no penalty)"
        return f"handed in {when} after the due date: -{self.late_penalty:g} points"


def final_grade(
    row,
    decision: Decision | None,
    policy: LatePolicy | None,
    gradebook_score: float | None = None,
) -> FinalGrade:
    """The decided grade of one report row (see the module's docstring)."""
    final = FinalGrade(row.student_id, row.status, None, row.max_score, row.score)
    if row.status not in (GRADED, NEEDS_REVIEW):
        final.reason = row.reason or "not graded"
        return final
    base = row.score
    if row.status == NEEDS_REVIEW:
        if decision is None:
            final.reason = row.reason or "flagged for review"
            return final  # under review: no final grade yet
        final.status, final.decision = REVIEWED, decision
        if decision.decision == OVERRIDE:
            base = decision.score
        elif decision.decision == FORMGRADER and gradebook_score is not None:
            base = gradebook_score
    if policy is not None and row.handed_in:
        handed = _dt.datetime.fromisoformat(row.handed_in)
        final.late_seconds = lateness(policy, row.student_id, handed)
        final.late_factor = policy.factor(final.late_seconds)
    final.before_late = base
    final.score = None if base is None else round(base * final.late_factor, 2)
    return final


def final_grades(root: Path, report: GradingReport) -> dict[str, FinalGrade]:
    """Every student's decided grade in ``report`` (reads decisions, policy and gradebook)."""
    from transformer_lab.grading.record.decisions import course_id_of, latest_decisions
    from transformer_lab.grading.record.gradebook import gradebook_url
    from transformer_lab.grading.record.late import policy_of

    url, course = gradebook_url(root), course_id_of(root)
    decided = latest_decisions(url, course, report)
    policy = policy_of(url, course, report.assignment)
    scores = _gradebook_scores(url, course, report.assignment)
    return {
        sid: final_grade(row, decided.get(sid), policy, scores.get(sid))
        for sid, row in report.students.items()
    }


def _gradebook_scores(url: str, course: str, assignment: str) -> dict[str, float]:
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(url, course) as gb:
        try:
            subs = gb.find_assignment(assignment).submissions
        except MissingEntry:
            return {}
        return {s.student.id: float(s.score) for s in subs}


# -- settling: the decided grade written to every channel ---------------------------------------


def write_gradebook(url, course, report, students, root) -> None:
    """Overrides as manual scores, the hand-in time, extension and late penalty in nbgrader."""
    from nbgrader.api import Gradebook, MissingEntry

    from transformer_lab.grading.record.decisions import _all_decisions, latest_decisions
    from transformer_lab.grading.record.late import policy_of

    decided = latest_decisions(url, course, report)
    history = _all_decisions(url, course, report.assignment)
    policy = policy_of(url, course, report.assignment)
    with Gradebook(url, course) as gb:
        for sid in students:
            try:
                sub = gb.find_submission(report.assignment, sid)
            except MissingEntry:
                continue
            d = decided.get(sid)
            overridden_before = any(h.student_id == sid and h.decision == OVERRIDE for h in history)
            if d is not None and d.decision == OVERRIDE and d.score is not None:
                _set_manual(sub, d.score)
            elif overridden_before and (d is None or d.decision == ACCEPT):
                _set_manual(sub, None)  # tlab's override no longer holds: autograded again
            _set_late(sub, report.students.get(sid), policy)
        gb.db.commit()


def autograded_scores(url: str, course: str, assignment: str, students: list[str]) -> dict:
    """The autograded score (the cells' auto scores, without the manual scores an override
    wrote) of those of ``students`` that an override was ever recorded for."""
    from nbgrader.api import Gradebook, MissingEntry

    from transformer_lab.grading.record.decisions import _all_decisions

    overridden = {
        d.student_id for d in _all_decisions(url, course, assignment) if d.decision == OVERRIDE
    }
    found = {}
    with Gradebook(url, course) as gb:
        for sid in sorted(set(students) & overridden):
            try:
                sub = gb.find_submission(assignment, sid)
            except MissingEntry:
                continue
            found[sid] = float(sum(g.auto_score or 0.0 for nb in sub.notebooks for g in nb.grades))
    return found


def _set_manual(submission, score: float | None) -> None:
    """Spread ``score`` over the graded cells, in order (None: remove the manual scores)."""
    left = score
    for nb in sorted(submission.notebooks, key=lambda n: n.name):
        for grade in sorted(nb.grades, key=lambda g: g.name):
            if left is None:
                grade.manual_score = None
            else:
                grade.manual_score = min(float(grade.max_score or 0), left)
                left = max(0.0, left - grade.manual_score)
            grade.needs_manual_grade = grade.auto_score is None and grade.manual_score is None


def _set_late(submission, row, policy: LatePolicy) -> None:
    if row is None or not row.handed_in:
        return
    handed = _dt.datetime.fromisoformat(row.handed_in)
    submission.timestamp = handed.replace(tzinfo=None)
    due = policy.due_for(submission.student.id)
    if policy.due is not None and due is not None:
        submission.extension = max(_dt.timedelta(0), due - policy.due) or None
    factor = policy.factor(lateness(policy, submission.student.id, handed))
    for nb in submission.notebooks:
        nb.late_submission_penalty = round(float(nb.score) * (1.0 - factor), 2) or None


def append_history(url, course, assignment, finals, why: str, by: str) -> None:
    last = {sid: h[-1] for sid, h in score_history(url, course, assignment).items() if h}
    rows = []
    for sid, f in sorted(finals.items()):
        before = last.get(sid)
        old = before["new_score"] if before else None
        if before is None and f.score is None:
            continue
        if before is not None and old == f.score:
            continue
        what = "grade" if before is None else "change"
        rows.append(
            {
                "course_id": course,
                "assignment": assignment,
                "student_id": sid,
                "old_score": old,
                "new_score": f.score,
                "what": what,
                "why": f"{why} ({f.status})",
                "changed_by": by,
                "changed_at": now(),
            }  # fmt: skip
        )
    if rows:
        with connect(url) as (conn, t):
            conn.execute(t["tlab_score_history"].insert(), rows)


def score_history(url: str, course: str, assignment: str) -> dict[str, list[dict]]:
    """student -> every change of their decided grade, oldest first."""
    found: dict[str, list[dict]] = {}
    with connect(url) as (conn, t):
        table = t["tlab_score_history"]
        for r in conn.execute(
            table.select()
            .where(table.c.course_id == course, table.c.assignment == assignment)
            .order_by(table.c.id)
        ).mappings():
            found.setdefault(r["student_id"], []).append(dict(r))
    return found


def describe_change(h: dict) -> str:
    def num(x):
        return "none" if x is None else f"{x:g}"

    return (
        f"{num(h['old_score'])} -> {num(h['new_score'])} by {h['changed_by']} at "
        f"{h['changed_at']}: {h['why']}"
    )
