"""Notebook 9's instant checks against its mistake catalogue (tests/catalogues/nb09.py):
every wrong implementation named (>= 95%, printed with -s), none passing, every correct variant
passing both the check and the graded cell."""

from __future__ import annotations

from collections import Counter

import pytest
from catalogue_harness import ROOT, Notebook, run_check, score

from tests.catalogues.nb09 import CORRECT
from tests.catalogues.nb09 import MISTAKES as WRONG

NOTEBOOK = Notebook(ROOT / "solutions" / "09_attention_at_scale" / "09_attention_at_scale.ipynb")
EXERCISES = {
    "merge_softmax_stats",
    "tiled_attention",
    "grouped_query_attention",
    "kv_cache_bytes",
    "sliding_window_mask",
}


def test_catalogue_is_wide():
    counts = Counter(e.exercise for e in WRONG)
    assert set(counts) == EXERCISES and min(counts.values()) >= 8, counts


@pytest.mark.parametrize("entry", CORRECT, ids=[f"{e.exercise}-{e.label}" for e in CORRECT])
def test_correct_variants_pass_check_and_graded_cell(entry):
    assert run_check(entry) is None, run_check(entry)
    assert run_check(entry, hidden=True) is None
    assert NOTEBOOK.graded_cell_passes(entry)


def test_mistakes_are_named_and_check_pass_implies_graded_pass(capsys):
    result = score(NOTEBOOK, WRONG)
    share = result["named"] / len(WRONG)
    with capsys.disabled():
        print(f"\nnotebook 9: {result['named']}/{len(WRONG)} mistakes named ({share:.0%})")
    assert not result["contract"], f"check passed, graded cell failed: {result['contract']}"
    assert not result["passed_wrongly"], f"wrong implementations passed: {result['passed_wrongly']}"
    assert share >= 0.95, "\n".join(result["generic"])
