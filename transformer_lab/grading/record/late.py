"""Due dates, extensions and the late policy (``tlab due``, ``tlab extend``).

- The due date is nbgrader's own ``duedate`` of the assignment in the gradebook (what nbgrader's
  export writes in its ``duedate`` column and its ``LateSubmissionPlugin`` compares with).
- When a submission was handed in is nbgrader's ``timestamp.txt`` beside it (written by
  ``nbgrader submit`` and kept by ``nbgrader collect``); a submission without one is on time.
- An extension moves one student's due date (table ``tlab_extensions``; the latest one holds;
  copied into nbgrader's ``extension`` of the submission once it exists).
- The policy (table ``tlab_due``): ``none`` (late work is marked, not penalised), ``penalty``
  (the grade loses ``per_day`` percent per day or part of a day late, never below 0), or
  ``refuse`` (late work gets 0, as nbgrader's ``penalty_method = 'zero'``).

The penalty is applied when the record is read (:mod:`.ledger`), to the decided grade, so a
changed policy or a new extension reaches every channel without regrading.
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass
from pathlib import Path

from transformer_lab.grading.course import CourseError
from transformer_lab.grading.record.tables import connect, now, whoami

__all__ = ["LatePolicy", "parse_when", "set_due", "grant_extension", "policy_of", "lateness"]

NONE, PENALTY, REFUSE = "none", "penalty", "refuse"
DAY = 86400.0


@dataclass
class LatePolicy:
    """An assignment's due date (UTC, None = none set), policy and extensions."""

    due: _dt.datetime | None = None
    policy: str = NONE
    per_day: float = 0.0  # percent of the grade per day (or part of one) late
    extensions: dict[str, _dt.datetime] | None = None

    def due_for(self, student: str) -> _dt.datetime | None:
        return (self.extensions or {}).get(student, self.due)

    def factor(self, seconds_late: float) -> float:
        """What part of the grade a submission ``seconds_late`` late keeps."""
        if seconds_late <= 0 or self.policy == NONE:
            return 1.0
        if self.policy == REFUSE:
            return 0.0
        return max(0.0, 1.0 - self.per_day / 100.0 * math.ceil(seconds_late / DAY))

    def describe(self) -> str:
        if self.due is None:
            return "no due date"
        when = self.due.strftime("%Y-%m-%d %H:%M UTC")
        rule = {
            NONE: "late work marked, not penalised",
            PENALTY: f"late work loses {self.per_day:g}% per day",
            REFUSE: "late work gets 0",
        }[self.policy]
        return f"due {when}; {rule}"


def parse_when(text: str) -> _dt.datetime:
    """An ISO 8601 date or date and time (UTC unless it says otherwise) as an aware datetime."""
    try:
        when = _dt.datetime.fromisoformat(text.strip().replace(" UTC", "").replace("Z", "+00:00"))
    except ValueError:
        raise CourseError(
            f"expected a date such as 2026-12-01 or 2026-12-01T23:59, but got {text!r}."
        ) from None
    if len(text.strip()) == 10:  # a date alone: due at the end of that day
        when = when.replace(hour=23, minute=59, second=59)
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.timezone.utc)
    return when.astimezone(_dt.timezone.utc)


def _naive(when: _dt.datetime) -> _dt.datetime:
    return when.astimezone(_dt.timezone.utc).replace(tzinfo=None)  # nbgrader stores naive UTC


def set_due(url: str, course: str, assignment: str, due: str, policy: str, per_day: float,
            by: str = "") -> LatePolicy:  # fmt: skip
    """Store ``assignment``'s due date (nbgrader's ``duedate``) and its late policy."""
    from nbgrader.api import Gradebook

    if policy not in (NONE, PENALTY, REFUSE):
        raise CourseError(f"expected a late policy none, penalty or refuse, but got {policy!r}.")
    if policy == PENALTY and not 0 < per_day <= 100:
        raise CourseError(f"expected --per-day between 0 and 100 (percent), but got {per_day:g}.")
    when = parse_when(due)
    with Gradebook(url, course) as gb:
        gb.update_or_create_assignment(assignment, duedate=_naive(when).isoformat())
    with connect(url) as (conn, t):
        conn.execute(
            t["tlab_due"].insert().values(
                course_id=course, assignment=assignment, policy=policy,
                per_day=per_day if policy == PENALTY else None,
                set_by=whoami(by), set_at=now(),
            )
        )  # fmt: skip
    return policy_of(url, course, assignment)


def grant_extension(url: str, course: str, assignment: str, student: str, until: str,
                    note: str, by: str = "") -> _dt.datetime:  # fmt: skip
    """Give ``student`` until ``until`` for ``assignment`` (the latest extension holds)."""
    if not note.strip():
        raise CourseError("expected a note saying why (--note), but got an empty note.")
    when = parse_when(until)
    with connect(url) as (conn, t):
        conn.execute(
            t["tlab_extensions"].insert().values(
                course_id=course, assignment=assignment, student_id=student,
                until=when.isoformat(), note=note, granted_by=whoami(by), granted_at=now(),
            )
        )  # fmt: skip
    _mirror_extension(url, course, assignment, student, when)
    return when


def _mirror_extension(url, course, assignment, student, when) -> None:
    """nbgrader's own ``extension`` of the submission, once the submission exists."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(url, course) as gb:
        try:
            sub = gb.find_submission(assignment, student)
        except MissingEntry:
            return
        due = sub.assignment.duedate
        if due is not None:
            sub.extension = max(_dt.timedelta(0), _naive(when) - due)
            gb.db.commit()


def policy_of(url: str, course: str, assignment: str) -> LatePolicy:
    """The assignment's due date, latest policy and extensions, read from the gradebook."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(url, course) as gb:
        try:
            due = gb.find_assignment(assignment).duedate
        except MissingEntry:
            due = None
    result = LatePolicy(due.replace(tzinfo=_dt.timezone.utc) if due else None, extensions={})
    with connect(url) as (conn, t):
        rule = t["tlab_due"]
        row = conn.execute(
            rule.select()
            .where(rule.c.course_id == course, rule.c.assignment == assignment)
            .order_by(rule.c.id.desc())
        ).first()
        if row is not None:
            result.policy, result.per_day = row.policy, row.per_day or 0.0
        ext = t["tlab_extensions"]
        for r in conn.execute(
            ext.select()
            .where(ext.c.course_id == course, ext.c.assignment == assignment)
            .order_by(ext.c.id)
        ):
            result.extensions[r.student_id] = _dt.datetime.fromisoformat(r.until)
    return result


def submitted_at(folder: Path) -> _dt.datetime | None:
    """When the submission in ``folder`` was handed in (nbgrader's ``timestamp.txt``), UTC."""
    from nbgrader.utils import parse_utc

    stamp = Path(folder) / "timestamp.txt"
    if not stamp.is_file():
        return None
    try:
        return parse_utc(stamp.read_text(encoding="utf-8").strip()).replace(tzinfo=_dt.timezone.utc)
    except (ValueError, TypeError, OverflowError):
        return None


def lateness(policy: LatePolicy, student: str, handed_in: _dt.datetime | None) -> float:
    """Seconds after the student's due date (0 when on time, undated or without a due date)."""
    due = policy.due_for(student)
    if due is None or handed_in is None:
        return 0.0
    return max(0.0, (handed_in - due).total_seconds())
