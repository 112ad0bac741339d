"""The lanes of one ``tlab grade`` run: nbgrader child processes and what they report.

A lane is one grading process (``run/driver.py``) that takes the next submission from the work
queue (:mod:`.queue`) whenever it is free; the first lane also loads the assignment into the
gradebook. Each finished step arrives as an event (:meth:`Lanes.lane`'s ``on_event``), kept here
under a lock for every lane. If a process stops responding or crashes, the submission it was on
is reported and a new process carries on with the queue. Lanes run at once: :mod:`.parallel`.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformer_lab.grading.course import run_driver
from transformer_lab.grading.record.outcome import grade_again

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
    cpus: float = 1.0  # each kernel's CPUs (sandbox.py)
    progress: Any = None  # a tqdm bar, or None
    events_by_student: dict[str, dict] = field(default_factory=dict)
    scores_by_student: dict[str, dict] = field(default_factory=dict)  # from the student's lane
    all_scores: dict[str, dict] = field(default_factory=dict)  # every lane's rows (max_score)
    gen_events: list[dict] = field(default_factory=list)  # loading the assignment
    other_events: list[dict] = field(default_factory=list)  # export, ...
    lock: threading.Lock = field(default_factory=threading.Lock)
    retried: set[str] = field(default_factory=set)  # graded once more (outcome.grade_again)
    loaded_before: bool = False  # the gradebook has the assignment from today's sources

    def load_failed(self) -> bool:
        """Did loading the assignment fail (or not happen yet)?"""
        if self.loaded_before:
            return False
        return not self.gen_events or not self.gen_events[-1].get("success")

    def _student_op(self, sid: str) -> dict:
        a = self.assignment
        return {
            "op": "grade_student",
            "assignment": a,
            "student": sid,
            "submission": str(self.submitted_root / sid / a),
            "staging": str(self.staging_root / sid / a),
            "release_dir": str(self.release_dir),
            "feedback": self.feedback,
        }

    def _final_ops(self) -> list[dict]:
        ops = [{"op": "scores", "assignment": self.assignment}]
        if self.export_to is not None:
            ops.append({"op": "export", "to": str(self.export_to)})
        return ops

    def _keep(self, event: dict, mine: set[str], loaded: threading.Event) -> None:
        with self.lock:
            if event["op"] == "grade_student":
                if event["student"] in self.retried:
                    event["graded_twice"] = True  # the second grading, the one that counts
                self.events_by_student[event["student"]] = event
                if self.progress is not None:
                    self.progress.update(1)
                    self.progress.set_postfix_str(event["student"])
            elif event["op"] == "scores":
                got = event.get("scores", {})
                self.all_scores.update(got)  # other lanes' rows: only for max_score
                self.scores_by_student.update({s: got[s] for s in mine if s in got})
            elif event["op"] == "generate_assignment":
                self.gen_events.append(event)
                loaded.set()
            else:
                self.other_events.append(event)

    def lane(self, queue, loads_assignment: bool, loaded: threading.Event) -> None:
        """Grade submissions from ``queue`` (:class:`.queue.WorkQueue`) one after another in
        grading processes, taking the next one whenever this lane is free, until it is empty."""
        from transformer_lab.threads import decide_threads  # imports PyTorch: only when grading

        mine: set[str] = set()
        if loads_assignment and self.loaded_before:  # run/loaded.py: nothing to load
            loads_assignment = False
            loaded.set()
        while True:
            feeder = _Feeder(self, queue, mine)
            ops = []
            if loads_assignment:
                ops.append(
                    {"op": "generate_assignment", "assignment": self.assignment,
                     "release_dir": str(self.release_dir)}
                )  # fmt: skip
            events, code, stderr = run_driver(
                {"root": str(self.root), "ops": ops, "config": self.config, "guarded": True},
                on_event=lambda event: self._keep(event, mine, loaded),
                env={
                    "TLAB_GRADING": "1",
                    "TLAB_SANDBOX_CPUS": f"{self.cpus:g}",
                    "TLAB_SANDBOX_THREADS": str(decide_threads(cpus=int(self.cpus))),
                },
                idle_timeout=self.idle_timeout,
                feed=feeder,
            )
            gen = next((e for e in events if e["op"] == "generate_assignment"), None)
            if loads_assignment and (gen is None or not gen.get("success")):
                if gen is None:
                    self.gen_events.append({"op": "generate_assignment", "success": False})
                self.gen_events[-1]["stderr"] = stderr
                if feeder.current is not None:
                    queue.release(feeder.current)
                return
            loads_assignment = False
            if feeder.current is None:
                return  # the queue ran dry and the process finished
            # The process died or hung on the submission in flight: report it, carry on.
            self._lost(feeder.current, code, stderr)
            queue.finish(feeder.current, graded=False)

    def _lost(self, sid: str, code: int, stderr: str) -> None:
        with self.lock:
            self.events_by_student[sid] = {
                "op": "grade_student",
                "student": sid,
                "success": False,
                "error": "the grading process stopped responding on this submission and was restarted"
                if code == -9
                else f"the grading process crashed (exit code {code}): {stderr[-300:]}",
            }
            if self.progress is not None:
                self.progress.update(1)

    def after_load(self, queue, loads_assignment: bool, loaded) -> None:
        """A lane that waits for the first to load the assignment, and runs only if it did."""
        if loads_assignment or not self.load_failed():
            self.lane(queue, loads_assignment, loaded)


class _Feeder:
    """Hands a grading process its next submission each time it reports one finished.

    A submission whose limits the machine used up, or that left a cell undecided, is queued once
    more (any free lane takes it, :func:`.outcome.grade_again`); its second grading counts.
    """

    def __init__(self, lanes: Lanes, queue, mine: set[str]) -> None:  # noqa: ANN001
        self.lanes, self.queue, self.mine = lanes, queue, mine
        self.current: str | None = None

    def _claim(self) -> tuple[list[dict], bool]:
        self.current = self._next()
        if self.current is None:
            return self.lanes._final_ops(), True
        self.mine.add(self.current)
        return [self.lanes._student_op(self.current)], False

    def _next(self) -> str | None:
        """The next submission (the queue's heartbeat renews its lease). With none queued but
        some in flight in another process, wait: if that process dies, its lease expires and
        this lane grades the submission (for at most half the idle timeout in all)."""
        give_up = time.monotonic() + self.lanes.idle_timeout / 2
        while (sid := self.queue.claim()) is None:
            until = self.queue.leased_elsewhere()
            if until is None or time.monotonic() > give_up:
                return None
            time.sleep(min(2.0, max(0.05, until - time.time() + 0.05)))
        return sid

    def __call__(self, event: dict | None) -> tuple[list[dict], bool]:
        if event is None:
            return self._claim()
        if event["op"] != "grade_student" or event.get("student") != self.current:
            return [], False
        sid, self.current = self.current, None
        if grade_again(event) and sid not in self.lanes.retried:
            with self.lanes.lock:
                self.lanes.retried.add(sid)
                self.lanes.events_by_student.pop(sid, None)
                if self.lanes.progress is not None:
                    self.lanes.progress.total += 1
            self.queue.release(sid)
        else:
            self.queue.finish(sid, graded=bool(event.get("success")))
        return self._claim()


def progress_bar(total: int):
    """A progress bar over ``total`` submissions on stderr (None when there is nothing to do)."""
    if total == 0:
        return None
    from tqdm.auto import tqdm

    # The bar's own text is ours (counts, times): it may use carriage returns, so it writes to
    # the terminal itself, not through tlab's escaping stream.
    stream = getattr(sys.stderr, "_stream", sys.stderr)
    return tqdm(total=total, desc="grading", unit="submission", file=stream)
