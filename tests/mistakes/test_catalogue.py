"""The wrong-implementation catalogues of notebooks 01-04, measured against the instant checks.

* every wrong implementation fails its check, with a message containing its words (>= 95% named,
  none misleading, none passed);
* every correct implementation (other valid styles) passes its check, visible and hidden;
* "check passes implies graded cell passes": each implementation runs in the graded cells of the
  solution notebook (visible asserts and hidden check); a correct one must pass them, a wrong
  one must never pass the check and then fail the graded cell.

Run ``python -m tests.mistakes.report`` for the table per notebook.
"""

from __future__ import annotations

import contextlib
import io

import pytest

from tests.mistakes import catalogue_01, catalogue_02, catalogue_03, catalogue_04
from tests.mistakes._harness import EXERCISES, build, graded_cells_pass, run_check
from transformer_lab import checks

WRONG = catalogue_01.WRONG + catalogue_02.WRONG + catalogue_03.WRONG + catalogue_04.WRONG
RIGHT = catalogue_01.RIGHT + catalogue_02.RIGHT + catalogue_03.RIGHT + catalogue_04.RIGHT


def _id(entry) -> str:
    return f"{entry.exercise}:{entry.label}"


def test_every_exercise_has_eight_mistakes_and_a_correct_variant():
    for exercise in EXERCISES:
        n = sum(e.exercise == exercise for e in WRONG)
        assert n >= 8, f"{exercise}: {n} wrong implementations"
        assert any(e.exercise == exercise for e in RIGHT), exercise


@pytest.mark.parametrize("entry", WRONG, ids=_id)
def test_wrong_implementation_is_named(entry):
    outcome, message, _ = run_check(entry, checks)
    assert outcome == "named", f"{outcome}: {message!r} lacks {entry.words}"


@pytest.mark.parametrize("hidden", [False, True], ids=["visible", "hidden"])
@pytest.mark.parametrize("entry", RIGHT, ids=_id)
def test_correct_variant_passes(entry, hidden):
    check = getattr(checks, EXERCISES[entry.exercise][0])
    with contextlib.redirect_stdout(io.StringIO()):
        check(build(entry), hidden=hidden)


@pytest.mark.parametrize("entry", RIGHT + WRONG, ids=_id)
def test_check_passes_implies_graded_cell_passes(entry):
    outcome, message, _ = run_check(entry, checks)
    graded, why = graded_cells_pass(entry)
    if outcome == "passed" or not entry.words:
        assert graded, f"the check passed but the graded cell failed: {why}"
