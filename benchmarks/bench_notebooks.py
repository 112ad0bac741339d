"""Wall-clock time of every solution notebook executed headless, against a 60 s budget each.

Each notebook in ``solutions/`` runs top to bottom in a fresh kernel, as a student would run it
(no grading flags: explorers are built, plots drawn), with ``nbclient``. The reference, measured
in the same run, is a fresh kernel that only imports the package: the part of every notebook's
time that no notebook can remove. The test suite checks that the notebooks run without error
(``tests/test_notebooks_execute.py``); how long they take is judged here, never in a test.

Usage:  python benchmarks/bench_notebooks.py [--notebook 07_gpt ...] [--budget 60] [--busy 2]
        [--save DIR] [--quick]
Prints one row per notebook (seconds, ratio to the reference) and one PASS/FAIL line each;
``--busy N`` keeps N other processes spinning for the whole run (``--busy 2`` on a 2-core machine:
a shared JupyterHub node or a laptop doing something else); ``--save DIR`` keeps the executed
notebooks, outputs and figures included. ``--quick`` runs only the smallest notebook and judges
nothing.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

# _common also puts the repository on sys.path, so the scripts run without installing.
from _common import REPO, base_parser, finish, load_average, setup, verdict

BUDGET_S = 60.0  # per notebook, executed headless on a 2-core CPU
CELL_TIMEOUT_S = 300  # a hung cell ends the run instead of blocking it
SOLUTIONS = sorted(
    p for p in (REPO / "solutions").glob("*/*.ipynb") if ".ipynb_checkpoints" not in p.parts
)


def student_environment(threads: int | None) -> None:
    """The kernel inherits this process's environment: make it a student's."""
    os.environ.pop("NBGRADER_EXECUTION", None)
    os.environ.pop("TLAB_GRADING", None)
    os.environ["MPLBACKEND"] = "Agg"  # %matplotlib inline overrides it inside the kernel
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
    )
    if threads is not None:
        os.environ["OMP_NUM_THREADS"] = str(threads)


def execute(nb, folder: Path) -> tuple[float, list[str]]:
    """Run a notebook node in a fresh kernel; return (seconds, error lines)."""
    from nbclient import NotebookClient

    client = NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(folder)}},
    )
    start = time.perf_counter()
    stopped = []
    try:
        client.execute()
    except Exception as exc:  # a cell over its time limit, a dead kernel: report, go on
        stopped = [f"stopped: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"]
    seconds = time.perf_counter() - start
    errors = stopped + [
        f"cell {i}: {out.get('ename')}: {str(out.get('evalue'))[:200]}"
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    return seconds, errors


@contextlib.contextmanager
def busy_processes(count: int):
    """``count`` processes that spin on a CPU each (another user's work), stopped afterwards."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def reference_seconds() -> float:
    """A fresh kernel that imports the package and torch: every notebook's floor."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell("import torch\nimport transformer_lab")]
    seconds, errors = execute(nb, REPO)
    if errors:
        raise RuntimeError(f"the reference kernel failed: {errors}")
    return seconds


def main() -> None:
    import nbformat

    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--notebook", action="append", help="a name such as 07_gpt (repeatable)")
    parser.add_argument("--budget", type=float, default=BUDGET_S, help="seconds per notebook")
    parser.add_argument(
        "--busy", type=int, default=0, help="keep N other processes busy during the run (load)"
    )
    parser.add_argument("--save", type=Path, help="write the executed notebooks to this folder")
    args = parser.parse_args()
    setup(args)
    student_environment(args.threads)
    chosen = [p for p in SOLUTIONS if not args.notebook or p.stem in args.notebook]
    if args.quick:  # the smallest notebook proves the script works
        chosen = [min(chosen, key=lambda p: p.stat().st_size)]
    if not chosen:
        raise SystemExit(f"no solution notebook matches {args.notebook}")

    with busy_processes(args.busy):
        if args.busy:
            print(f"{args.busy} other process(es) kept busy for the whole run")
        reference = reference_seconds()
        print(f"reference: a fresh kernel importing torch and transformer_lab, {reference:.1f} s")
        print("\n| notebook | seconds | x reference |\n|---|---:|---:|")
        rows = []
        for path in chosen:
            nb = nbformat.read(path, as_version=4)
            seconds, errors = execute(nb, path.parent)
            rows.append((path.stem, seconds, errors))
            print(f"| `{path.stem}` | {seconds:.1f} | {seconds / reference:.1f} |", flush=True)
            if args.save:
                args.save.mkdir(parents=True, exist_ok=True)
                nbformat.write(nb, args.save / path.name)
        print(f"\nload average after the runs: {load_average()}")
    results = []
    for name, seconds, errors in rows:
        if errors:
            print(f"      {name} raised: " + "; ".join(errors))
        results.append(
            verdict(
                f"{name} runs headless without error within {args.budget:.0f} s",
                not errors and seconds < args.budget,
                f"{seconds:.1f} s" + (f", {len(errors)} error(s)" if errors else ""),
                args.quick,
            )
        )
    finish(results)


if __name__ == "__main__":
    main()
