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

# Wrong implementations the checks pass (module -> labels). Round 1's weak spots (nb00's
# overlapping merges, nb04's seed-ignoring and output-0-only detectors) are caught now. The
# eleven of rounds 2 and 3 are what the course accepts as correct, on purpose: the exercise's
# text asks nothing of it, and a correct implementation in tests/catalogues, tests/honest or the
# solution does the same.
KNOWN_PASSED: dict[str, set[str]] = {
    # Round 4 is the forecast, measured once and not tuned on: its one miss stays listed (the
    # loop version of multi-head attention giving every head the mask of head 0).
    "nb02_round4": {"mha_loop_gives_every_head_mask_of_head_0"},
    # NaN on a query with no key to attend to: the exercises state no rule for such rows
    # (notebook 04's section 5 shows the remedy); tests/catalogues' "einsum throughout" (nb02)
    # and "NaN allowed on rows with nothing to attend to" (nb04) are correct entries.
    # A float32 buffer for float64 inputs: honest alternative 2 of tests/honest/nb02.py.
    "nb02_round2": {"mha_nan_for_fully_masked_rows", "mha_loop_float32_output_buffer"},
    "nb04_round2": {"cross_attention_torch_softmax_nan_rows"},
    "nb04_round3": {"cross_attention_nan_when_a_row_is_fully_masked"},
    # The variance as E[x^2] - E[x]^2 (off only for features sharing a mean of about 300 or
    # more): the catalogue's correct ln_moments computes it so.
    "nb05_round2": {"layer_norm_mean_of_squares_formula"},
    "nb05_round3": {"layer_norm_variance_as_mean_square_minus_square_mean"},
    # float64 never asked for in notebook 08: the course's own solution makes a float32 Conv2d,
    # and the catalogue's correct rollout_renormalised starts from a float32 identity; a Linear
    # without bias is not the exercise's ("copy weight and bias"; the solution copies both).
    "nb08_round2": {"linear_to_conv_ignores_dtype", "attention_rollout_float32_identity"},
    "nb08_round3": {
        "linear_to_conv_always_float32",
        "rollout_identity_always_float32",
        "linear_to_conv_crashes_without_bias",
    },
}


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
