"""The lanes of one ``tlab grade`` run: nbgrader child processes and what they report.

A lane grades its students one after another in one grading process (``_driver``); the first
lane also loads the assignment into the gradebook. Each finished step arrives as an event
(:meth:`Lanes.lane`'s ``on_event``), kept here under a lock for every lane. If a process stops
responding or crashes, the student it was on is reported and a new process carries on with the
rest. How students are dealt into lanes and run at once: :mod:`.parallel`. Split from
``autograde`` (issue 25).
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformer_lab.grading.course import run_driver
from transformer_lab.threads import decide_threads

__all__ = ["Lanes", "progress_bar"]


@dataclass
class Lanes:
    """One grading run's lanes: where they read and write, and every event they reported."""

    root: Path
    assignment: str
    submitted_root: Path  # submitted/STUDENT/ASSIGNMENT, as the students handed them in
    staging_root: Path  # the copies graded (pre-flight repairs them, see integrity.py)
    release_dir: Path  # the assignment as generated now (to compare with notebooks/)
    config: dict  # nbgrader configuration for the driver (limits, sandbox, this run's secret)
    feedback: bool
    export_to: Path | None  # nbgrader's CSV, written by the lane (one lane only) or None
    idle_timeout: float  # seconds without output before a grading process counts as hung
    cpus: float = 1.0  # each kernel's CPUs (sandbox.py); the whole machine for regrades alone
    progress: Any = None  # a tqdm bar, or None
    events_by_student: dict[str, dict] = field(default_factory=dict)
    scores_by_student: dict[str, dict] = field(default_factory=dict)  # from the student's lane
    all_scores: dict[str, dict] = field(default_factory=dict)  # every lane's rows (max_score)
    gen_events: list[dict] = field(default_factory=list)  # loading the assignment
    other_events: list[dict] = field(default_factory=list)  # export, ...
    lock: threading.Lock = field(default_factory=threading.Lock)

    def load_failed(self) -> bool:
        """Did loading the assignment fail (or not happen yet)?"""
        return not self.gen_events or not self.gen_events[-1].get("success")

    def _ops(self, students: list[str], loads_assignment: bool) -> list[dict]:
        a = self.assignment
        ops = []
        if loads_assignment:
            ops.append(
                {"op": "generate_assignment", "assignment": a, "release_dir": str(self.release_dir)}
            )
        for sid in students:
            ops.append(
                {
                    "op": "grade_student",
                    "assignment": a,
                    "student": sid,
                    "submission": str(self.submitted_root / sid / a),
                    "staging": str(self.staging_root / sid / a),
                    "release_dir": str(self.release_dir),
                    "feedback": self.feedback,
                }
            )
        ops.append({"op": "scores", "assignment": a})
        if self.export_to is not None:
            ops.append({"op": "export", "to": str(self.export_to)})
        return ops

    def _keep(self, event: dict, students: list[str], loaded: threading.Event) -> None:
        with self.lock:
            if event["op"] == "grade_student":
                self.events_by_student[event["student"]] = event
                if self.progress is not None:
                    self.progress.update(1)
                    self.progress.set_postfix_str(event["student"])
            elif event["op"] == "scores":
                got = event.get("scores", {})
                self.all_scores.update(got)  # other lanes' rows: only for max_score
                self.scores_by_student.update({s: got[s] for s in students if s in got})
            elif event["op"] == "generate_assignment":
                self.gen_events.append(event)
                loaded.set()
            else:
                self.other_events.append(event)

    def lane(self, students: list[str], loads_assignment: bool, loaded: threading.Event) -> None:
        """Grade ``students`` one after another in nbgrader child processes."""
        remaining = list(students)
        first_pass = True
        while first_pass or remaining:
            events, code, stderr = run_driver(
                {
                    "root": str(self.root),
                    "ops": self._ops(remaining, loads_assignment),
                    "config": self.config,
                    "guarded": True,
                },
                on_event=lambda event: self._keep(event, students, loaded),
                env={
                    "TLAB_GRADING": "1",
                    "TLAB_SANDBOX_CPUS": f"{self.cpus:g}",
                    "TLAB_SANDBOX_THREADS": str(decide_threads(cpus=int(self.cpus))),
                },
                idle_timeout=self.idle_timeout,
            )
            first_pass = False
            gen = next((e for e in events if e["op"] == "generate_assignment"), None)
            if loads_assignment and (gen is None or not gen.get("success")):
                if gen is None:
                    self.gen_events.append({"op": "generate_assignment", "success": False})
                self.gen_events[-1]["stderr"] = stderr
                return
            stuck = [sid for sid in remaining if sid not in self.events_by_student]
            if not stuck:
                return
            # The process died or hung on stuck[0]; report it and carry on with the rest.
            with self.lock:
                self.events_by_student[stuck[0]] = {
                    "op": "grade_student",
                    "student": stuck[0],
                    "success": False,
                    "error": "the grading process stopped responding on this submission and was restarted"
                    if code == -9
                    else f"the grading process crashed (exit code {code}): {stderr[-300:]}",
                }
                if self.progress is not None:
                    self.progress.update(1)
            remaining = stuck[1:]

    def after_load(self, students: list[str], loads_assignment: bool, loaded) -> None:
        """A lane that waits for the first to load the assignment, and runs only if it did."""
        if loads_assignment or not self.load_failed():
            self.lane(students, loads_assignment, loaded)


def progress_bar(total: int):
    """A progress bar over ``total`` submissions on stderr (None when there is nothing to do)."""
    if total == 0:
        return None
    from tqdm.auto import tqdm

    # The bar's own text is ours (counts, times): it may use carriage returns, so it writes to
    # the terminal itself, not through tlab's escaping stream.
    stream = getattr(sys.stderr, "_stream", sys.stderr)
    return tqdm(total=total, desc="grading", unit="submission", file=stream)
