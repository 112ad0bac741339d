"""Floor test of the text-only holdouts (tests/holdout_text): each module keeps the share of its
mistakes that the instant checks name (``NAMED_AT_LEAST``, measured when it was written), every
correct variant passes its check, and no wrong implementation passes a check beyond the ones
listed in ``KNOWN_PASSED`` (weak spots of the checks, reported to their authors)."""

from __future__ import annotations

import pytest

from tests.holdout._harness import classify
from tests.holdout_text.report import modules

MODULES = modules()
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]  # about 40 s in all

# Wrong implementations the checks passed at the last measurement (module -> labels).
# Weak spots reported when the holdouts were written (nb00's overlapping merges, nb04's
# seed-ignoring and output-0-only detectors) are caught now: none is known to pass.
KNOWN_PASSED: dict[str, set[str]] = {}


def _name(module) -> str:
    return module.__name__.rsplit(".", 1)[1]


@pytest.mark.parametrize("module", MODULES, ids=[_name(m) for m in MODULES])
def test_floor(module):
    name = _name(module)
    outcomes = [(m, *classify(m)) for m in module.MISTAKES]
    passed = {m.label for m, outcome, _ in outcomes if outcome == "passed"}
    new = sorted(passed - KNOWN_PASSED.get(name, set()))
    assert not new, f"{name}: checks now pass these wrong implementations: {new}"
    named = sum(outcome == "named" for _, outcome, _ in outcomes) / len(outcomes)
    assert named >= module.NAMED_AT_LEAST, (
        f"{name}: {named:.0%} of {len(outcomes)} mistakes named, "
        f"below the recorded {module.NAMED_AT_LEAST:.0%}"
    )


@pytest.mark.parametrize("module", MODULES, ids=[_name(m) for m in MODULES])
def test_correct_variants_pass(module):
    failing = [f"{c.exercise}.{c.label}: {msg[:300]}" for c in module.CORRECT
               if (outcome := classify(c))[0] != "passed" for msg in [outcome[1]]]  # fmt: skip
    assert not failing, "\n".join(failing)
