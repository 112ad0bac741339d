"""A busy machine never changes a grade (issue 41), and a dying kernel leaves nothing behind
(issue 37 item 6), through ``tlab grade`` in the sandbox.

Two processes keep the cores busy (``while 1: pass``, each its own process started and ended
here by its id) while notebook 01 is graded: the solution keeps 10/10 without a flag and the
untouched release is graded 0, never "not graded" or "needs review". A submission whose kernel
is killed in the middle of the run (SIGKILL to itself) leaves no IPC folder in /dev/shm and no
seed folder in the temporary directory.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import adversarial_class as klass
import pytest

from transformer_lab import cli

pytestmark = [pytest.mark.slow, pytest.mark.needs_bwrap]
A = klass.A
KILLED = "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"


def _folders() -> set[str]:
    found = set()
    for base in ("/dev/shm", tempfile.gettempdir()):
        for prefix in ("tlab-ipc-", "tlab-seed-"):
            found |= {str(p) for p in Path(base).glob(prefix + "*")}
    return found


def _grade(root: Path) -> dict[str, dict]:
    assert cli.main(["--root", str(root), "grade", A, "--quiet"]) in (0, 1)
    with (root / "reports" / f"{A}_grades.csv").open() as fh:
        return {row["student_id"]: row for row in csv.DictReader(fh)}


def test_busy_cores_change_no_grade(tmp_path):
    klass.build(tmp_path, students=["honest_full", klass.UNTOUCHED])
    busy = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(2)]
    try:
        rows = _grade(tmp_path)
    finally:
        for process in busy:
            process.kill()
            process.wait()
    honest, untouched = rows["honest_full"], rows[klass.UNTOUCHED]
    assert honest["status"] == "graded" and float(honest["score"]) == 10, honest
    assert untouched["status"] == "graded" and float(untouched["score"]) == 0, untouched


def test_a_killed_kernel_leaves_nothing_behind(tmp_path):
    klass.build(tmp_path, students=["honest_full"])
    nb = klass.notebook_for(tmp_path, "honest_full")
    at = next(
        i
        for i, c in enumerate(nb.cells)
        if c.metadata.get("nbgrader", {}).get("grade_id") == "sdpa_impl"
    )
    import nbformat

    nb.cells.insert(at + 1, nbformat.v4.new_code_cell(KILLED))
    klass.submit(tmp_path, "killed", nb)
    before = _folders()
    rows = _grade(tmp_path)
    assert rows["killed"]["status"] in ("not_graded", "needs_review", "graded"), rows["killed"]
    left = _folders() - before
    # Folders of kernels another test process is running right now show up too: a real leak is
    # one that is still there once every kernel could have finished.
    deadline = time.monotonic() + 180
    while left and time.monotonic() < deadline:
        time.sleep(2)
        left = {path for path in left if os.path.exists(path)}
    assert left == set()
