"""``tlab grade ASSIGNMENT``: autograde, feedback and export that always finish with a report.

Steps (one nbgrader child process for all of them, see ``run/driver.py``):

1. Refresh the gradebook from ``solutions/`` (``generate_assignment`` into a temporary folder,
   so ``notebooks/`` is not touched; a warning if ``notebooks/`` is stale).
2. For each submission in ``submitted/STUDENT/ASSIGNMENT/`` that is new or changed since it was
   last graded (all of them with ``--force``): pre-flight (invalid files reported, deleted cells
   restored, see :mod:`.preflight.integrity`), then ``nbgrader autograde`` on the staged copy with
   ``TLAB_GRADING=1``, a per-cell timeout and a per-submission budget (:mod:`.run.execute`), then
   ``nbgrader generate_feedback`` (hidden tests removed).
3. ``nbgrader export`` to ``reports/nbgrader_grades.csv`` and our own report
   ``reports/ASSIGNMENT_grades.csv`` with a status column (:mod:`.record.report`).

If the nbgrader process itself stops responding, it is killed, the student it was working on
is reported, and a new process carries on with the others (:mod:`.run.lanes`). Grades of earlier
runs are kept: before a graded submission is regraded its autograded notebook and feedback are
backed up, and restored if the regrade fails; each submission's event becomes its row of the
report in :mod:`.record.outcome`.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from transformer_lab.grading.authoring.release import compare_trees
from transformer_lab.grading.channels.insights import store_verdicts
from transformer_lab.grading.course import (
    CourseError,
    assignment_notebooks,
    count_code_cells,
    failure_detail,
    read_course_dirs,
    run_driver,
)
from transformer_lab.grading.preflight.integrity import fingerprint
from transformer_lab.grading.record.gradebook import (
    check_database,
    check_driver_available,
    gradebook_url,
)
from transformer_lab.grading.record.outcome import (
    backup,
    classify_failure,
    restore,
    student_result,
    was_graded,
)
from transformer_lab.grading.record.report import NEEDS_REVIEW, GradingReport
from transformer_lab.grading.run.kernel_clock import HANG_BUDGET, WALL_CAP
from transformer_lab.grading.run.lanes import Lanes, progress_bar
from transformer_lab.grading.run.parallel import run_lanes, save_merged, select_shard

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
    # keep grades made under tests changed since (record/test_versions), saying so
    keep_old_tests: bool = False


@dataclass
class _Plan:
    """What one ``tlab grade`` run works on, filled step by step."""

    root: Path
    assignment: str
    options: GradeOptions
    dirs: dict
    report: GradingReport
    url: str = ""
    course_id: str = ""
    in_gradebook: set = field(default_factory=set)
    todo: list = field(default_factory=list)
    prints: dict = field(default_factory=dict)
    staging_root: Path | None = None
    backups: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)
    cell_timeout: int = 30
    idle: float = 0.0
    versions: dict = field(default_factory=dict)  # graded cell -> its tests' version now
    retested: dict = field(default_factory=dict)  # student -> cells whose tests changed
    kept: dict = field(default_factory=dict)  # the same, kept under the old tests

    @property
    def source(self) -> Path:
        return self.root / self.dirs["source"] / self.assignment

    @property
    def submitted_root(self) -> Path:
        return self.root / self.dirs["submitted"]


def grade(root: Path, assignment: str, options: GradeOptions | None = None) -> GradingReport:
    """Grade every new or changed submission of ``assignment``; return (and save) the report.

    The steps: which submissions (:func:`_plan`), the run's limits and secret
    (:func:`_prepare`), the lanes that pre-flight, run and decide each one (:func:`_run`),
    and the record (:func:`_record`).
    """
    plan = _plan(Path(root).resolve(), assignment, options or GradeOptions())
    _prepare(plan)
    lanes, other_events = _run(plan)
    return _record(plan, lanes, other_events)


def _plan(root: Path, assignment: str, options: GradeOptions) -> _Plan:
    """The students asked for, the gradebook's state, and which submissions are new or changed."""
    dirs = read_course_dirs(root)
    plan = _Plan(root, assignment, options, dirs, GradingReport.load(root, assignment))
    if not assignment_notebooks(plan.source):
        raise CourseError(f"expected the assignment's notebooks in {plan.source}, but found none.")
    students = _students(plan)
    plan.url = gradebook_url(root)
    try:
        check_driver_available(plan.url)
        check_database(plan.url)  # reachable, created, UTF-8: one sentence, not a traceback
    except ValueError as exc:
        raise CourseError(str(exc)) from None
    report = plan.report
    plan.in_gradebook, plan.course_id = _gradebook_state(root, plan.url, assignment, report)
    if plan.in_gradebook and any(r.status == NEEDS_REVIEW for r in report.students.values()):
        # Reviews resolved in the formgrader since the last look become decisions now, before
        # this run's flags are written (nbgrader's tables exist: it has graded here before).
        from transformer_lab.grading.record.decisions import formgrader_resolutions

        formgrader_resolutions(plan.url, plan.course_id, report)
    # Which submissions need (re)grading? The gradebook decides what is graded already.
    for sid in students:
        plan.prints[sid] = fingerprint(plan.submitted_root / sid / assignment)
        if (
            options.force
            or not was_graded(report, sid)
            or report.students[sid].fingerprint != plan.prints[sid]
            or sid not in plan.in_gradebook
        ):
            plan.todo.append(sid)
    _plan_changed_tests(plan, students)
    return plan


def _plan_changed_tests(plan: _Plan, students: list[str]) -> None:
    """Submissions graded under tests that changed since: graded again, or kept when told."""
    from transformer_lab.grading.record.test_versions import (
        cell_versions,
        changed_cells,
        stored_versions,
    )

    plan.versions = cell_versions(plan.source)
    if not plan.in_gradebook:
        return
    stored = stored_versions(plan.url, plan.course_id, plan.assignment)
    for sid in students:
        changed = changed_cells(stored.get(sid, {}), plan.versions)
        if not changed or sid in plan.todo:
            continue
        (plan.kept if plan.options.keep_old_tests else plan.retested)[sid] = changed
        if not plan.options.keep_old_tests:
            plan.todo.append(sid)
    for what, group in (("graded again", plan.retested), ("KEPT (--keep-old-tests)", plan.kept)):
        if group:
            cells = sorted({c for cs in group.values() for c in cs})
            plan.report.warnings.append(
                f"the tests of {', '.join(cells)} changed since {len(group)} submission(s) were "
                f"graded; {what}: {', '.join(sorted(group))}"
            )


def _students(plan: _Plan) -> list[str]:
    """The class's submissions of the assignment, narrowed to ``--student`` and ``--shard``."""
    submitted_root, assignment, options = plan.submitted_root, plan.assignment, plan.options
    students = (
        sorted(p.name for p in submitted_root.iterdir() if (p / assignment).is_dir())
        if submitted_root.is_dir()
        else []
    )
    if options.students:
        unknown = sorted(set(options.students) - set(students))
        if unknown:
            raise CourseError(
                f"expected students with a folder {plan.dirs['submitted']}/STUDENT/{assignment}, "
                f"but found none for {', '.join(unknown)}."
            )
        students = [s for s in students if s in options.students]
    return select_shard(students, options.shard)


def _prepare(plan: _Plan) -> None:
    """Staging area, backups of grades about to be replaced, the sandbox, the run's config."""
    root, options, report = plan.root, plan.options, plan.report
    staging_root = root / ".tlab" / "staging" / plan.assignment / "submitted"
    if options.shard is not None:  # shards may share the course folder: one staging area each
        k, n = options.shard
        staging_root = staging_root.with_name(f"submitted-shard-{k}-of-{n}")
    if staging_root.exists():
        shutil.rmtree(staging_root)
    plan.staging_root = staging_root
    regraded = [s for s in plan.todo if was_graded(report, s)]
    plan.backups = backup(root, plan.dirs, plan.assignment, regraded)
    if options.sandbox and plan.todo:
        _probe_sandbox(plan)
    plan.config = {
        "CourseDirectory.submitted_directory": str(staging_root.relative_to(root)),
        "GuardedExecute.sandbox": bool(options.sandbox),
        "GuardedExecute.course_root": str(root),
        # A new secret per run: the hidden cases' inputs cannot be known in advance. It stays
        # in the grading processes, which run the checks (grading/decide/judge.py); never in a
        # kernel.
        "GuardedExecute.hidden_secret": secrets.token_hex(16),
    }
    if options.timeout is not None:
        plan.config["Execute.timeout"] = int(options.timeout)
    if options.budget is not None:
        plan.config["GuardedExecute.hang_budget"] = float(options.budget)
    if options.memory_mb is not None:
        plan.config["GuardedExecute.memory_mb"] = int(options.memory_mb)
    plan.cell_timeout = options.timeout or 30
    budget = options.budget if options.budget is not None else HANG_BUDGET
    # Every cell may use its whole time limit: a submission legitimately takes at most this.
    # A limit runs on the kernel's clock, up to WALL_CAP times itself in wall time on a busy
    # machine (run/kernel_clock.py): a lane is hung only after all of that and more.
    plan.idle = (
        WALL_CAP * (budget + (count_code_cells(plan.source) + 2) * plan.cell_timeout) + 180.0
    )
    if not options.sandbox:
        report.warnings.append(
            "graded WITHOUT the sandbox (--no-sandbox): student code ran with your rights and "
            "could read the solutions and change files and grades"
        )


def _probe_sandbox(plan: _Plan) -> None:
    """Stop before grading if bubblewrap cannot start; warn if kernels cannot get a CPU cap."""
    from transformer_lab.grading.run.bwrap import SandboxError
    from transformer_lab.grading.run.cpushare import cpu_share_backend
    from transformer_lab.grading.run.sandbox import probe

    try:
        probe(plan.root)
    except SandboxError as exc:
        raise CourseError(str(exc)) from None
    if cpu_share_backend() is None and plan.options.jobs > 1 and len(plan.todo) > 1:
        plan.report.warnings.append(
            "no writable cgroup CPU controller: kernels graded at once share the CPUs "
            "without a cap (each still uses only its share of threads, and a submission "
            "that times out is graded once more by the next free lane)"
        )


def _run(plan: _Plan) -> tuple[Lanes, list[dict]]:
    """Pre-flight, run and decide every submission to grade, in lanes of grading processes.

    Returns the lanes (their per-student events) and the run's other events (release, export,
    scores). Stops with :class:`CourseError` if the assignment cannot be loaded.
    """
    from transformer_lab.grading.record.gradebook import redacted
    from transformer_lab.grading.run.loaded import LoadStamp

    root, options, todo = plan.root, plan.options, plan.todo
    (root / "reports").mkdir(exist_ok=True)
    # Loaded before from these sources (run/loaded.py): no generate_assignment, and with nothing
    # new no grading process at all (the stored report and scores stand).
    stamp = LoadStamp(root, plan.dirs, plan.assignment, redacted(plan.url))
    cached = bool(plan.in_gradebook) and stamp.matches()
    if cached and not todo:
        _warn_if_release_is_stale(plan, stamp.release / plan.assignment)
        return _lanes(plan, stamp.release, 0, None), [{"op": "scores", "scores": {}}]
    with tempfile.TemporaryDirectory(prefix="tlab-grade-") as tmp:
        one_lane = max(1, options.jobs) == 1 or len(todo) <= 1
        # Shards finish at different times: nbgrader's CSV is written once, by `tlab export`.
        nbgrader_csv = options.export and options.shard is None
        csv_path = root / "reports" / "nbgrader_grades.csv"
        n_lanes = 1 if one_lane else max(1, min(options.jobs, len(todo)))
        release = stamp.release if cached else Path(tmp) / "release"
        lanes = _lanes(plan, release, n_lanes, csv_path if nbgrader_csv and one_lane else None)
        lanes.loaded_before = cached
        queue = _queue(plan)
        try:
            run_lanes(lanes.after_load, queue, n_lanes)
        except BaseException:
            queue.close()
            raise
        # Graded rows stay leased to this process until the report holds them (save_merged).
        from transformer_lab.grading.run.queue import hold_until_recorded

        hold_until_recorded(root, plan.assignment, queue)
        if not lanes.load_failed() and nbgrader_csv and not one_lane:
            lanes.other_events.extend(_export_class_csv(plan, csv_path))
        if lanes.progress is not None:
            lanes.progress.close()
        if lanes.load_failed():
            gen = lanes.gen_events[-1] if lanes.gen_events else None
            detail = failure_detail(gen, (gen or {}).get("stderr", ""))
            raise CourseError(
                f"could not load {plan.assignment} into the gradebook:\n{detail[-3000:]}"
            )
        if not cached:
            stamp.save(lanes.release_dir / plan.assignment)
        other_events = lanes.other_events
        other_events.append(
            {"op": "scores", "scores": {**lanes.all_scores, **lanes.scores_by_student}}
        )
        _warn_if_release_is_stale(plan, lanes.release_dir / plan.assignment)
    return lanes, other_events


def _lanes(plan: _Plan, release_dir: Path, n_lanes: int, export_to: Path | None) -> Lanes:
    """The lanes of this run: ``n_lanes`` grading processes sharing the machine's CPUs (none:
    an empty record of a run that grades nothing)."""
    # The CPUs this process may use (affinity, cgroup quota), shared by the lanes. Each kernel
    # runs the course's threads (transformer_lab.threads: one unless TLAB_THREADS says more),
    # never more than its share: on a machine with other work, a second thread per kernel
    # made notebook 07's grading 22x slower (benchmarks/README.md, "Grading a class").
    cpus = 1.0  # no lanes (nothing to grade): threads.py would import PyTorch for nothing
    if n_lanes:
        from transformer_lab.threads import usable_cpus

        cpus = max(1.0, float(usable_cpus()) // n_lanes)
    lanes = Lanes(
        root=plan.root,
        assignment=plan.assignment,
        submitted_root=plan.submitted_root,
        staging_root=plan.staging_root,
        release_dir=release_dir,
        config=plan.config,
        feedback=plan.options.feedback,
        export_to=export_to,
        idle_timeout=plan.idle,
        cpus=cpus,
        progress=None if plan.options.quiet else progress_bar(len(plan.todo)),
    )
    return lanes


def _export_class_csv(plan: _Plan, csv_path: Path) -> list[dict]:
    """Every lane has finished: nbgrader's CSV of the whole class, in one more process."""
    job = {"ops": [{"op": "export", "to": str(csv_path)}], "guarded": False}
    events, _, _ = run_driver({"root": str(plan.root), "config": plan.config, **job})
    return events


def _queue(plan: _Plan):
    """This run's submissions put into the course's work queue (shared with other processes)."""
    from transformer_lab.grading.run.queue import WorkQueue, queue_url

    name = plan.assignment
    if plan.options.shard is not None:  # --shard K/N keeps its fixed slice: a queue of its own
        name += "#shard-{}-of-{}".format(*plan.options.shard)
    queue = WorkQueue(queue_url(plan.root, plan.url), name)
    # plan.todo lists only what this run must grade (new, changed, failed, forced, under changed
    # tests): a row finished before now is queued again; a row graded but not yet in a report
    # belongs to a process working at the same time, which records it (run/queue.py).
    queue.put(plan.todo, plan.prints, force=True)
    return queue


def _warn_if_release_is_stale(plan: _Plan, released_now: Path) -> None:
    """Warn when notebooks/ is not what solutions/ generates now."""
    dirs, assignment = plan.dirs, plan.assignment
    diffs = (
        compare_trees(released_now, plan.root / dirs["release"] / assignment)
        if released_now.is_dir()
        else []
    )
    if diffs:
        plan.report.warnings.append(
            f"{dirs['release']}/{assignment} is not what {dirs['source']}/{assignment} generates "
            f"now (students may have worked on a stale version): {diffs[0]}"
        )


def _builds_on(plan: _Plan, sid: str, verdicts: list[dict] | None) -> dict[str, tuple]:
    """The failing cells of ``sid``'s submission whose answer calls an earlier failing answer
    (``publish.failing_dependencies`` on the submitted notebooks, failures as decided)."""
    from transformer_lab.grading.channels.publish import cell_facts, failing_dependencies

    failing = {str(v.get("grade_id")) for v in verdicts or () if not v.get("passed")}
    found: dict[str, tuple] = {}
    if failing:
        for notebook in sorted((plan.submitted_root / sid / plan.assignment).glob("*.ipynb")):
            found.update(failing_dependencies(cell_facts(notebook), failing))
    return found


def _record(plan: _Plan, lanes: Lanes, other_events: list[dict]) -> GradingReport:
    """Each graded submission's event becomes its row; failed regrades keep their old grades;
    flags reach the gradebook and decisions settle reviews; the report is saved."""
    root, report = plan.root, plan.report
    scores = next((e.get("scores", {}) for e in reversed(other_events) if e["op"] == "scores"), {})
    export = next((e for e in other_events if e["op"] == "export"), None)
    if export is not None and not export.get("success"):
        report.warnings.append(f"nbgrader export failed: {(export.get('error') or '')[-300:]}")
    max_score = next((s.get("max_score") for s in scores.values()), None)
    report.max_score = max_score if max_score is not None else report.max_score

    # The submissions this process graded: the queue may have handed some of this run's to
    # another process (which records them) and one of another's to us.
    for sid in sorted(lanes.events_by_student):
        event = lanes.events_by_student[sid]
        previous = report.students.get(sid)
        prints = plan.prints.get(sid) or fingerprint(plan.submitted_root / sid / plan.assignment)
        result = student_result(
            sid, event, scores.get(sid, {}), max_score, prints, previous, plan.cell_timeout,
        )  # fmt: skip
        if not event.get("success") and sid in plan.backups:
            restore(root, plan.dirs, plan.assignment, sid, plan.backups[sid])
            result.notes.append("previous autograded notebook and feedback kept")
        _record_hand_in_and_tests(plan, sid, result)
        store_verdicts(plan.url, plan.course_id, plan.assignment, sid, result.fingerprint,
                       event.get("verdicts"), result.status,
                       _builds_on(plan, sid, event.get("verdicts")))  # fmt: skip
        report.students[sid] = result
        report.graded_now.append(sid)
    for folder in plan.backups.values():  # only this run's students: other shards keep theirs
        shutil.rmtree(folder, ignore_errors=True)
    from transformer_lab.grading.record.decisions import reviewed, sync_flags

    if report.graded_now:  # the formgrader's "Flagged?" column shows needs_review (decisions.py)
        sync_flags(plan.url, plan.course_id, report, report.graded_now)
    save_merged(report, root)
    _settle_record(plan)
    if (plan.in_gradebook or report.graded_now) and report.flagged:
        report.reviewed = reviewed(plan.url, plan.course_id, report)  # a decision settles a review
    return report


def _record_hand_in_and_tests(plan: _Plan, sid: str, result) -> None:
    """When the submission was handed in (nbgrader's timestamp.txt) and under which tests."""
    from transformer_lab.grading.record.late import submitted_at

    handed = submitted_at(plan.submitted_root / sid / plan.assignment)
    result.handed_in = handed.isoformat() if handed else ""
    if sid in plan.retested:
        result.tests_note = (
            "graded again: the tests of " + ", ".join(plan.retested[sid]) + " changed"
        )


def _settle_record(plan: _Plan) -> None:
    """Test versions stored for the submissions graded now; kept ones marked; the decided
    grade written to the gradebook, the feedback pages, the history and the report."""
    from transformer_lab.grading.channels.publish import settle
    from transformer_lab.grading.record.ledger import autograded_scores
    from transformer_lab.grading.record.report import GRADED
    from transformer_lab.grading.record.test_versions import store_versions

    report = plan.report
    graded = [s for s in report.graded_now if report.students[s].status in (GRADED, NEEDS_REVIEW)]
    # nbgrader's score of a submission with an override is the override (its manual scores):
    # the report's score stays the autograded one (the decision is applied by the ledger).
    auto = autograded_scores(plan.url, plan.course_id, plan.assignment, graded)
    for sid, score in auto.items():
        report.students[sid].score = score
    store_versions(plan.url, plan.course_id, plan.assignment, graded, plan.versions)
    for sid, cells in plan.kept.items():
        report.students[sid].tests_note = (
            "graded under earlier tests of " + ", ".join(cells) + " (kept: --keep-old-tests)"
        )
    why = "graded by tlab grade" + (" (tests changed)" if plan.retested else "")
    settle(plan.root, report, why, "tlab grade", report.graded_now + sorted(plan.kept))


def _gradebook_state(root: Path, url: str, assignment: str, report) -> tuple[set[str], str]:
    """(students graded in the gradebook, course id); warns when the gradebook URL changed."""
    from transformer_lab.grading.record.decisions import course_id_of
    from transformer_lab.grading.record.gradebook import (
        alembic_on_path,
        graded_in_gradebook,
        redacted,
    )

    alembic_on_path()
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
