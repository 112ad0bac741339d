"""Notebook 07's promise of the instant checks: for every implementation in the mistake catalogue
and every correct variant, "the check passes" implies "the graded cell passes". Each graded cell's
code is run with the implementation in place of the student's answer.

(Full solution 10/10 and untouched 0 through grading is tests/test_grading_e2e.py's
test_real_assignment_full_marks_and_zero[07_gpt], with every other notebook.)
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
import torch
from test_nb07_checks import CATALOGUE, GOOD, _diagnosis  # tests/ is on sys.path under pytest

REPO = Path(__file__).resolve().parents[1]
A = "07_gpt"
SOLUTION = REPO / "solutions" / A / f"{A}.ipynb"


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
