"""The wrong-implementation catalogues of notebooks 01-04, measured against the instant checks.

* every wrong implementation fails its check, with a message containing its words (the one
  floor test, tests/holdout/test_holdout.py, holds the share named and "none misleading");
* every correct implementation (other valid styles) passes its check, visible and hidden;
* "check passes implies graded cell passes": each implementation runs in the graded cells of the
  solution notebook (visible asserts and hidden check); a correct one must pass them, a wrong
  one must never pass the check and then fail the graded cell.

``python -m tests.holdout report 01 02 03 04`` prints the table per notebook.
"""

from __future__ import annotations

import contextlib
import io

import pytest

from tests.catalogues import nb01, nb02, nb03, nb04
from tests.catalogues._source import graded_cells_pass
from tests.holdout import nb01_04
from tests.holdout._harness import classify
from transformer_lab import checks
from transformer_lab.checks.registry import REGISTRY

WRONG = nb01.MISTAKES + nb02.MISTAKES + nb03.MISTAKES + nb04.MISTAKES
RIGHT = nb01.CORRECT + nb02.CORRECT + nb03.CORRECT + nb04.CORRECT


def _id(entry) -> str:
    return f"{entry.exercise}:{entry.label}"


def test_every_exercise_has_eight_mistakes_and_a_correct_variant():
    for exercise in (e for e in REGISTRY.values() if e.number in ("01", "02", "03", "04")):
        n = sum(e.exercise == exercise.name for e in WRONG)
        assert n >= 8, f"{exercise.name}: {n} wrong implementations"
        assert any(e.exercise == exercise.name for e in RIGHT), exercise.name


@pytest.mark.parametrize("entry", WRONG, ids=_id)
def test_wrong_implementation_is_named(entry):
    outcome, message = classify(entry, modes=(False,))  # the instant check
    assert outcome == "named", f"{outcome}: {message!r} lacks {entry.words}"


@pytest.mark.parametrize("hidden", [False, True], ids=["visible", "hidden"])
@pytest.mark.parametrize("entry", RIGHT, ids=_id)
def test_correct_variant_passes(entry, hidden):
    check = getattr(checks, f"check_{entry.exercise}")
    with contextlib.redirect_stdout(io.StringIO()):
        check(entry.fn, hidden=hidden)


@pytest.mark.parametrize("entry", RIGHT + WRONG + nb01_04.MISTAKES, ids=_id)
def test_check_passes_implies_graded_cell_passes(entry):
    outcome, message = classify(entry, modes=(False,))  # "check passes": the instant check
    graded, why = graded_cells_pass(entry)
    if outcome == "passed" or not entry.words:
        assert graded, f"the check passed but the graded cell failed: {why}"
