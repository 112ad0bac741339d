"""``tlab grade ASSIGNMENT``: autograde, feedback and export that always finish with a report.

Steps (one nbgrader child process for all of them, see ``_driver``):

1. Refresh the gradebook from ``solutions/`` (``generate_assignment`` into a temporary folder,
   so ``notebooks/`` is not touched; a warning if ``notebooks/`` is stale).
2. For each submission in ``submitted/STUDENT/ASSIGNMENT/`` that is new or changed since it was
   last graded (all of them with ``--force``): pre-flight (invalid files reported, deleted cells
   restored, see :mod:`.integrity`), then ``nbgrader autograde`` on the staged copy with
   ``TLAB_GRADING=1``, a per-cell timeout and a per-submission budget (:mod:`.execute`), then
   ``nbgrader generate_feedback`` (hidden tests removed).
3. ``nbgrader export`` to ``reports/nbgrader_grades.csv`` and our own report
   ``reports/ASSIGNMENT_grades.csv`` with a status column (:mod:`.report`).

If the nbgrader process itself stops responding, it is killed, the student it was working on
is reported, and a new process carries on with the others. Grades of earlier runs are kept:
before a graded submission is regraded its autograded notebook and feedback are backed up,
and restored if the regrade fails.
"""

from __future__ import annotations

import datetime as _dt
import re
import secrets
import shutil
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from transformer_lab.grading.course import (
    CourseError,
    assignment_notebooks,
    failure_detail,
    read_course_dirs,
    run_driver,
)
from transformer_lab.grading.database import check_driver_available, gradebook_url
from transformer_lab.grading.integrity import fingerprint
from transformer_lab.grading.parallel import run_lanes, save_merged, select_shard
from transformer_lab.grading.release import compare_trees
from transformer_lab.grading.report import (
    GRADED,
    NEEDS_REVIEW,
    NOT_GRADED,
    GradingReport,
    StudentResult,
)
from transformer_lab.threads import decide_threads, usable_cpus

__all__ = ["GradeOptions", "grade", "classify_failure"]


@dataclass
class GradeOptions:
    """Options of ``tlab grade`` (None = the course's nbgrader_config.py setting)."""

    students: list[str] | None = None
    force: bool = False
    timeout: int | None = None  # per cell, seconds
    budget: float | None = None  # seconds lost to interrupted cells (GuardedExecute.hang_budget)
    sandbox: bool = True  # run each kernel in bubblewrap (see grading.sandbox)
    memory_mb: int | None = None  # sandbox address-space limit per process
    feedback: bool = True
    export: bool = True
    quiet: bool = False  # no progress bar
    jobs: int = 1  # submissions graded at once, each lane its own nbgrader process (parallel.py)
    shard: tuple[int, int] | None = None  # (K, N): only slice K of N of the class (parallel.py)


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


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def grade(root: Path, assignment: str, options: GradeOptions | None = None) -> GradingReport:
    """Grade every new or changed submission of ``assignment``; return (and save) the report."""
    options = options or GradeOptions()
    root = Path(root).resolve()
    dirs = read_course_dirs(root)
    source = root / dirs["source"] / assignment
    if not assignment_notebooks(source):
        raise CourseError(f"expected the assignment's notebooks in {source}, but found none.")
    submitted_root = root / dirs["submitted"]
    report = GradingReport.load(root, assignment)
    all_students = (
        sorted(p.name for p in submitted_root.iterdir() if (p / assignment).is_dir())
        if submitted_root.is_dir()
        else []
    )
    if options.students:
        unknown = sorted(set(options.students) - set(all_students))
        if unknown:
            raise CourseError(
                f"expected students with a folder {dirs['submitted']}/STUDENT/{assignment}, "
                f"but found none for {', '.join(unknown)}."
            )
        all_students = [s for s in all_students if s in options.students]
    all_students = select_shard(all_students, options.shard)
    url = gradebook_url(root)
    try:
        check_driver_available(url)
    except ValueError as exc:
        raise CourseError(str(exc)) from None
    in_gradebook, course_id = _gradebook_state(root, url, assignment, report)
    if in_gradebook and any(r.status == NEEDS_REVIEW for r in report.students.values()):
        # Reviews resolved in the formgrader since the last look become decisions now, before
        # this run's flags are written (nbgrader's tables exist: it has graded here before).
        from transformer_lab.grading.decisions import formgrader_resolutions

        formgrader_resolutions(url, course_id, report)

    # Which submissions need (re)grading? The gradebook decides what is graded already.
    todo: list[str] = []
    prints: dict[str, str] = {}
    for sid in all_students:
        prints[sid] = fingerprint(submitted_root / sid / assignment)
        previous = report.students.get(sid)
        if (
            options.force
            or previous is None
            or previous.status not in (GRADED, NEEDS_REVIEW)
            or previous.fingerprint != prints[sid]
            or sid not in in_gradebook
        ):
            todo.append(sid)

    tlab = root / ".tlab"
    staging_root = tlab / "staging" / assignment / "submitted"
    if options.shard is not None:  # shards may share the course folder: one staging area each
        k, n = options.shard
        staging_root = staging_root.with_name(f"submitted-shard-{k}-of-{n}")
    if staging_root.exists():
        shutil.rmtree(staging_root)
    backups = _backup(root, dirs, assignment, [s for s in todo if _was_graded(report, s)])

    if options.sandbox and todo:
        from transformer_lab.grading.sandbox import SandboxError, probe

        try:
            probe(root)
        except SandboxError as exc:
            raise CourseError(str(exc)) from None
        from transformer_lab.grading.cpushare import cpu_share_backend

        if cpu_share_backend() is None and options.jobs > 1 and len(todo) > 1:
            report.warnings.append(
                "no writable cgroup CPU controller: kernels graded at once share the CPUs "
                "without a cap (each still uses only its share of threads, and a submission "
                "that times out is regraded alone)"
            )
    config: dict = {
        "CourseDirectory.submitted_directory": str(staging_root.relative_to(root)),
        "GuardedExecute.sandbox": bool(options.sandbox),
        "GuardedExecute.course_root": str(root),
        # A new secret per run: the hidden cases' inputs cannot be known in advance. It stays
        # in the grading processes, which run the checks (grading/judge.py); never in a kernel.
        "GuardedExecute.hidden_secret": secrets.token_hex(16),
    }
    if options.timeout is not None:
        config["Execute.timeout"] = int(options.timeout)
    if options.budget is not None:
        config["GuardedExecute.hang_budget"] = float(options.budget)
    if options.memory_mb is not None:
        config["GuardedExecute.memory_mb"] = int(options.memory_mb)
    cell_timeout = options.timeout or 30
    budget = options.budget if options.budget is not None else 60.0
    # Every cell may use its whole time limit: a submission legitimately takes at most this.
    n_cells = sum(
        1
        for path in assignment_notebooks(source)
        for cell in _read_json(path).get("cells", [])
        if cell.get("cell_type") == "code"
    )
    idle = budget + (n_cells + 2) * cell_timeout + 180.0
    if not options.sandbox:
        report.warnings.append(
            "graded WITHOUT the sandbox (--no-sandbox): student code ran with your rights and "
            "could read the solutions and change files and grades"
        )

    events_by_student: dict[str, dict] = {}
    other_events: list[dict] = []
    scores_by_student: dict[str, dict] = {}  # each from the lane that graded the student
    all_scores: dict[str, dict] = {}
    gen_events: list[dict] = []
    lock = threading.Lock()
    with tempfile.TemporaryDirectory(prefix="tlab-grade-") as tmp:
        release_dir = Path(tmp) / "release"
        progress = _progress(len(todo), options.quiet)
        (root / "reports").mkdir(exist_ok=True)
        one_lane = max(1, options.jobs) == 1 or len(todo) <= 1
        # Shards finish at different times: nbgrader's CSV is written once, by `tlab export`.
        nbgrader_csv = options.export and options.shard is None

        def lane(students: list[str], loads_assignment: bool, loaded: threading.Event) -> None:
            """Grade ``students`` one after another in nbgrader child processes."""
            remaining = list(students)
            first_pass = True
            while first_pass or remaining:
                ops = []
                if loads_assignment:
                    ops.append(
                        {
                            "op": "generate_assignment",
                            "assignment": assignment,
                            "release_dir": str(release_dir),
                        }
                    )
                for sid in remaining:
                    ops.append(
                        {
                            "op": "grade_student",
                            "assignment": assignment,
                            "student": sid,
                            "submission": str(submitted_root / sid / assignment),
                            "staging": str(staging_root / sid / assignment),
                            "release_dir": str(release_dir),
                            "feedback": options.feedback,
                        }
                    )
                ops.append({"op": "scores", "assignment": assignment})
                if nbgrader_csv and one_lane:
                    ops.append(
                        {"op": "export", "to": str(root / "reports" / "nbgrader_grades.csv")}
                    )

                def on_event(event: dict) -> None:
                    with lock:
                        if event["op"] == "grade_student":
                            events_by_student[event["student"]] = event
                            if progress is not None:
                                progress.update(1)
                                progress.set_postfix_str(event["student"])
                        elif event["op"] == "scores":
                            got = event.get("scores", {})
                            all_scores.update(got)  # other lanes' rows: only for max_score
                            scores_by_student.update({s: got[s] for s in students if s in got})
                        elif event["op"] == "generate_assignment":
                            gen_events.append(event)
                            loaded.set()
                        else:
                            other_events.append(event)

                events, code, stderr = run_driver(
                    {"root": str(root), "ops": ops, "config": config, "guarded": True},
                    on_event=on_event,
                    env={
                        "TLAB_GRADING": "1",
                        "TLAB_SANDBOX_CPUS": f"{share['cpus']:g}",
                        "TLAB_SANDBOX_THREADS": str(decide_threads(cpus=int(share["cpus"]))),
                    },
                    idle_timeout=idle,
                )
                first_pass = False
                gen = next((e for e in events if e["op"] == "generate_assignment"), None)
                if loads_assignment and (gen is None or not gen.get("success")):
                    if gen is None:
                        gen_events.append({"op": "generate_assignment", "success": False})
                    gen_events[-1]["stderr"] = stderr
                    return
                stuck = [sid for sid in remaining if sid not in events_by_student]
                if stuck:
                    # The process died or hung on stuck[0]; report it and carry on with the rest.
                    with lock:
                        events_by_student[stuck[0]] = {
                            "op": "grade_student",
                            "student": stuck[0],
                            "success": False,
                            "error": "the grading process stopped responding on this submission and was restarted"
                            if code == -9
                            else f"the grading process crashed (exit code {code}): {stderr[-300:]}",
                        }
                        if progress is not None:
                            progress.update(1)
                    remaining = stuck[1:]
                else:
                    remaining = []

        def first_lane_failed() -> bool:
            return not gen_events or not gen_events[-1].get("success")

        def lane_after_load(students, loads_assignment, loaded):
            if loads_assignment or not first_lane_failed():
                lane(students, loads_assignment, loaded)

        # The CPUs this process may use (affinity, cgroup quota), shared by the lanes. Each kernel
        # runs the course's threads (transformer_lab.threads: one unless TLAB_THREADS says more),
        # never more than its share: on a machine with other work, a second thread per kernel
        # made notebook 07's grading 22x slower (benchmarks/README.md, "Grading a class").
        machine_cpus = float(usable_cpus())
        lanes = 1 if one_lane else max(1, min(options.jobs, len(todo)))
        share = {"cpus": max(1.0, machine_cpus // lanes)}  # each kernel's CPUs (sandbox.py)
        run_lanes(lane_after_load, todo, lanes)
        if lanes > 1 and not first_lane_failed():
            # A cell may have run out of time because the other lanes were busy: regrade those
            # submissions again, one at a time with the whole machine, before a timeout counts.
            again = [sid for sid in todo if _timed_out(events_by_student.get(sid))]
            if again:
                share["cpus"] = machine_cpus
                if progress is not None:
                    progress.total += len(again)
                for sid in again:
                    events_by_student.pop(sid, None)
                lane(again, False, threading.Event())
                for sid in again:
                    events_by_student.setdefault(sid, {}).update(regraded_alone=True)
        if not first_lane_failed() and nbgrader_csv and not one_lane:
            # Every lane has finished: nbgrader's CSV of the whole class, in one more process.
            events, _, _ = run_driver(
                {
                    "root": str(root),
                    "ops": [{"op": "export", "to": str(root / "reports" / "nbgrader_grades.csv")}],
                    "config": config,
                    "guarded": False,
                }
            )
            other_events.extend(events)
        if progress is not None:
            progress.close()
        if first_lane_failed():
            gen = gen_events[-1] if gen_events else None
            detail = failure_detail(gen, (gen or {}).get("stderr", ""))
            raise CourseError(f"could not load {assignment} into the gradebook:\n{detail[-3000:]}")
        other_events.append({"op": "scores", "scores": {**all_scores, **scores_by_student}})

        released_now = release_dir / assignment
        diffs = (
            compare_trees(released_now, root / dirs["release"] / assignment)
            if released_now.is_dir()
            else []
        )
        if diffs:
            report.warnings.append(
                f"{dirs['release']}/{assignment} is not what {dirs['source']}/{assignment} generates now "
                f"(students may have worked on a stale version): {diffs[0]}"
            )

    scores = next((e.get("scores", {}) for e in reversed(other_events) if e["op"] == "scores"), {})
    export = next((e for e in other_events if e["op"] == "export"), None)
    if export is not None and not export.get("success"):
        report.warnings.append(f"nbgrader export failed: {(export.get('error') or '')[-300:]}")
    max_score = next((s.get("max_score") for s in scores.values()), None)
    report.max_score = max_score if max_score is not None else report.max_score

    for sid in todo:
        event = events_by_student.get(sid, {"success": False, "error": "not processed"})
        previous = report.students.get(sid)
        prev_score = (
            previous.score
            if previous and previous.status in (GRADED, NEEDS_REVIEW)
            else (previous.previous_score if previous else None)
        )
        result = StudentResult(
            sid, fingerprint=prints[sid], graded_at=_now(), seconds=event.get("seconds")
        )
        pre = event.get("preflight") or {}
        result.notes = list(pre.get("notes", []))
        feedback = event.get("feedback_result")
        if event.get("success"):
            row = scores.get(sid, {})
            result.status, result.score, result.max_score = (
                GRADED,
                row.get("score"),
                row.get("max_score", max_score),
            )
            result.timeouts = int(event.get("timeouts") or 0)
            if result.timeouts:
                result.notes.append(f"{result.timeouts} cell(s) interrupted at the time limit")
            if row.get("needs_manual_grade"):
                result.notes.append("needs manual grading")
            if feedback is not None and not feedback.get("success"):
                result.notes.append("feedback could not be generated")
            if result.score is None:
                result.status, result.reason = NOT_GRADED, "nbgrader recorded no score"
            result.flags = list(event.get("flags") or [])
            if pre.get("needs_review"):
                result.flags.insert(0, pre["needs_review"])
            if result.timeouts:  # a timeout never becomes a silent 0 with status "graded"
                alone = ", again when regraded alone" if event.get("regraded_alone") else ""
                result.flags.insert(
                    0,
                    f"timeout: {result.timeouts} cell(s) stopped at the {cell_timeout} s time "
                    f"limit{alone} (scored 0)",
                )
            if result.flags and result.status == GRADED:
                result.status = NEEDS_REVIEW
                result.reason = f"{len(result.flags)} flag(s): " + "; ".join(result.flags[:3])
            for failure in event.get("hidden_failures") or []:
                result.notes.append(f"hidden tests: {failure}")
        else:
            result.status, result.reason = NOT_GRADED, classify_failure(event)
            result.previous_score = prev_score
            if sid in backups:
                _restore(root, dirs, assignment, sid, backups[sid])
                result.notes.append("previous autograded notebook and feedback kept")
        report.students[sid] = result
        report.graded_now.append(sid)
    for folder in backups.values():  # only this run's students: other shards keep theirs
        shutil.rmtree(folder, ignore_errors=True)
    from transformer_lab.grading.decisions import reviewed, sync_flags

    if report.graded_now:  # the formgrader's "Flagged?" column shows needs_review (decisions.py)
        sync_flags(url, course_id, report, report.graded_now)
    save_merged(report, root)
    if (in_gradebook or report.graded_now) and report.flagged:
        report.reviewed = reviewed(url, course_id, report)  # a decision settles a review
    return report


def _gradebook_state(root: Path, url: str, assignment: str, report) -> tuple[set[str], str]:
    """(students graded in the gradebook, course id); warns when the gradebook URL changed."""
    from transformer_lab.grading.database import graded_in_gradebook, redacted
    from transformer_lab.grading.decisions import course_id_of
    from transformer_lab.grading.export import _alembic_on_path

    _alembic_on_path()
    course_id = course_id_of(root)
    seen = report.store_path(root, assignment).with_suffix(".gradebook")
    before = seen.read_text(encoding="utf-8").strip() if seen.is_file() else ""
    if before and before != redacted(url):
        report.warnings.append(
            f"the gradebook changed since the last run (was {before}, now {redacted(url)}): "
            "submissions it has no grades for are graded again"
        )
    seen.parent.mkdir(parents=True, exist_ok=True)
    seen.write_text(redacted(url) + "\n", encoding="utf-8")
    return graded_in_gradebook(url, course_id, assignment), course_id


def _timed_out(event: dict | None) -> bool:
    """Did this submission lose time to the limits (and so deserve a regrade alone)?"""
    if not event:
        return False
    if event.get("success"):
        return bool(event.get("timeouts"))
    why = classify_failure(event)
    return "stopped responding" in why or "within the limits" in why


def _was_graded(report: GradingReport, sid: str) -> bool:
    r = report.students.get(sid)
    return r is not None and r.status in (GRADED, NEEDS_REVIEW)


def _read_json(path: Path) -> dict:
    import json

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _backup(root: Path, dirs: dict, assignment: str, students: list[str]) -> dict[str, Path]:
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


def _restore(root: Path, dirs: dict, assignment: str, sid: str, backup: Path) -> None:
    for key in ("autograded", "feedback"):
        src, dest = backup / key, root / dirs[key] / sid / assignment
        if src.is_dir():
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(src, dest)


def _progress(total: int, quiet: bool):
    if quiet or total == 0:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="grading", unit="submission", file=sys.stderr)
