"""What one submission's grading step came to: a row of the report (split from ``autograde``).

The grading process reports each submission as one event (``_driver``'s ``grade_student``):
success or the error, the timeouts, the review flags of the kernel and of the code scan, the
hidden tests that failed. :func:`student_result` turns it and the gradebook's score into a
:class:`~.report.StudentResult`; :func:`classify_failure` says in one sentence why a submission
could not be graded; :func:`backup` and :func:`restore` keep an earlier grade when a regrade
fails.
"""

from __future__ import annotations

import datetime as _dt
import re
import shutil
from pathlib import Path

from transformer_lab.grading.record.report import (
    GRADED,
    NEEDS_REVIEW,
    NOT_GRADED,
    GradingReport,
    StudentResult,
)

__all__ = ["classify_failure", "grade_again", "student_result", "was_graded", "backup", "restore"]


def classify_failure(event: dict) -> str:
    """One sentence saying why nbgrader could not grade a submission."""
    pre = event.get("preflight") or {}
    if pre and not pre.get("ok", True):
        return pre.get("reason") or "the submission could not be read"
    if str(event.get("error", "")).startswith("the grading process"):
        return event["error"]
    text = (
        " ".join(str(event.get(k, "")) for k in ("error",))
        + " "
        + " ".join(str((event.get("autograde") or {}).get(k, "")) for k in ("error", "log"))
    )
    if "DeadKernelError" in text or "Kernel died" in text or "kernel died" in text:
        return "the kernel died while running the notebook (e.g. os._exit, a crash or running out of memory)"
    if "Invalid Signature" in text:  # a message not signed by the kernel's key
        return (
            "the kernel's messages became unreadable (copies of the kernel answered too: "
            "os.fork or a fork bomb in the notebook)"
        )
    if "UnresponsiveKernelError" in text or "became unresponsive" in text:
        return "the kernel stopped responding and could not be interrupted"
    if "Duplicate grade id" in text or "ValidationError" in text or "SchemaTooOld" in text:
        return "the notebook's nbgrader metadata is damaged (edited by hand?)"
    if "CellExecutionError" in text or "CellTimeoutError" in text:
        return "a cell could not be executed within the limits"
    errors = [
        ln.strip()
        for ln in text.splitlines()
        if re.match(r"^\s*[\w.]*(Error|Exception)\b.*:", ln) and "NbGraderException" not in ln
    ]
    if errors:
        return "nbgrader failed: " + errors[-1][:200]
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return "nbgrader failed: " + (lines[-1][:200] if lines else "unknown error")


def grade_again(event: dict | None) -> bool:
    """Does this submission deserve a second grading? When a limit was used up by the machine
    rather than by the submission (its kernel waited for a core until the wall cap ended a
    cell or a call: ``starved``, run/kernel_clock.py), a cell was left undecided, or the
    grading process or kernel died. A cell stopped on the kernel's own clock is the
    submission's own time: grading it again would stop it again."""
    if not event:
        return False
    if event.get("success"):
        undecided = any(UNDECIDED in str(f) for f in event.get("flags") or [])
        return bool(event.get("starved")) or undecided
    why = classify_failure(event)
    return any(part in why for part in ("stopped responding", "within the limits", "kernel died"))


def was_graded(report: GradingReport, sid: str) -> bool:
    r = report.students.get(sid)
    return r is not None and r.status in (GRADED, NEEDS_REVIEW)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


UNDECIDED = "undecided: "  # decide/judge.py's flag for a cell the kernel never answered


def _kept(previous: StudentResult | None) -> float | None:
    """The score an earlier grading gave (kept beside a "not graded" row)."""
    if previous and previous.status in (GRADED, NEEDS_REVIEW):
        return previous.score
    return previous.previous_score if previous else None


def student_result(
    sid: str,
    event: dict,
    score_row: dict,
    max_score: float | None,
    fingerprint: str,
    previous: StudentResult | None,
    cell_timeout: float,
) -> StudentResult:
    """The report's row for ``sid`` from its grading event and its row of the gradebook."""
    result = StudentResult(
        sid, fingerprint=fingerprint, graded_at=_now(), seconds=event.get("seconds")
    )
    pre = event.get("preflight") or {}
    result.notes = list(pre.get("notes", []))
    if not event.get("success"):
        result.status, result.reason = NOT_GRADED, classify_failure(event)
        result.previous_score = _kept(previous)
        return result
    result.status, result.score = GRADED, score_row.get("score")
    result.max_score = score_row.get("max_score", max_score)
    result.timeouts = int(event.get("timeouts") or 0)
    if result.timeouts:
        result.notes.append(f"{result.timeouts} cell(s) interrupted at the time limit")
    if score_row.get("needs_manual_grade"):
        result.notes.append("needs manual grading")
    feedback = event.get("feedback_result")
    if feedback is not None and not feedback.get("success"):
        result.notes.append("feedback could not be generated")
    if result.score is None:
        result.status, result.reason = NOT_GRADED, "nbgrader recorded no score"
    result.flags = list(event.get("flags") or [])
    if pre.get("needs_review"):
        result.flags.insert(0, pre["needs_review"])
    if result.timeouts:  # a timeout never becomes a silent 0 with status "graded"
        again = ", also when graded a second time" if event.get("graded_twice") else ""
        result.flags.insert(
            0,
            f"timeout: {result.timeouts} cell(s) stopped at the {cell_timeout} s time "
            f"limit{again} (scored 0)",
        )
        if event.get("starved"):
            result.notes.append(
                f"{event['starved']} cell(s) or call(s) ran out of time waiting for a core "
                "(the machine was busy), not on their own clock"
            )
    undecided = [f for f in result.flags if f.startswith(UNDECIDED) or f": {UNDECIDED}" in f]
    if undecided and result.status == GRADED:  # a cell the grader could not decide: never a 0
        result.status = NOT_GRADED
        result.reason = "the grader could not decide every cell: " + undecided[0]
        result.previous_score, result.score = _kept(previous), None
        return result
    if result.flags and result.status == GRADED:
        result.status = NEEDS_REVIEW
        result.reason = f"{len(result.flags)} flag(s): " + "; ".join(result.flags[:3])
    for failure in event.get("hidden_failures") or []:
        result.notes.append(f"hidden tests: {failure}")
    return result


def backup(root: Path, dirs: dict, assignment: str, students: list[str]) -> dict[str, Path]:
    """Copy the autograded notebooks and feedback of ``students`` aside before regrading."""
    saved = {}
    for sid in students:
        dest = root / ".tlab" / "backup" / assignment / sid
        if dest.exists():
            shutil.rmtree(dest)
        for key in ("autograded", "feedback"):
            src = root / dirs[key] / sid / assignment
            if src.is_dir():
                shutil.copytree(src, dest / key)
        saved[sid] = dest
    return saved


def restore(root: Path, dirs: dict, assignment: str, sid: str, saved: Path) -> None:
    """Put back what :func:`backup` kept of ``sid`` (its regrade failed)."""
    for key in ("autograded", "feedback"):
        src, dest = saved / key, root / dirs[key] / sid / assignment
        if src.is_dir():
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(src, dest)
