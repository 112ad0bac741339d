"""Grading a class: submissions per minute with 1 and 2 jobs, and the overhead over bare execution.

A generated class of one course notebook (default ``01_self_attention``, 40 submissions): three
in four students answer every exercise with the solution, every fourth hands in the untouched
release, every fifth answers only the first exercise. ``tlab grade`` grades the whole class into
a fresh SQLite gradebook once with ``--jobs 1`` and once with ``--jobs 2``; every score is
checked against the expected one. "Bare" is the same filled-in notebook executed by nbclient in
a fresh kernel, nothing else (the floor for any grader that starts a kernel per submission); the
overhead per submission is grading's wall time per submission minus that.

Targets: every submission gets its expected score with every job count, and grading adds at
most the time of one bare execution per submission (one job): the pre-flight, nbgrader's
passes over the notebook, the gradebook writes and the feedback page together cost no more than
running the notebook itself. The machine is shared: each phase prints the load average.
Figures and the estimate for a 500-student, nine-notebook course: benchmarks/README.md.

    python benchmarks/bench_grading.py [--students 40] [--notebook 01_self_attention] [--quick]
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, base_parser, finish, load_average, setup, verdict

TARGET_OVERHEAD = 1.0  # grading's extra time per submission, as a multiple of bare execution


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


def make_class(root: Path, notebook: str, students: int) -> dict[str, str]:
    """A course folder with ``students`` submissions; returns student -> "full"/"none"/"first"."""
    import nbformat

    from transformer_lab import cli

    root.mkdir(parents=True)
    shutil.copy(REPO / "nbgrader_config.py", root)
    shutil.copytree(REPO / "solutions" / notebook, root / "solutions" / notebook)
    assert cli.main(["--root", str(root), "release", notebook]) == 0
    answers = _answer_sources(root / "solutions" / notebook / f"{notebook}.ipynb")
    first = next(iter(answers))
    released = nbformat.read(root / "notebooks" / notebook / f"{notebook}.ipynb", as_version=4)
    kinds = {}
    for i in range(students):
        sid = f"s{i:03d}"
        kind = "none" if i % 4 == 1 else "first" if i % 5 == 4 else "full"
        nb = nbformat.from_dict(released)
        for cell in nb.cells:
            gid = cell.metadata.get("nbgrader", {}).get("grade_id")
            if gid in answers and (kind == "full" or (kind == "first" and gid == first)):
                cell.source = answers[gid]
        folder = root / "submitted" / sid / notebook
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{notebook}.ipynb")
        kinds[sid] = kind
    return kinds


def bare_seconds(path: Path, repeats: int, warm_up: bool = False) -> list[float]:
    """Execute the notebook with nbclient in a fresh kernel each time (grading's environment)."""
    import nbformat
    from nbclient import NotebookClient

    os.environ["TLAB_GRADING"] = "1"
    times = []
    for i in range(repeats + warm_up):  # a warm-up run fills the file cache, not counted
        nb = nbformat.read(path, as_version=4)
        start = time.perf_counter()
        NotebookClient(nb, timeout=60, kernel_name="python3", allow_errors=True).execute(
            cwd=str(path.parent)
        )
        if i or not warm_up:
            times.append(time.perf_counter() - start)
    return times


def grade_class(root: Path, notebook: str, jobs: int):
    from transformer_lab.grading.autograde import GradeOptions, grade

    start = time.perf_counter()
    report = grade(root, notebook, GradeOptions(jobs=jobs, export=True))
    return report, time.perf_counter() - start


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=40)
    parser.add_argument("--notebook", default="01_self_attention")
    parser.add_argument("--bare-repeats", type=int, default=3)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="job counts to time")
    args = parser.parse_args()
    setup(args)
    if args.quick:
        args.students, args.bare_repeats = 2, 1  # one full, one untouched
    # nbgrader's child processes find `alembic` next to this interpreter.
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])

    results = []
    runs = []
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
        bare = bare_seconds(sample, args.bare_repeats, warm_up=True)
        print(f"load average after the first bare runs: {load_average()}")
        per = {}
        correct = {}
        for jobs in args.jobs:
            report, seconds = grade_class(courses[jobs], args.notebook, jobs)
            n = len(report.students)
            max_score = report.max_score
            want = {"full": max_score, "none": 0}
            ok = all(
                r.status == "graded"
                and (kinds[s] == "first" or r.score == want[kinds[s]])
                and (kinds[s] != "first" or 0 < r.score < max_score)
                for s, r in report.students.items()
            )
            correct[jobs] = ok and n == args.students
            per[jobs] = seconds / n
            in_proc = [r.seconds for r in report.students.values() if r.seconds]
            runs.append((jobs, n, seconds, statistics.median(in_proc), ok))
            print(f"load average after jobs={jobs}: {load_average()}")
            bare += bare_seconds(sample, args.bare_repeats)
        bare_med = statistics.median(bare)
        print(
            f"bare execution of one full submission (nbclient, fresh kernel, TLAB_GRADING=1): "
            f"median {bare_med:.2f} s of {len(bare)} ({', '.join(f'{t:.2f}' for t in bare)})"
        )
        for jobs, n, seconds, median_in_proc, ok in runs:
            print(
                f"jobs={jobs}: {n} submissions in {seconds:.1f} s = {60 * n / seconds:.1f} submissions/min, "
                f"{seconds / n:.2f} s each (median {median_in_proc:.2f} s inside its process), "
                f"overhead over bare {seconds / n - bare_med:+.2f} s/submission; scores as expected: {ok}"
            )
        for jobs in args.jobs[1:]:
            print(
                f"{jobs} jobs vs {args.jobs[0]}: {per[args.jobs[0]] / per[jobs]:.2f}x the throughput"
            )
        for jobs in args.jobs:
            hours = 4500 * per[jobs] / 3600
            print(
                f"estimate, 500 students x 9 notebooks like this one, jobs={jobs}: {hours:.1f} h "
                f"on this machine; {hours / 8:.1f} h with 8 such machines (shards)"
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
    finish(results)


if __name__ == "__main__":
    main()
