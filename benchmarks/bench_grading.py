"""Grading a class: throughput with 1 and 2 jobs, fixed cost per run, a hanging submission.

A generated class of one course notebook (default ``01_self_attention``, 40 submissions): three
in four students answer every exercise with the solution, every fourth hands in the untouched
release, every fifth answers only the first exercise. ``tlab grade`` grades the whole class into
a fresh SQLite gradebook once with ``--jobs 1`` and once with ``--jobs 2``; every score is
checked against the expected one. Measured in the same run:

- **bare execution**: the same filled-in notebook executed by nbclient in a fresh kernel,
  nothing else (the floor for any grader that starts a kernel per submission); grading's
  overhead per submission is its wall time per submission minus that;
- **fixed cost per run**: the time from ``tlab grade``'s start until the first submission
  starts (nbgrader's start-up, loading the assignment), and all the time spent outside
  submissions (that, plus the final export);
- **CPU time per submission**: the grading processes' CPU seconds divided by the submissions,
  plus a full submission's kernel's (what the estimate scales);
- **each kernel's threads**: two full submissions end with a cell printing the kernel's torch
  threads and its CPU seconds; with N jobs a kernel gets CPUs // N (at least 1);
- **a hanging submission**, graded with one job beside a full one: an infinite loop at the top
  of a cell, and an exercise's function that never returns (called by the later cells too).
  Its extra cost is compared with what the course states: one cell's time limit for the loop
  in a cell; the hang budget plus the short limit for every later cell for the function.

- **every notebook's CPU per submission** (00-09): its solution from ``solutions/`` handed in
  twice and graded with one job; the run's CPU (the grading processes and this one, which runs
  ``tlab grade``'s own part) over the two, plus the kernel's (a probe cell), and the run's fixed
  cost (``--quick``: notebook 01 only, and it says so); in the same run a third copy whose first
  exercise's function never returns: its wall time, and whether it was graded once;
- **two workers, one killed** (``--workers``, PostgreSQL: ``tests/pg_server.py``): two
  ``tlab grade`` processes started at once on one class share the queue in the gradebook; one is
  killed (SIGKILL, with its grading processes) while it holds a lease; a run started after it
  takes up what the killed worker held: every submission graded and recorded exactly once.

The term estimate, 500 students x 10 notebooks on one 16-core machine (``--jobs 16``): each
notebook's CPU seconds per submission x 475 honest submissions, plus 25 hanging ones (5%) that
each hold a lane (one core: the loop spins) for the wall time the hanging copy took, over 16
cores; plus each notebook's fixed cost once. A hang is stopped on the kernel's own clock and
graded once (grading/run/kernel_clock.py). The bound beside it: every hanging submission costs
its honest CPU plus the stated limit (every later cell stopped).

Targets: every submission gets its expected score with every job count; grading adds at most
the time of one bare execution per submission (one job); a hanging submission costs no more
than the stated limit. The machine is shared: each phase prints the load average.

    python benchmarks/bench_grading.py [--students 40] [--notebook 01_self_attention] [--quick]
        [--notebooks 00_tokens_and_embeddings ...] [--no-workers]
"""

from __future__ import annotations

import math
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, base_parser, finish, load_average, setup, verdict

from transformer_lab.grading.run.kernel_clock import HANG_BUDGET

TARGET_OVERHEAD = 1.0  # grading's extra time per submission, as a multiple of bare execution
# The kernel's torch threads and its CPU seconds so far (time and torch are loaded already: the
# cell touches no file and no environment variable, so it raises no review flag).
THREADS_PROBE = (
    "import time as _time, torch as _torch\n"
    "print('THREADS', _torch.get_num_threads(), round(_time.process_time(), 2))"
)
ESTIMATE = dict(students=500, notebooks=9, cores=16, machines=8)
TERM = dict(students=500, cores=16, hanging=0.05)  # every notebook 00-09


def _answer_sources(solution: Path) -> dict[str, str]:
    import nbformat

    nb = nbformat.read(solution, as_version=4)
    out = {}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and meta.get("grade_id"):
            lines = [ln for ln in cell.source.splitlines() if "SOLUTION" not in ln]
            out[meta["grade_id"]] = "\n".join(lines)
    return out


def _course(root: Path, notebook: str, like: Path | None = None):
    """A course folder with ``notebook`` released (copied from the course ``like`` if given);
    returns (answers, released notebook)."""
    import nbformat

    from transformer_lab import cli

    root.mkdir(parents=True)
    shutil.copy(REPO / "nbgrader_config.py", root)
    shutil.copytree(REPO / "solutions" / notebook, root / "solutions" / notebook)
    if like is None:
        assert cli.main(["--root", str(root), "release", notebook]) == 0
    else:
        shutil.copytree(like / "notebooks" / notebook, root / "notebooks" / notebook)
    answers = _answer_sources(root / "solutions" / notebook / f"{notebook}.ipynb")
    released = nbformat.read(root / "notebooks" / notebook / f"{notebook}.ipynb", as_version=4)
    return answers, released


def _submit(root: Path, notebook: str, sid: str, nb) -> None:
    import nbformat

    folder = root / "submitted" / sid / notebook
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / f"{notebook}.ipynb")


def _filled(released, answers: dict[str, str], only: set[str] | None = None):
    import nbformat

    nb = nbformat.from_dict(released)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in answers and (only is None or gid in only):
            cell.source = answers[gid]
    return nb


def make_class(root: Path, notebook: str, students: int, probes: int = 2) -> dict[str, str]:
    """A course folder with ``students`` submissions; returns student -> "full"/"none"/"first".
    The first ``probes`` full submissions end with a cell printing the kernel's threads."""
    import nbformat

    answers, released = _course(root, notebook)
    first = next(iter(answers))
    kinds = {}
    for i in range(students):
        sid = f"s{i:03d}"
        kind = "none" if i % 4 == 1 else "first" if i % 5 == 4 else "full"
        only = {first} if kind == "first" else set() if kind == "none" else None
        nb = _filled(released, answers, only)
        if kind == "full" and probes:
            probes -= 1
            nb.cells.append(nbformat.v4.new_code_cell(THREADS_PROBE))
        _submit(root, notebook, sid, nb)
        kinds[sid] = kind
    return kinds


def make_hanging(
    root: Path,
    notebook: str,
    function: bool = True,
    full: bool = True,
    like: Path | None = None,
    cell: bool = True,
) -> None:
    """``full`` (unless ``full`` is False); ``loop_cell`` (unless ``cell`` is False): full, plus
    ``while True: pass`` at the top of the first answer; ``loop_function`` (unless ``function``
    is False): the first exercise's function never returns. ``root`` may hold a course already."""
    if (root / "notebooks" / notebook).is_dir() and like is None:
        import nbformat

        answers = _answer_sources(root / "solutions" / notebook / f"{notebook}.ipynb")
        released = nbformat.read(root / "notebooks" / notebook / f"{notebook}.ipynb", as_version=4)
    else:
        answers, released = _course(root, notebook, like)
    first = next(iter(answers))
    if full:
        _submit(root, notebook, "full", _filled(released, answers))
    loop = dict(answers)
    if cell:
        loop[first] = "while True:\n    pass\n\n" + answers[first]
        _submit(root, notebook, "loop_cell", _filled(released, loop))
    if not function:
        return
    header = next(ln for ln in answers[first].splitlines() if ln.startswith("def "))
    loop[first] = header + "\n    while True:\n        pass\n"
    _submit(root, notebook, "loop_function", _filled(released, loop))


def bare_seconds(path: Path, repeats: int, warm_up: bool = False) -> list[float]:
    """Execute the notebook with nbclient in a fresh kernel each time (grading's environment)."""
    import nbformat
    from nbclient import NotebookClient

    os.environ["TLAB_GRADING"] = "1"
    times = []
    for i in range(repeats + warm_up):  # a warm-up run fills the file cache, not counted
        nb = nbformat.read(path, as_version=4)
        start = time.perf_counter()
        NotebookClient(  # the kernel killed when done, as the grader does
            nb, timeout=60, kernel_name="python3", allow_errors=True, shutdown_kernel="immediate"
        ).execute(cwd=str(path.parent))
        if i or not warm_up:
            times.append(time.perf_counter() - start)
    return times


def _cpu_seconds() -> float:
    """CPU seconds of this process and of every finished child process (and theirs)."""
    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def grade_class(root: Path, notebook: str, jobs: int, **options) -> dict:
    """Grade with ``jobs`` lanes; wall and CPU time, and when the first submission started."""
    from transformer_lab.grading.autograde import GradeOptions, grade
    from transformer_lab.grading.run import lanes

    starts: list[float] = []
    real_run_driver = lanes.run_driver  # every lane's grading process starts here

    def timed_run_driver(job, *, on_event=None, **kw):
        def note(event):
            if event.get("op") == "grade_student":  # it started `seconds` before it reported
                starts.append(time.perf_counter() - float(event.get("seconds") or 0.0))
            if on_event is not None:
                on_event(event)

        return real_run_driver(job, on_event=note, **kw)

    lanes.run_driver = timed_run_driver
    cpu, start = _cpu_seconds(), time.perf_counter()
    try:
        report = grade(root, notebook, GradeOptions(jobs=jobs, export=True, quiet=True, **options))
    finally:
        lanes.run_driver = real_run_driver
    wall, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
    in_submissions = sum(r.seconds or 0.0 for r in report.students.values())
    return {
        "report": report,
        "wall": wall,
        "cpu": cpu,
        "before_first": (min(starts) - start) if starts else float("nan"),
        # one lane: everything outside submissions (start-up, loading, scores, CSV export)
        "outside": wall - in_submissions if jobs == 1 else float("nan"),
    }


def probes(root: Path, notebook: str) -> list[tuple[str, int, float]]:
    """(student, kernel's torch threads, kernel's CPU seconds) from each threads probe."""
    import nbformat

    seen = []
    for path in sorted((root / "autograded").glob(f"*/{notebook}/{notebook}.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            for out in cell.get("outputs", []):
                text = out.get("text", "")
                if out.get("output_type") == "stream" and text.startswith("THREADS"):
                    threads, cpu = text.split()[1:3]
                    seen.append((path.parts[-3], int(threads), float(cpu)))
    return seen


def stated_hang_limits(notebook_path: Path, timeout: float, budget: float) -> dict[str, float]:
    """What the course states a hang may cost: one cell's limit for a loop in a cell; for a
    function that never returns, cells are stopped at their limit until the hang budget is
    spent (the last one may overshoot it by up to one limit), then every later code cell at
    the short limit (GuardedExecute.overtime_timeout)."""
    import nbformat

    from transformer_lab.grading.run.execute import GuardedExecute

    nb = nbformat.read(notebook_path, as_version=4)
    cells = sum(1 for c in nb.cells if c.cell_type == "code")
    short = GuardedExecute.class_traits()["overtime_timeout"].default_value
    full_cells = -(-budget // timeout)  # cells stopped at the full limit before the budget is spent
    return {
        "loop_cell": timeout,
        "loop_function": full_cells * timeout + max(0, cells - full_cells) * short,
    }


def notebook_cost(root: Path, notebook: str, copies: int = 2, hang: bool = True, **limits) -> dict:
    """One notebook's solution (from ``solutions/``) handed in ``copies`` times and graded with
    one job: CPU seconds per submission (the run's CPU over the copies, plus the kernel's from a
    probe cell), the run's fixed cost, and whether every copy got the full score. Then (unless
    ``hang`` is False), in a run of its own, one copy whose first exercise's function never
    returns: its wall time, its status and how many times a grading process was handed it."""
    import nbformat

    from transformer_lab.grading.run import lanes as _lanes

    _course(root, notebook)
    for i in range(copies):
        folder = root / "submitted" / f"s{i}" / notebook
        shutil.copytree(root / "solutions" / notebook, folder)
        path = folder / f"{notebook}.ipynb"
        nb = nbformat.read(path, as_version=4)
        nb.cells.append(nbformat.v4.new_code_cell(THREADS_PROBE))
        nbformat.write(nb, path)
    run = grade_class(root, notebook, 1, **limits)
    kernel = [c for _, _, c in probes(root, notebook)]
    rows = run["report"].students.values()
    timeout, budget = limits.get("timeout", 30), limits.get("budget", HANG_BUDGET)
    cost = {
        "cpu": run["cpu"] / copies + (statistics.median(kernel) if kernel else float("nan")),
        "kernel": statistics.median(kernel) if kernel else float("nan"),
        "fixed": run["before_first"],
        "wall": run["wall"] / copies,
        "full": all(r.score == run["report"].max_score and r.score for r in rows),
        "statuses": sorted({r.status for r in rows}),
        "why": sorted({f"{r.score}/{run['report'].max_score} {r.reason[:200]}" for r in rows}),
        "hang": stated_hang_limits(
            root / "notebooks" / notebook / f"{notebook}.ipynb", timeout, budget
        ),
        "hang_wall": float("nan"),
        "hang_status": "-",
        "hang_gradings": 0,
    }
    if not hang:
        return cost
    make_hanging(root, notebook, full=False, cell=False)
    gradings: list[str] = []  # every submission a grading process was handed
    real_op = _lanes.Lanes._student_op
    _lanes.Lanes._student_op = lambda self, sid: (gradings.append(sid), real_op(self, sid))[1]
    try:
        hung = grade_class(root, notebook, 1, **limits)["report"].students["loop_function"]
    finally:
        _lanes.Lanes._student_op = real_op
    cost["hang_wall"] = hung.seconds or float("nan")
    cost["hang_status"] = f"{hung.status} {hung.score}/{run['report'].max_score}"
    cost["hang_gradings"] = gradings.count("loop_function")
    return cost


def term_estimate(costs: dict[str, dict], cores: int, students: int, hanging: float) -> dict:
    """Hours for ``students`` x these notebooks on one machine of ``cores`` (see the module's
    docstring): honest CPU and hanging lanes over the cores, plus each notebook's fixed cost.
    ``hanging_h``: each hanging submission holds a lane for the hanging copy's measured wall
    time; ``bound_h``: for its honest CPU plus the stated limit (every later cell stopped)."""
    hangs = round(students * hanging)
    honest = sum((students - hangs) * c["cpu"] for c in costs.values())
    held = sum(hangs * c["hang_wall"] for c in costs.values())
    bound = sum(hangs * (c["cpu"] + c["hang"]["loop_function"]) for c in costs.values())
    fixed = sum(c["fixed"] for c in costs.values())
    return {
        "honest_h": honest / cores / 3600,
        "hanging_h": held / cores / 3600,
        "fixed_h": fixed / 3600,
        "hours": (honest + held) / cores / 3600 + fixed / 3600,
        "bound_h": (honest + bound) / cores / 3600 + fixed / 3600,
    }


def two_workers(root: Path, notebook: str, students: int, lease: float = 5.0) -> dict:
    """Two ``tlab grade`` processes on one class and one PostgreSQL queue; the first is killed
    (with its grading processes) while it holds a lease on a submission and another is graded
    but not yet recorded; a third run takes up both. Returns what each run graded and the
    queue's rows (state, claims) per student."""
    import contextlib
    import re
    import signal
    import subprocess

    sys.path.insert(0, str(REPO / "tests"))
    from pg_server import PostgresServer, missing_reason

    if missing_reason():
        return {"skipped": missing_reason()}
    with PostgresServer() as pg:
        url = pg.create_database("bench")
        _course(root, notebook)
        with open(root / "nbgrader_config.py", "a") as fh:
            fh.write(f"\nc.CourseDirectory.db_url = {url!r}\n")
        for i in range(students):
            shutil.copytree(
                root / "solutions" / notebook, root / "submitted" / f"s{i:02d}" / notebook
            )
        env = dict(os.environ, TLAB_QUEUE_LEASE=str(lease))
        command = [sys.executable, "-m", "transformer_lab.cli", "--root", str(root), "grade"]
        command += [notebook, "--quiet"]

        def start():
            return subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                start_new_session=True,
            )  # fmt: skip

        started = time.perf_counter()
        workers = [start(), start()]
        deadline = time.monotonic() + 1800
        # The first worker is killed with one submission graded (not recorded) and one in flight
        # (with two students, --quick: one in flight).
        wanted = {"graded", "leased"} if students > 2 else {"leased"}
        while time.monotonic() < deadline and workers[0].poll() is None:
            mine = _queue_rows(url, notebook, pid=workers[0].pid)
            if wanted <= {state for state, _ in mine.values()}:
                break
            time.sleep(0.2)
        held = {s: st for s, (st, _) in _queue_rows(url, notebook, workers[0].pid).items()}
        with contextlib.suppress(ProcessLookupError):  # it may have finished first
            os.killpg(workers[0].pid, signal.SIGKILL)
        workers[0].communicate()
        outs = {"survivor": workers[1].communicate()[0]}
        rerun = subprocess.run(command, capture_output=True, text=True, env=env)
        outs["rerun"] = rerun.stdout + rerun.stderr
        wall = time.perf_counter() - started
        rows = _queue_rows(url, notebook)
        count = {k: int(m.group(1)) if (m := re.search(r"This run: (\d+)", v)) else 0
                 for k, v in outs.items()}  # fmt: skip
    from transformer_lab.grading.record.report import GradingReport

    report = GradingReport.load(root, notebook)
    return {
        "held": held,
        "graded": count,
        "rows": rows,
        "report": {s: (r.status, r.score) for s, r in report.students.items()},
        "max_score": report.max_score,
        "wall": wall,
    }


def _queue_rows(url: str, assignment: str, pid: int | None = None) -> dict:
    """student -> (state, claims) in the queue at ``url`` (only worker process ``pid``'s)."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    sql = "SELECT student, state, attempts, worker FROM tlab_work_queue WHERE assignment = :a"
    try:
        with engine.connect() as db:
            rows = db.execute(text(sql), {"a": assignment}).all()
    except Exception:  # noqa: BLE001 - not made yet
        rows = []
    finally:
        engine.dispose()
    return {
        r.student: (r.state, r.attempts)
        for r in rows
        if pid is None or (r.worker or "").split(":")[1:2] == [str(pid)]
    }


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=40)
    parser.add_argument("--notebook", default="01_self_attention")
    parser.add_argument("--bare-repeats", type=int, default=3)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="job counts to time")
    parser.add_argument("--timeout", type=int, default=30, help="per-cell limit (course default)")
    parser.add_argument("--budget", type=float, default=30.0, help="hang budget (course default)")
    parser.add_argument("--no-hang", action="store_true", help="skip the hanging submission")
    every = sorted(p.name for p in (REPO / "solutions").iterdir() if p.name[:2].isdigit())
    parser.add_argument(
        "--notebooks",
        nargs="*",
        default=every,
        help="notebooks whose CPU per submission to measure",
    )
    parser.add_argument("--no-class", action="store_true", help="skip the class of --notebook")
    parser.add_argument("--no-workers", action="store_true", help="skip the two-worker run")
    parser.add_argument("--worker-students", type=int, default=6)
    args = parser.parse_args()
    setup(args)
    hang_limits = dict(timeout=args.timeout, budget=args.budget)
    if args.quick:  # one full, one untouched, with the largest job count; short hang limits
        args.students, args.bare_repeats, args.jobs = 2, 1, args.jobs[-1:]
        hang_limits = dict(timeout=3, budget=3.0)
    # nbgrader's child processes find `alembic` next to this interpreter.
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    if args.no_class:
        finish(term_phases(args))
        return
    from transformer_lab.grading.run.cpushare import cpu_share_backend

    cores = os.cpu_count() or 1
    print(f"kernels' CPU cap: {cpu_share_backend() or 'none (no writable cgroup)'}; {cores} CPUs")

    results = []
    runs = {}
    limits = dict(timeout=args.timeout, budget=args.budget)
    wrong: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        courses = {}
        for jobs in args.jobs:
            courses[jobs] = Path(tmp) / f"jobs{jobs}"
            kinds = make_class(courses[jobs], args.notebook, args.students)
        full = next(s for s, k in kinds.items() if k == "full")
        sample = (
            courses[args.jobs[0]] / "submitted" / full / args.notebook / f"{args.notebook}.ipynb"
        )
        # Bare runs before, between and after the gradings: the machine's load drifts.
        bare = bare_seconds(sample, args.bare_repeats, warm_up=not args.quick)
        print(f"load average after the first bare runs: {load_average()}")
        correct = {}
        for jobs in args.jobs:
            run = runs[jobs] = grade_class(courses[jobs], args.notebook, jobs, **limits)
            report = run["report"]
            want = {"full": report.max_score, "none": 0}
            for s, r in report.students.items():
                expected = (
                    0 < (r.score or 0) < report.max_score
                    if kinds[s] == "first"
                    else r.score == want[kinds[s]]
                )
                if r.status != "graded" or not expected:
                    wrong.append(f"jobs={jobs} {s} ({kinds[s]}): {r.status} {r.score} {r.reason}")
            ok = not any(w.startswith(f"jobs={jobs} ") for w in wrong)
            correct[jobs] = ok and len(report.students) == args.students
            run["probes"] = probes(courses[jobs], args.notebook)
            print(f"load average after jobs={jobs}: {load_average()}")
            if not args.quick:  # one bare run is enough to prove the script works
                bare += bare_seconds(sample, args.bare_repeats)
        hang = None
        if not args.no_hang:
            hang_root = Path(tmp) / "hang"
            # --quick: the loop in a cell only (the function that never returns costs a minute),
            # beside the full submissions of the run above
            make_hanging(
                hang_root,
                args.notebook,
                function=not args.quick,
                full=not args.quick,
                like=courses[args.jobs[-1]],
            )
            hang = grade_class(hang_root, args.notebook, 1, **hang_limits)
            print(f"load average after the hanging submissions: {load_average()}")
            stated = stated_hang_limits(sample, **hang_limits)

    bare_med = statistics.median(bare)
    print(
        f"bare execution of one full submission (nbclient, fresh kernel, TLAB_GRADING=1): "
        f"median {bare_med:.2f} s of {len(bare)} ({', '.join(f'{t:.2f}' for t in bare)})"
    )
    per = {}
    for jobs, run in runs.items():
        n = len(run["report"].students)
        per[jobs] = run["wall"] / n
        in_proc = statistics.median(r.seconds for r in run["report"].students.values() if r.seconds)
        outside = "" if jobs != 1 else f", {run['outside']:.1f} s outside submissions in all"
        print(
            f"jobs={jobs}: {n} submissions in {run['wall']:.1f} s = {60 * n / run['wall']:.1f} "
            f"submissions/min, {per[jobs]:.2f} s each (median {in_proc:.2f} s inside its "
            f"process), overhead over bare {per[jobs] - bare_med:+.2f} s/submission; "
            f"grading processes' CPU {run['cpu'] / n:.2f} s/submission; fixed cost: "
            f"{run['before_first']:.1f} s "
            f"before the first submission started{outside}; scores as expected: {correct[jobs]}"
        )
        seen = "; ".join(f"{s}: {t} thread(s), {c:.1f} CPU s" for s, t, c in run["probes"])
        print(f"  kernels of full submissions (jobs={jobs}): {seen or 'no probe output'}")
    for line in wrong:
        print(f"  unexpected: {line[:300]}")
    for jobs in args.jobs[1:]:
        print(f"{jobs} jobs vs {args.jobs[0]}: {per[args.jobs[0]] / per[jobs]:.2f}x the throughput")

    hang_ok = True
    if hang is not None:
        rows = hang["report"].students
        if "full" in rows:
            base = rows["full"].seconds or 0.0
        else:  # --quick: a full submission of the last run (its seconds there)
            base = runs[args.jobs[-1]]["report"].students[full].seconds or 0.0
        for sid in ("loop_cell", "loop_function"):
            if sid not in rows:
                continue
            r = rows[sid]
            cost = (r.seconds or 0.0) - base
            ok = r.status == "needs_review" and cost <= stated[sid]
            hang_ok = hang_ok and ok
            print(
                f"hanging submission ({sid}): {r.seconds:.1f} s against {base:.1f} s for the full "
                f"one: costs {cost:.1f} s more (stated limit {stated[sid]:.0f} s at "
                f"{hang_limits['timeout']} s per cell, {hang_limits['budget']:.0f} s hang budget), "
                f"{cost / max(per[args.jobs[0]], 1e-9):.1f} normal submissions (wall time "
                f"per submission, 1 job); {r.status}, "
                f"score {r.score}; {r.reason[:100]}"
            )

    # The estimate: all cores busy, CPU time per submission, plus each run's fixed cost.
    e = ESTIMATE
    count = e["students"] * e["notebooks"]
    # CPU time per submission does not depend on the job count; one job's is the cleanest (a
    # submission regraded alone after a timeout under several jobs is counted twice). The
    # grading processes' CPU (measured: they are this process's children) plus a full
    # submission's kernel (the probe: the sandboxed kernels are not reaped into our children).
    first = runs[args.jobs[0]]
    kernel_cpu = statistics.median([c for _, _, c in first["probes"]] or [float("nan")])
    cpu_each = first["cpu"] / len(first["report"].students) + kernel_cpu
    print(
        f"CPU per full submission: {cpu_each:.2f} s = {cpu_each - kernel_cpu:.2f} s in the "
        f"grading process + {kernel_cpu:.2f} s in its kernel"
    )
    fixed = runs[args.jobs[0]]["before_first"]
    for machines in (1, e["machines"]):
        hours = (count * cpu_each / (e["cores"] * machines) + e["notebooks"] * fixed) / 3600
        print(
            f"estimate, {e['students']} students x {e['notebooks']} notebooks like this one on "
            f"{machines} machine(s) of {e['cores']} cores (--jobs {e['cores']}): {hours:.2f} h "
            f"= {count} x {cpu_each:.2f} CPU s / {e['cores'] * machines} cores + "
            f"{e['notebooks']} x {fixed:.1f} s fixed"
        )
    results.append(  # judged under --quick too: a figure the script cannot see is a bug
        verdict(
            "every run's fixed cost measured (its grading processes were seen starting)",
            all(not math.isnan(run["before_first"]) for run in runs.values()),
            ", ".join(f"jobs={j}: {r['before_first']:.1f} s" for j, r in runs.items()),
            quick=False,
        )
    )
    results.append(
        verdict(
            "every score as expected (every job count)",
            all(correct.values()),
            str(correct),
            quick=False,
        )
    )
    overhead = per[args.jobs[0]] - bare_med
    results.append(
        verdict(
            f"overhead per submission <= {TARGET_OVERHEAD:.1f}x bare execution "
            f"({args.jobs[0]} job(s))",
            overhead <= TARGET_OVERHEAD * bare_med,
            f"{overhead:.2f} s = {overhead / bare_med:.2f}x of {bare_med:.2f} s",
            args.quick,
        )
    )
    if hang is not None:
        results.append(
            verdict(
                "a hanging submission costs no more than the stated limit, and is flagged",
                hang_ok,
                "see the lines above",
                args.quick,
            )
        )
    finish(results + term_phases(args))


def term_phases(args) -> list[bool]:
    """Every notebook's CPU per submission, the term estimate and the two-worker run."""
    results = []
    notebooks = args.notebooks
    if args.quick:
        notebooks = notebooks[1:2] or notebooks
        print(f"--quick: CPU per submission of {', '.join(notebooks)} only, not every notebook")
    costs = {}
    with tempfile.TemporaryDirectory(prefix="bench-grading-term-") as tmp:
        for nb in notebooks:
            # --quick: no hanging copy (the class phase has a hang with short limits)
            costs[nb] = c = notebook_cost(Path(tmp) / nb, nb, hang=not args.quick)
            print(
                f"{nb}: {c['cpu']:.2f} CPU s per submission ({c['kernel']:.2f} s in its "
                f"kernel), {c['wall']:.1f} s wall each, fixed cost {c['fixed']:.1f} s, full "
                f"score: {c['full']} {c['statuses'] if c['full'] else c['why']}; its first "
                f"function never returning: {c['hang_wall']:.1f} s wall, {c['hang_status']}, "
                f"graded {c['hang_gradings']}x (stated limit {c['hang']['loop_function']:.0f} s "
                f"on top of the honest CPU) (load {load_average()})"
            )
        t = TERM
        e = term_estimate(costs, t["cores"], t["students"], t["hanging"])
        if costs:  # (--notebooks with none: the two workers only)
            print(
                f"term estimate, {t['students']} students x {len(costs)} notebook(s) on one "
                f"{t['cores']}-core machine, {t['hanging']:.0%} hanging: {e['hours']:.2f} h = "
                f"honest {e['honest_h']:.2f} h + hanging lanes {e['hanging_h']:.2f} h + fixed "
                f"{e['fixed_h']:.3f} h; with every hang at its stated limit (the bound): "
                f"{e['bound_h']:.2f} h"
            )
            results.append(verdict(
                "every notebook's solution graded with the full score",
                all(c["full"] for c in costs.values()),
                ", ".join(nb for nb, c in costs.items() if not c["full"]) or "all",
                quick=False,
            ))  # fmt: skip
        if costs and len(costs) == len(args.notebooks):  # the term needs every notebook
            results.append(
                verdict("term estimate under one hour", e["hours"] < 1.0, f"{e['hours']:.2f} h")
            )
        if not args.no_workers:
            nb = args.notebook
            w = two_workers(Path(tmp) / "workers", nb, 2 if args.quick else args.worker_students)
            print(f"two workers on one PostgreSQL queue, one killed: {w}")
            if "skipped" not in w:
                n = len(w["report"])
                once = (
                    sum(w["graded"].values()) == n
                    and all(state == "done" for state, _ in w["rows"].values())
                    and all(
                        st == "graded" and sc == w["max_score"] for st, sc in w["report"].values()
                    )
                )
                results.append(verdict(
                    "two workers, one killed: every submission graded and recorded once",
                    once,
                    f"runs {w['graded']}, killed worker held {w['held']}",
                    quick=False,
                ))  # fmt: skip
    return results


if __name__ == "__main__":
    main()
