"""Notebook 6's checks: correct answers in several styles pass, a catalogue of realistic wrong
answers is caught with the right diagnosis (the share named is reported), and whenever a check
passes, the graded cell of the solution notebook passes too.

The catalogue (correct variants and wrong implementations, each written the way a student would
write it) is tests/catalogues/nb06.py, in the holdout's format; the one floor test
(tests/holdout/test_holdout.py) holds it to its recorded share too.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from tests.catalogues.nb06 import (
    CATALOGUE,
    GOOD,
    good_corrupt_bernoulli,
)
from transformer_lab import bert_inputs, checks
from transformer_lab.checks.nb06_bert import bert_masking

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "solutions" / "06_bert" / "06_bert.ipynb"


def _run(check, impl, hidden=False):
    """The check's message, or None if it passed."""
    try:
        check(impl, hidden=hidden)
    except AssertionError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check,impl", GOOD, ids=[g[1].__name__ for g in GOOD])
def test_correct_variants_pass(check, impl, hidden, capsys):
    check(impl, hidden=hidden)
    assert "passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "check,impl,words", CATALOGUE, ids=[f"{c[0].__name__}-{c[1].__name__}" for c in CATALOGUE]
)
def test_catalogue_mistake_is_named(check, impl, words):
    message = _run(check, impl)
    assert message is not None, f"{impl.__name__} passed {check.__name__}"
    assert message.startswith(check.__name__ + ":")
    assert words in message, message


def test_catalogue_share_named_and_none_misleading():
    """At least eight mistakes per exercise; >= 95% named correctly, none named wrongly."""
    per_check: dict[str, int] = {}
    named, misleading = 0, []
    all_words = {words for _, _, words in CATALOGUE}
    for check, impl, words in CATALOGUE:
        per_check[check.__name__] = per_check.get(check.__name__, 0) + 1
        message = _run(check, impl) or ""
        if words in message:
            named += 1
        elif any(other in message for other in all_words - {words}):
            misleading.append((impl.__name__, message))
    share = named / len(CATALOGUE)
    print(f"\nnotebook 6 catalogue: {named}/{len(CATALOGUE)} named ({share:.0%}); {per_check}")
    assert all(n >= 8 for n in per_check.values()), per_check
    assert not misleading, misleading
    assert share >= 0.95


def test_untouched_and_references_are_refused():
    def untouched(*args, **kwargs):
        raise NotImplementedError()

    for check in (
        checks.check_pair_inputs,
        checks.check_bert_embeddings,
        checks.check_mlm_corrupt,
        checks.check_masked_lm_loss,
        checks.check_cls_logits,
    ):
        assert "not implemented yet" in _run(check, untouched)
    from transformer_lab.models import apply_bert_masking

    def uses_package(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
        return apply_bert_masking(input_ids, mask_id, vocab_size, p, special_ids, generator)

    assert "disable" in _run(checks.check_mlm_corrupt, uses_package)
    assert "disable" in _run(checks.check_masked_lm_loss, bert_inputs.masked_lm_loss)


@pytest.mark.parametrize("hidden", [False, True])
def test_masking_tolerance_is_wide_enough_for_the_reference_over_many_seeds(hidden):
    """The reference stays well inside the stated tolerances in every round's configuration over
    60 fresh blocks of seeds (so a correct function never fails the check by bad luck)."""
    worst_rate, worst_split = 0.0, 0.0
    for p, seeds, B, T, last in bert_masking._rounds(hidden):
        V, pad, cls_, sep, mask = bert_masking._layout(last)
        specials = [pad, cls_, sep, mask]
        ids = bert_masking._batch(torch.Generator().manual_seed(0), B, T, last)
        special = torch.isin(ids, torch.tensor(specials))
        for block in range(60):
            tally = bert_masking._Tally()
            for seed in range(len(seeds)):
                gen = torch.Generator().manual_seed(10_000 + block * 100 + seed)
                inputs, labels = bert_inputs.mlm_corrupt(ids, mask, V, specials, p, gen)
                bert_masking._count(tally, ids, special, inputs, labels, mask, p, T)
            worst_rate = max(worst_rate, abs(tally.chosen / tally.eligible - p))
            shares = [n / tally.chosen for n in (tally.masked, tally.random, tally.kept)]
            worst_split = max(worst_split, *(abs(s - t) for s, t in zip(shares, (0.8, 0.1, 0.1))))
    print(
        f"\nworst deviation over 60 blocks per round: rate {worst_rate:.4f}, split {worst_split:.4f}"
    )
    assert worst_rate < bert_masking.RATE_TOL / 1.5
    assert worst_split < bert_masking.SPLIT_TOL / 1.5


# ---------------------------------------------------------------------------------------------
# "check passes" implies "graded cell passes": run the graded cells' code with every variant.
def _graded_cells() -> dict[str, str]:
    nb = json.loads(NOTEBOOK.read_text())
    cells = {}
    for cell in nb["cells"]:
        tags = cell.get("metadata", {}).get("tags", [])
        if any(t.startswith("tests:") for t in tags):
            source = "".join(cell["source"])
            cells[next(t[3:] for t in tags if t.startswith("id:"))] = source
    return cells


def _setup_namespace() -> dict:
    nb = json.loads(NOTEBOOK.read_text())
    first_code = next(c for c in nb["cells"] if c["cell_type"] == "code")
    source = "\n".join(
        ln for ln in "".join(first_code["source"]).splitlines() if not ln.startswith("%")
    )
    namespace: dict = {}
    exec(compile(source, "setup", "exec"), namespace)
    return namespace


GRADED = {
    checks.check_pair_inputs: ("pair_inputs", "pair_inputs_tests"),
    checks.check_bert_embeddings: ("bert_embeddings", "bert_embeddings_tests"),
    checks.check_mlm_corrupt: ("mlm_corrupt", "mlm_corrupt_tests"),
    checks.check_masked_lm_loss: ("masked_lm_loss", "masked_lm_loss_tests"),
    checks.check_cls_logits: ("cls_logits", "cls_logits_tests"),
}


@pytest.mark.skipif(not NOTEBOOK.exists(), reason="solutions/06_bert is not written yet")
def test_check_passing_implies_graded_cell_passing():
    cells = _graded_cells()
    variants = [(c, i) for c, i in GOOD] + [(c, i) for c, i, _ in CATALOGUE]
    random.Random(0).shuffle(variants)
    base = _setup_namespace()
    for check, impl in variants:
        name, cell_id = GRADED[check]
        check_ok = _run(check, impl) is None
        namespace = {**base, name: impl}
        try:
            exec(compile(cells[cell_id], cell_id, "exec"), namespace)
            graded_ok = True
        except (AssertionError, Exception):  # any failure of the graded cell
            graded_ok = False
        assert graded_ok or not check_ok, (
            f"{impl.__name__}: the check passed, the graded cell failed"
        )
        if (check, impl) in [(c, i) for c, i in GOOD]:
            assert graded_ok, f"{impl.__name__} is correct but its graded cell failed"


def test_masking_check_leaves_the_notebooks_random_state_alone():
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    checks.check_mlm_corrupt(good_corrupt_bernoulli)
    assert torch.equal(torch.rand(3), expected)
