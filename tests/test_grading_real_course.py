"""Every assignment of the real course through ``tlab grade``: the full solution gets full marks,
the untouched student release 0, both graded (not crashed). The time limits are generous (the
suite shares the machine; a cell stopped at its limit would be a flag, not a failure of the code).

Each assignment is copied alone, as shipped (``tests/shipped_course.py``: ``notebooks/`` is the
release), into its own temporary course, so the assignments are dealt out to the test workers one
by one. Assignments graded in another file with more submissions
(``tests/test_nbNN_grading.py``; notebook 01's adversarial class and 07's and 09's, which hold
the solution's answers and the untouched release beside their attacks) are graded there, not
twice; a test below checks that every assignment is graded in one place or the other.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest
from shipped_course import copy_course

from transformer_lab.grading.autograde import GradeOptions, grade
from transformer_lab.grading.course import list_assignments
from transformer_lab.grading.record.report import GRADED

REPO = Path(__file__).resolve().parents[1]
ASSIGNMENTS = list_assignments(REPO / "solutions")
# assignment -> the file that grades its solution and untouched release (with more submissions)
OWN_FILE = {
    "01_self_attention": "test_grading_adversarial.py",  # honest_full and untouched
    "05_transformer_block": "test_nb05_grading.py",
    "06_bert": "test_nb06_grading.py",
    "07_gpt": "test_grading_adversarial_07_09.py",
    "09_attention_at_scale": "test_grading_adversarial_07_09.py",
}
HERE = [a for a in ASSIGNMENTS if a not in OWN_FILE]

pytestmark = pytest.mark.slow


def _released_course(root: Path, assignment: str) -> Path:
    """``assignment`` alone in ``root`` as shipped (tests/shipped_course.py), with two
    submissions: solution, untouched."""
    copy_course(root, assignment)
    for student, source in (("solution", "solutions"), ("untouched", "notebooks")):
        shutil.copytree(root / source / assignment, root / "submitted" / student / assignment)
    return root


@pytest.mark.skipif(not HERE, reason="every assignment has a grading file of its own")
@pytest.mark.parametrize("assignment", HERE)
def test_full_marks_for_the_solution_and_zero_untouched(tmp_path, bwrap, assignment):
    course = _released_course(tmp_path, assignment)
    started = time.monotonic()
    report = grade(
        course, assignment, GradeOptions(timeout=120, budget=300.0, quiet=True, feedback=False)
    )
    print(
        f"\n{assignment}: graded 2 submissions in {time.monotonic() - started:.1f} s "
        f"({', '.join(f'{s}: {r.seconds}s' for s, r in sorted(report.students.items()))})"
    )
    sol, untouched = report.students["solution"], report.students["untouched"]
    assert sol.status == GRADED and untouched.status == GRADED, (sol.reason, untouched.reason)
    assert report.max_score and sol.score == report.max_score, sol
    assert untouched.score == 0, untouched


def test_every_assignment_is_graded_here_or_in_its_own_file():
    assert ASSIGNMENTS, "solutions/ holds no assignment"
    assert set(HERE) | set(OWN_FILE) == set(ASSIGNMENTS)
    for assignment, name in OWN_FILE.items():
        text = (Path(__file__).parent / name).read_text(encoding="utf-8")
        if name == "test_grading_adversarial.py":  # its class is built in adversarial_class.py
            text += (Path(__file__).parent / "adversarial_class.py").read_text(encoding="utf-8")
            assert 'UNTOUCHED: ({"graded"}, 0, False)' in text and '"honest_full"' in text
        else:
            assert '"untouched"' in text, name
        assert f'"{assignment}"' in text and re.search(r'grade\(|"grade"', text), name
