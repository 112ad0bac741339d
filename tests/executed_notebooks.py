"""Each solution notebook executed once per test run, whichever test file asks first.

``tests/test_notebooks_execute.py`` needs every solution executed (no error may occur) and
``tests/test_prose_numbers.py`` reads the same outputs (numbers quoted in the prose must match
what the cells printed). Executing a notebook costs up to a minute of two cores, so the first
test that asks for a notebook executes it and writes the result to a folder shared by the whole
run (pytest-xdist's workers included, behind a file lock); later requests read that copy.

The key is the notebook's content (SHA-256), so an edited notebook is executed again. The
folder lives under the run's temporary directory, so nothing carries over from one run to the
next. Kernels run as a student's would: grading flags unset, the repository on ``PYTHONPATH``,
plots drawn with the Agg backend.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
CELL_TIMEOUT = 600  # per cell: a hang fails instead of blocking the run (not a time budget)
GRADING_FLAGS = ("NBGRADER_EXECUTION", "TLAB_GRADING")


def student_environment() -> dict[str, str]:
    """The environment of a student's kernel: no grading flags, the repository importable."""
    env = {k: v for k, v in os.environ.items() if k not in GRADING_FLAGS}
    env["MPLBACKEND"] = "Agg"  # %matplotlib inline overrides it inside the kernel
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    return env


def execute(path: Path, allow_errors: bool, env: dict[str, str] | None = None):
    """Execute a copy of the notebook in a fresh kernel; return (notebook, first error or None).

    Args:
        env: the kernel's environment (default: this process's own).
    """
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        allow_errors=allow_errors,
        resources={"metadata": {"path": str(path.parent)}},
        shutdown_kernel="immediate",  # the notebook is done: no graceful shutdown (~0.8 s)
    )
    error = None
    try:
        client.execute(**({} if env is None else {"env": env}))
    except CellExecutionError as exc:
        error = exc
    return nb, error


class ExecutedSolutions:
    """Solution notebooks executed (errors allowed) once per run, cached in ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)

    def __call__(self, path: Path):
        """The executed copy of the solution notebook at ``path`` (a fresh nbformat object)."""
        from filelock import FileLock  # a dependency of torch

        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        cached = self.folder / f"{path.stem}-{digest}.ipynb"
        with FileLock(str(cached) + ".lock"):
            if not cached.exists():
                nb, _ = execute(path, allow_errors=True, env=student_environment())
                partial = cached.with_suffix(".partial")
                nbformat.write(nb, partial)
                partial.replace(cached)  # readers never see half a file
        return nbformat.read(cached, as_version=4)
