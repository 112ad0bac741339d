"""Notebook 07 end to end: `tlab release` into a temporary course, then `tlab grade` gives the
full solution 10/10 and the untouched student notebook 0 (graded, not crashed).

And the promise of the instant checks: for every implementation in the mistake catalogue and
every correct variant, "the check passes" implies "the graded cell passes". Each graded cell's
code is run with the implementation in place of the student's answer.
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import nbformat
import pytest
import torch
from test_nb07_checks import CATALOGUE, GOOD, _diagnosis  # tests/ is on sys.path under pytest

from transformer_lab import cli

REPO = Path(__file__).resolve().parents[1]
A = "07_gpt"
SOLUTION = REPO / "solutions" / A / f"{A}.ipynb"


@pytest.mark.slow
def test_tlab_grade_full_solution_is_10_and_untouched_is_0(tmp_path):
    shutil.copy(REPO / "nbgrader_config.py", tmp_path / "nbgrader_config.py")
    shutil.copytree(REPO / "solutions" / A, tmp_path / "solutions" / A)
    assert cli.main(["--root", str(tmp_path), "release", A]) == 0
    for student, source in (("solution", "solutions"), ("untouched", "notebooks")):
        shutil.copytree(tmp_path / source / A, tmp_path / "submitted" / student / A)
    code = cli.main(
        [
            "--root",
            str(tmp_path),
            "grade",
            A,
            "--timeout",
            "90",
            "--budget",
            "300",
            "--no-feedback",
            "--quiet",
        ]
    )
    with (tmp_path / "reports" / f"{A}_grades.csv").open() as fh:
        rows = {row["student_id"]: row for row in csv.DictReader(fh)}
    print({s: (r["status"], r["score"], r["max_score"]) for s, r in rows.items()})
    assert code == 0
    assert rows["solution"]["status"] == "graded" and float(rows["solution"]["max_score"]) == 10
    assert float(rows["solution"]["score"]) == 10
    assert rows["untouched"]["status"] == "graded" and float(rows["untouched"]["score"]) == 0


# ---------------------------------------------------------------------------------------------
# "check passes" => "graded cell passes"
CHECK_TO_NAME = {
    "check_next_token_batch": "next_token_batch",
    "check_causal_lm_loss": "causal_lm_loss",
    "check_gpt_from_blocks": "GPTFromBlocks",
    "check_filter_logits": "filter_logits",
    "check_generate_greedy": "generate_greedy",
}


def _graded_cells() -> dict[str, str]:
    """check name -> the visible part of its graded cell (what runs before the hidden tests)."""
    nb = nbformat.read(SOLUTION, as_version=4)
    cells = {}
    for cell in nb.cells:
        if cell.cell_type == "code" and any(
            t.startswith("tests:") for t in cell.metadata.get("tags", [])
        ):
            visible = cell.source.split("### BEGIN HIDDEN TESTS")[0]
            name = next(n for n in CHECK_TO_NAME if f"checks.{n}(" in visible)
            cells[name] = visible
    return cells


def _setup_namespace() -> dict:
    ns: dict = {}
    nb = nbformat.read(SOLUTION, as_version=4)
    setup = next(c for c in nb.cells if "id:setup" in c.metadata.get("tags", []))
    exec(setup.source.replace("%matplotlib inline", ""), ns)
    return ns


IMPLS = [(c, i) for c, i in GOOD] + [(c, i) for c, i, _ in CATALOGUE]


@pytest.mark.parametrize(
    "check,impl",
    IMPLS,
    ids=[f"{c.__name__[6:]}-{getattr(i, '__name__', 'impl')}" for c, i in IMPLS],
)
def test_check_passing_implies_graded_cell_passes(check, impl):
    threads = torch.get_num_threads()
    if _diagnosis(check, impl) is not None:
        return  # the check fails, so the student is told before the graded cell runs
    ns = _setup_namespace()
    ns[CHECK_TO_NAME[check.__name__]] = impl
    try:
        exec(_graded_cells()[check.__name__], ns)
    finally:
        torch.set_num_threads(threads)


def test_every_graded_cell_is_covered():
    assert set(_graded_cells()) == set(CHECK_TO_NAME)
    assert {c.__name__ for c, _ in GOOD} == set(CHECK_TO_NAME)
