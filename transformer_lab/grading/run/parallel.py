"""A class at scale: ``tlab grade --jobs N`` (one machine) and ``--shard K/N`` (many machines).

Jobs. N lanes take the submissions to grade from one work queue (:mod:`.queue`), each the next
one whenever it is free; each lane is one grading process (``run/driver.py``) that grades its
submissions one after another, each in a fresh kernel, through the same ``grade_student`` step as
a single-job run. The first lane loads the assignment into the gradebook; the others start once
that is done. Writes to a SQLite gradebook are serialised by a file lock, PostgreSQL takes
concurrent writers (:mod:`transformer_lab.grading.record.gradebook`). The queue lives in the
gradebook's database (PostgreSQL) or beside it (SQLite), so several ``tlab grade`` processes on
one course share it and grade each submission once.

Shards. ``--shard K/N`` grades the students whose id hashes (SHA-256, not Python's salted
``hash``) to slice K of N, so the same student always lands in the same shard whatever the
machine, the order of folders or the other students. N shards started by a Slurm job array or a
Kubernetes indexed Job against one PostgreSQL gradebook grade every submission exactly once.
Each shard merges its rows into the shared report under a lock (:func:`save_merged`), so the
report after the last shard is the report of the whole class.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = [
    "parse_shard",
    "shard_index",
    "select_shard",
    "deal",
    "run_lanes",
    "save_merged",
    "run_summary",
]


def parse_shard(text: str) -> tuple[int, int]:
    """``"K/N"`` -> ``(K, N)`` with 1 <= K <= N; a one-sentence ValueError otherwise."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(text))
    if not m or not (1 <= int(m.group(1)) <= int(m.group(2))):
        raise ValueError(
            f"expected --shard K/N with 1 <= K <= N (e.g. 2/8 for the second of eight), "
            f"but got {text!r}"
        )
    return int(m.group(1)), int(m.group(2))


def shard_index(student_id: str, n: int) -> int:
    """The shard (1..n) that grades ``student_id``: stable across machines and runs."""
    digest = hashlib.sha256(student_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % n + 1


def select_shard(students: Sequence[str], shard: tuple[int, int] | None) -> list[str]:
    """The students of shard ``(K, N)`` (all of them for None), in their given order."""
    if shard is None:
        return list(students)
    k, n = shard
    return [s for s in students if shard_index(s, n) == k]


def deal(items: Sequence[str], lanes: int) -> list[list[str]]:
    """Round-robin ``items`` into at most ``lanes`` non-empty lists."""
    lanes = max(1, min(lanes, len(items)))
    return [list(items[i::lanes]) for i in range(lanes)]


def run_lanes(
    lane: Callable[[object, bool, threading.Event], None],
    queue: object,
    jobs: int,
) -> None:
    """Run ``jobs`` lanes at once, each taking submissions from ``queue`` until it is empty.

    ``lane(queue, loads_assignment, assignment_loaded)`` is one lane; the lane with
    ``loads_assignment=True`` sets ``assignment_loaded`` once the gradebook has the assignment
    (or failed to load it), and the other lanes wait for it before starting.
    """
    loaded = threading.Event()
    if jobs <= 1:
        lane(queue, True, loaded)
        return
    errors: list[BaseException] = []

    def work(first: bool) -> None:
        try:
            if not first:
                loaded.wait()
            lane(queue, first, loaded)
        except BaseException as exc:  # reported after every lane has finished
            errors.append(exc)
        finally:
            if first:
                loaded.set()

    threads = [
        threading.Thread(target=work, args=(i == 0,), name=f"tlab-lane-{i + 1}")
        for i in range(jobs)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def save_merged(report, root: Path):
    """Save ``report``'s rows graded in this run into the stored report, keeping every row
    another shard (or process) stored meanwhile; ``report`` then holds the merged rows."""
    from transformer_lab.grading.record.report import merge_stored, report_lock

    with report_lock(root, report.assignment):
        merge_stored(report, root)
        saved = report.save(root)
    # The rows are in the report: the work queue may let go of them (run/queue.py).
    from transformer_lab.grading.run.queue import now_recorded

    now_recorded(root, report.assignment, report.graded_now)
    return saved


def run_summary(report, seconds: float, jobs: int = 1) -> str:
    """One paragraph on this run: counts, submissions needing review, time per submission."""
    from transformer_lab.grading.record.report import GRADED

    scored = (GRADED, "needs_review")  # needs_review: graded, with flags for the instructor
    now = [report.students[s] for s in report.graded_now if s in report.students]
    graded = [r for r in now if r.status in scored]
    # the same count as the report's: flagged, and not yet decided on by a person
    review = [r for r in graded if r.status != GRADED and r.student_id not in report.reviewed]
    per = [r.seconds for r in now if r.seconds]
    lines = [
        f"This run: {len(now)} submission(s) in {_duration(seconds)} with {jobs} job(s): "
        f"{len(graded)} graded, {len(now) - len(graded)} not graded "
        f"({len(review)} of the graded need review)."
    ]
    if now:
        lines.append(
            f"Time per submission: {seconds / len(now):.1f} s of wall time"
            + (
                f" ({sum(per) / len(per):.1f} s each in its grading process, "
                f"slowest {max(per):.1f} s)."
                if per
                else "."
            )
        )
    if review:
        names = ", ".join(r.student_id for r in sorted(review, key=lambda r: r.student_id)[:10])
        more = f" and {len(review) - 10} more" if len(review) > 10 else ""
        lines.append(f"Review: {names}{more} (see the reasons and flags in the report).")
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


class Stopwatch:
    """``with Stopwatch() as sw: ...; sw.seconds``."""

    def __enter__(self):
        self.start = time.monotonic()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc):
        self.seconds = time.monotonic() - self.start
