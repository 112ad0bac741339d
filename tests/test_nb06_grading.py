"""Notebook 6 end to end: released with `tlab release`, graded with `tlab grade`; the full
solution scores 10 / 10 and the untouched student notebook 0, both graded (not crashed).

(tests/test_grading_e2e.py grades every assignment of the course together; this test grades
06_bert alone, through the command line, and also checks the report's CSV.)
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from shipped_course import copy_course

from transformer_lab import cli

REPO = Path(__file__).resolve().parents[1]
A = "06_bert"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def graded(tmp_path_factory, bwrap):
    root = copy_course(tmp_path_factory.mktemp("nb06_course"), A)  # tests/shipped_course.py
    for student, source in (("solution", root / "solutions"), ("untouched", root / "notebooks")):
        shutil.copytree(source / A, root / "submitted" / student / A)
    code = cli.main(
        ["--root", str(root), "grade", A, "--timeout", "120", "--budget", "300", "--quiet"]
    )
    with (root / "reports" / f"{A}_grades.csv").open() as fh:
        rows = {row["student_id"]: row for row in csv.DictReader(fh)}
    return root, code, rows


def test_full_solution_scores_ten_and_untouched_scores_zero(graded):
    root, code, rows = graded
    assert code == 0, rows
    assert rows["solution"]["status"] == "graded" and rows["untouched"]["status"] == "graded"
    assert float(rows["solution"]["max_score"]) == 10
    assert float(rows["solution"]["score"]) == 10, rows["solution"]
    assert float(rows["untouched"]["score"]) == 0, rows["untouched"]


def test_under_grading_explorers_are_placeholders_and_training_is_capped(graded):
    root, _, _ = graded
    nb = json.loads((root / "autograded" / "solution" / A / f"{A}.ipynb").read_text())
    outputs = json.dumps([c.get("outputs", []) for c in nb["cells"]])
    assert "explorers are switched off while grading" in outputs
    assert "capped" in outputs or "grading mode" in outputs


def test_released_notebook_has_no_answers_and_no_hidden_tests():
    nb = json.loads((REPO / "notebooks" / A / f"{A}.ipynb").read_text())
    text = json.dumps(nb)
    assert "BEGIN SOLUTION" not in text and "hidden=True" not in text
    assert text.count("raise NotImplementedError()") == 5
