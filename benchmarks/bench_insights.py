"""``tlab insights`` on a generated gradebook: 500 students, ten notebooks.

The gradebook (SQLite, in a temporary folder) is written directly by the generator of
tests/test_grading_insights_unit.py: nbgrader's tables for every real exercise of the course
(``checks/exercises.json``) and one row per decided check in ``tlab_verdicts`` (each student
passes an exercise, makes one of six named mistakes, visible or hidden, or fails generically).
Timed: reading, counting and writing the CSV and the HTML page, for the whole course
(``tlab insights``) and for one notebook (``tlab insights 01``), each the best of ``--rounds``.

Target: the whole course in under 5 s of the process's CPU time (its wall time on a quiet
machine: the work is single-threaded; on the shared two-core machine, whose load average runs at
10-16, the wall time is printed beside it and stretches several-fold).

    python benchmarks/bench_insights.py [--students 500] [--notebooks 10] [--rounds 3]
        [--keep FOLDER]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, base_parser, finish, load_average, setup, verdict

sys.path.insert(0, str(REPO / "tests"))

TARGET_S = 5.0


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=500)
    parser.add_argument("--notebooks", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", type=Path, default=None, help="write the reports here")
    args = parser.parse_args()
    setup(args)
    from test_grading_insights_unit import COURSE, make_gradebook, random_class

    from transformer_lab.grading.channels.insights_page import write_report

    students = 20 if args.quick else args.students
    folder = Path(tempfile.mkdtemp(prefix="tlab-insights-"))
    url = f"sqlite:///{folder / 'gradebook.db'}"
    started = time.perf_counter()
    plan = random_class(students, args.notebooks)
    make_gradebook(url, plan)
    rows = sum(len(v) for a in plan.values() for s in a["students"].values() for _, v in s.values())
    print(
        f"generated: {students} students x {len(plan)} notebooks, {rows} verdict rows, "
        f"in {time.perf_counter() - started:.1f} s; load {load_average()}"
    )
    reports = args.keep or folder / "reports"
    best = {}
    for label, assignment in (("course", None), ("one notebook", sorted(plan)[1])):
        times = []
        for _ in range(args.rounds):
            t0, c0 = time.perf_counter(), time.process_time()
            csv_path, html_path, _ = write_report(url, COURSE, reports, assignment, below=0.5)
            times.append((time.perf_counter() - t0, time.process_time() - c0))
        best[label] = min(times, key=lambda t: t[1])
        size = html_path.stat().st_size / 1e6
        print(
            f"{label}: best of {args.rounds} {best[label][0]:.2f} s wall, "
            f"{best[label][1]:.2f} s CPU; page {size:.1f} MB ({html_path.name}), {csv_path.name}"
        )
    print(f"load after: {load_average()}")
    wall, cpu = best["course"]
    result = verdict(
        f"whole course, {students} students x {len(plan)} notebooks",
        cpu < TARGET_S,
        f"{cpu:.2f} s of CPU, {wall:.2f} s wall (target < {TARGET_S:.0f} s of CPU)",
        args.quick,
    )
    finish([result])


if __name__ == "__main__":
    main()
