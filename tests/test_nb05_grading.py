"""Notebook 05 through `tlab grade` end to end: released into a temporary course, the full
solution scores 10/10, the untouched student notebook 0, and a student who answered only
exercises 1 and 5 gets their 4 points; all graded (not crashed)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import nbformat
import pytest
from shipped_course import copy_course

from transformer_lab.grading.autograde import GradeOptions, grade
from transformer_lab.grading.record.report import GRADED

REPO = Path(__file__).resolve().parents[1]
A = "05_transformer_block"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = copy_course(tmp_path_factory.mktemp("nb05_course"), A)  # tests/shipped_course.py
    for student, source in (("solution", root / "solutions"), ("untouched", root / "notebooks")):
        shutil.copytree(source / A, root / "submitted" / student / A)
    _submit_partial(root, answered=("layer_norm_impl", "count_parameters_impl"))
    return root


def _grade_id(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def _submit_partial(root: Path, answered: tuple[str, ...]) -> None:
    """The released notebook with the solution's code in the given answer cells only."""
    solution = nbformat.read(root / "solutions" / A / f"{A}.ipynb", as_version=4)
    answers = {_grade_id(c): c.source for c in solution.cells if _grade_id(c) in answered}
    released = nbformat.read(root / "notebooks" / A / f"{A}.ipynb", as_version=4)
    for cell in released.cells:
        if _grade_id(cell) in answers:
            cell.source = "\n".join(
                line for line in answers[_grade_id(cell)].splitlines() if "### " not in line
            )
    folder = root / "submitted" / "partial" / A
    folder.mkdir(parents=True)
    nbformat.write(released, folder / f"{A}.ipynb")


@pytest.mark.needs_bwrap
def test_full_solution_gets_10_and_untouched_gets_0(course):
    started = time.monotonic()
    report = grade(course, A, GradeOptions(timeout=120, budget=300.0, quiet=True, feedback=False))
    print(
        f"\n{A}: graded 3 submissions in {time.monotonic() - started:.1f} s "
        f"({', '.join(f'{s}: {r.seconds}s' for s, r in sorted(report.students.items()))})"
    )
    solution, untouched = report.students["solution"], report.students["untouched"]
    assert solution.status == GRADED and untouched.status == GRADED, (
        solution.reason,
        untouched.reason,
    )
    assert report.max_score == 10
    assert solution.score == 10, solution
    assert untouched.score == 0, untouched
    partial = report.students["partial"]
    assert partial.status == GRADED and partial.score == 4, partial


def test_released_notebook_is_the_repository_one(course):
    import json

    def cells(path):
        return [
            (c["cell_type"], "".join(c["source"])) for c in json.loads(path.read_text())["cells"]
        ]

    released = course / "notebooks" / A / f"{A}.ipynb"
    assert cells(released) == cells(REPO / "notebooks" / A / f"{A}.ipynb")
