"""Notebook 00's checks: correct answers in several styles pass (visible and hidden cases), a
catalogue of realistic wrong answers (at least eight per exercise) is caught WITH the right
diagnosis, and the references are disabled while the student's function runs.

The catalogue (correct variants and wrong implementations) is tests/catalogues/nb00.py, in the
holdout's format; the one floor test (tests/holdout/test_holdout.py) holds it to every mistake
named, none misleading, at least eight per exercise, and ``python -m tests.holdout report 00``
prints the share named.
"""

from __future__ import annotations

import pytest

from tests.catalogues.nb00 import CATALOGUE, GOOD, cp_good, mp_good, mp_no_skip
from transformer_lab import bpe, checks

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _name(fn) -> str:
    return getattr(fn, "__name__", repr(fn))


def _diagnosis(check, impl) -> str | None:
    for hidden in (False, True):
        try:
            check(impl, hidden=hidden)
        except AssertionError as exc:
            return str(exc)
    return None


@pytest.mark.parametrize("hidden", [False, True])
@pytest.mark.parametrize("check, impl", GOOD, ids=[f"{c.__name__}-{_name(f)}" for c, f in GOOD])
def test_correct_implementations_pass(check, impl, hidden, capsys):
    check(impl, hidden=hidden)
    assert "passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "check, impl, words",
    CATALOGUE,
    ids=[f"{c.__name__}-{_name(f)}" for c, f, _ in CATALOGUE],
)
def test_catalogue_of_mistakes_is_diagnosed(check, impl, words):
    message = _diagnosis(check, impl)
    assert message is not None, f"{_name(impl)} passed {check.__name__}"
    assert words in message, message


def _untouched(*args, **kwargs):
    raise NotImplementedError()


@pytest.mark.parametrize(
    "name",
    ["count_pairs", "merge_pair", "train_merges", "bpe_encode", "bpe_decode", "one_hot_embed"],
)
def test_untouched_answer_says_not_implemented(name):
    with pytest.raises(AssertionError, match="not implemented"):
        getattr(checks, f"check_{name}")(_untouched)


@pytest.mark.parametrize(
    "check, impl",
    [
        (checks.check_count_pairs, lambda words: bpe.count_pairs(words)),
        (checks.check_merge_pair, lambda ids, pair, new_id: bpe.merge_pair(ids, pair, new_id)),
        (checks.check_train_merges, lambda text, n: bpe.train_merges(text, n)),
        (checks.check_train_merges, lambda text, n: tm_best_pair_reference(text, n)),
        (checks.check_bpe_encode, lambda text, merges: bpe.encode(text, merges)),
        (checks.check_bpe_decode, lambda ids, merges: bpe.decode(ids, merges)),
    ],
)
def test_references_are_disabled(check, impl):
    with pytest.raises(AssertionError, match="called transformer_lab.bpe"):
        check(impl)


def tm_best_pair_reference(text, n_merges):
    words = bpe.word_counts(text)
    merges = []
    for i in range(n_merges):
        counts = cp_good(words)
        if not counts:
            break
        pair = bpe.best_pair(counts)
        merges.append(pair)
        words = {tuple(mp_good(list(w), pair, 256 + i)): n for w, n in words.items()}
    return merges


def test_diagnose_and_registry():
    assert {"count_pairs", "merge_pair", "train_merges", "bpe_encode", "bpe_decode",
            "one_hot_embed"} <= set(checks.EXERCISES)  # fmt: skip
    assert checks.diagnose("merge_pair", mp_good) is None
    verdict = checks.diagnose("merge_pair", mp_no_skip, ([97, 97, 97], (97, 97), 256))
    assert verdict.named and verdict.student == [256, 256] and verdict.reference == [256, 97]
