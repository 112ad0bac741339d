"""The JupyterHub cycle through nbgrader's own exchange, end to end, in a temporary folder.

Instructor: ``tlab release``, ``nbgrader release_assignment``; two students ``nbgrader
fetch_assignment``, answer, ``nbgrader submit``; instructor ``nbgrader collect``, ``tlab grade``,
``nbgrader generate_feedback``, ``nbgrader release_feedback``; each student ``nbgrader
fetch_feedback`` and reads a feedback page with their own score and no hidden test.
Every step is nbgrader's real command line (each student with its own home folder and cache,
as on a hub); only the exchange lives in a temporary folder instead of /srv/nbgrader/exchange.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from test_grading_e2e import FULL, A, _cell, _solution_source

from transformer_lab import cli
from transformer_lab.grading.report import GRADED, GradingReport

REPO = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "course"
BIN = Path(sys.executable).parent
COURSE = "transformer-lab"

pytestmark = pytest.mark.slow


def _nbgrader(cwd: Path, *args: str, home: Path | None = None) -> str:
    env = dict(os.environ, PATH=os.pathsep.join([str(BIN), os.environ["PATH"]]))
    if home is not None:
        env["HOME"] = str(home)
    done = subprocess.run(
        [str(BIN / "nbgrader"), *args], cwd=cwd, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{done.stderr[-3000:]}"
    return done.stdout + done.stderr


@pytest.mark.needs_bwrap
def test_release_fetch_submit_collect_grade_feedback_cycle(tmp_path):
    root = tmp_path / "course"
    root.mkdir()
    shutil.copy(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
    shutil.copytree(FIXTURE / "solutions", root / "solutions")
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    ex = [f"--Exchange.root={exchange}", f"--CourseDirectory.course_id={COURSE}"]

    assert cli.main(["--root", str(root), "release"]) == 0
    _nbgrader(root, "release_assignment", A, *ex)
    assert (exchange / COURSE / "outbound" / A / f"{A}.ipynb").is_file()

    answers = {"alice": FULL, "bob": {"softmax_impl": "solution"}}
    for student, cells in answers.items():
        home = tmp_path / student
        home.mkdir()
        student_ex = [*ex, f"--Exchange.cache={home / '.cache'}", f"--student={student}"]
        _nbgrader(home, "fetch_assignment", A, *student_ex, home=home)
        path = home / A / f"{A}.ipynb"
        nb = nbformat.read(path, as_version=4)
        for gid in cells:
            _cell(nb, gid).source = _solution_source(root, gid)
        nbformat.write(nb, path)
        _nbgrader(home, "submit", A, *student_ex, home=home)

    _nbgrader(root, "collect", A, *ex)
    for student in answers:
        assert (root / "submitted" / student / A / f"{A}.ipynb").is_file()
        assert (root / "submitted" / student / A / "timestamp.txt").is_file()

    assert cli.main(["--root", str(root), "grade", A, "--quiet", "--timeout", "90"]) == 0
    report = GradingReport.load(root, A)
    assert {s: (r.status, r.score) for s, r in report.students.items()} == {
        "alice": (GRADED, 6),
        "bob": (GRADED, 2),
    }

    # nbgrader's own feedback step works on what tlab graded (e.g. after manual grading).
    _nbgrader(root, "generate_feedback", A, "--force")
    _nbgrader(root, "release_feedback", A, *ex)

    for student, score in (("alice", "6"), ("bob", "2")):
        home = tmp_path / student
        student_ex = [*ex, f"--Exchange.cache={home / '.cache'}", f"--student={student}"]
        _nbgrader(home, "fetch_feedback", A, *student_ex, home=home)
        pages = list((home / A / "feedback").glob(f"*/{A}.html"))
        assert len(pages) == 1, pages
        html = pages[0].read_text()
        assert f"Score: {score}.0 / 6.0" in html  # the notebook's total, first on the page
        assert "BEGIN HIDDEN TESTS" not in html and "hidden=True" not in html
