"""Grading cost per honest submission: this checkout against an earlier revision, same run.

Issue 22 moved every decision out of the student's kernel: the checks now run in the grading
process and call the student's functions in the kernel over one silent request per call (and the
solution notebook's reference run per grading run is gone). This script measures what that costs:
a class of honest submissions (the solution, answers only) of one notebook is graded with
``tlab grade --jobs 1`` by this checkout and by the code of ``--baseline`` (a git revision,
checked out into a temporary worktree and put first on PYTHONPATH), alternately, ``--rounds``
times each; the machine is shared, so each side's best round is compared.

Target: the new grader costs at most 1.2x the baseline's seconds per submission.

    python benchmarks/bench_grading_cost.py [--notebook 01_self_attention] [--students 6]
        [--baseline 992c820] [--rounds 2]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, base_parser, finish, load_average, setup, verdict

TARGET = 1.2


def make_class(root: Path, notebook: str, students: int) -> None:
    """``students`` copies of the solution notebook, submitted."""
    root.mkdir(parents=True)
    shutil.copy(REPO / "nbgrader_config.py", root)
    shutil.copytree(REPO / "solutions" / notebook, root / "solutions" / notebook)
    for i in range(students):
        shutil.copytree(root / "solutions" / notebook, root / "submitted" / f"s{i:02d}" / notebook)


def grade_seconds(code: Path | None, root: Path, notebook: str) -> tuple[float, str]:
    """Wall seconds of one ``tlab grade`` of the class with the code at ``code`` (None: here)."""
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = str(code) + os.pathsep + env.get("PYTHONPATH", "")
    for folder in ("autograded", "feedback", "reports", ".tlab", "notebooks"):
        shutil.rmtree(root / folder, ignore_errors=True)
    (root / "gradebook.db").unlink(missing_ok=True)
    command = [sys.executable, "-m", "transformer_lab.cli", "--root", str(root)]
    # The students' release as shipped (notebooks/ is the release of solutions/, see
    # tests/test_release.py); not timed, and either side's `tlab release` would only rewrite it.
    shutil.copytree(REPO / "notebooks" / notebook, root / "notebooks" / notebook)
    started = time.monotonic()
    done = subprocess.run(
        [*command, "grade", notebook, "--quiet"], env=env, capture_output=True, text=True
    )
    seconds = time.monotonic() - started
    report = (root / "reports" / f"{notebook}_grades.csv").read_text()
    return seconds, report if done.returncode == 0 else done.stderr[-2000:]


def main() -> None:
    parser = base_parser(__doc__)
    parser.add_argument("--notebook", default="01_self_attention")
    parser.add_argument("--students", type=int, default=6)
    parser.add_argument("--baseline", default="992c820")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if args.quick:  # the smoke test: one submission, one round, the target not judged
        args.students, args.rounds = 1, 1
    setup(args)
    results = []
    with tempfile.TemporaryDirectory(prefix="tlab-bench-cost-") as tmp:
        tmp = Path(tmp)
        baseline = tmp / "baseline"
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", str(baseline), args.baseline],
            check=True,
            capture_output=True,
        )
        try:
            make_class(tmp / "course", args.notebook, args.students)
            times: dict[str, list[float]] = {"baseline": [], "now": []}
            for r in range(args.rounds):
                for side, code in (("baseline", baseline), ("now", None)):
                    seconds, report = grade_seconds(code, tmp / "course", args.notebook)
                    full = report.count(",graded,") if "," in report else 0
                    times[side].append(seconds / args.students)
                    print(
                        f"round {r + 1} {side:8s}: {seconds:6.1f} s for {args.students} "
                        f"submissions ({seconds / args.students:.2f} s each, {full} graded; "
                        f"load {load_average()})"
                    )
            best = {side: min(values) for side, values in times.items()}
            ratio = best["now"] / best["baseline"]
            print(
                f"\nper honest submission ({args.notebook}): baseline {args.baseline} "
                f"{best['baseline']:.2f} s, now {best['now']:.2f} s: {ratio:.2f}x"
            )
            results.append(
                verdict(
                    f"grading cost <= {TARGET}x the baseline",
                    ratio <= TARGET,
                    f"{ratio:.2f}x ({best['now']:.2f} s vs {best['baseline']:.2f} s)",
                    quick=args.quick,
                )
            )
        finally:
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "remove", "--force", str(baseline)],
                capture_output=True,
            )
    finish(results)


if __name__ == "__main__":
    main()
