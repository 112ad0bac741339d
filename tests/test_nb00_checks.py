"""Notebook 00's checks: correct answers in several styles pass (visible and hidden cases), a
catalogue of realistic wrong answers (at least eight per exercise) is caught WITH the right
diagnosis, and the references are disabled while the student's function runs.

The catalogue (correct variants and wrong implementations) is tests/catalogues/nb00.py, in the
holdout's format; the one floor test (tests/holdout/test_holdout.py) holds it to every mistake
named, none misleading, at least eight per exercise, and ``python -m tests.holdout report 00``
prints the share named.
"""

from __future__ import annotations

import contextlib
import io
import json
import pathlib

import pytest

from tests.catalogues.nb00 import CATALOGUE, GOOD, cp_good, mp_good, mp_no_skip
from tests.holdout import nb00 as holdout_nb00
from transformer_lab import bpe, checks
from transformer_lab.lessons import why_attention

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
    [
        "count_pairs",
        "merge_pair",
        "train_merges",
        "bpe_encode",
        "bpe_decode",
        "one_hot_embed",
        "causal_average",
    ],
)
def test_untouched_answer_says_not_implemented(name):
    with pytest.raises(AssertionError, match="not implemented") as info:
        getattr(checks, f"check_{name}")(_untouched)
    # students have their own notebook, with `# YOUR CODE HERE` where the answer goes
    assert "YOUR CODE HERE" in str(info.value) and "solution" not in str(info.value)


@pytest.mark.parametrize(
    "check, impl",
    [
        (checks.check_count_pairs, lambda words: bpe.count_pairs(words)),
        (checks.check_merge_pair, lambda ids, pair, new_id: bpe.merge_pair(ids, pair, new_id)),
        (checks.check_train_merges, lambda text, n: bpe.train_merges(text, n)),
        (checks.check_train_merges, lambda text, n: tm_best_pair_reference(text, n)),
        (checks.check_bpe_encode, lambda text, merges: bpe.encode(text, merges)),
        (checks.check_bpe_decode, lambda ids, merges: bpe.decode(ids, merges)),
        (checks.check_causal_average, lambda x: why_attention.causal_average(x)),
    ],
)
def test_references_are_disabled(check, impl):
    with pytest.raises(AssertionError, match="called transformer_lab.(bpe|lessons.why_attention)"):
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
            "one_hot_embed", "causal_average"} <= set(checks.EXERCISES)  # fmt: skip
    assert checks.diagnose("merge_pair", mp_good) is None
    verdict = checks.diagnose("merge_pair", mp_no_skip, ([97, 97, 97], (97, 97), 256))
    assert verdict.named and verdict.student == [256, 256] and verdict.reference == [256, 97]


# ---------------------------------------------------------------------------------------------
# The instant check passes if and only if grading passes: the graded cell (its visible asserts,
# the instant check and the hidden one) runs in-process, from the solution notebook.
SOLUTION = (
    pathlib.Path(__file__).resolve().parents[1]
    / "solutions"
    / "00_tokens_and_embeddings"
    / "00_tokens_and_embeddings.ipynb"
)
GRADED = {  # check -> (the function's name in the notebook, the graded cell's id)
    checks.check_count_pairs: ("count_pairs", "count_pairs_tests"),
    checks.check_merge_pair: ("merge_pair", "merge_pair_tests"),
    checks.check_train_merges: ("train_merges", "train_merges_tests"),
    checks.check_bpe_encode: ("encode", "bpe_encode_tests"),
    checks.check_bpe_decode: ("decode", "bpe_decode_tests"),
    checks.check_one_hot_embed: ("one_hot_embed", "one_hot_embed_tests"),
    checks.check_causal_average: ("causal_average", "causal_average_tests"),
}
GRADED_BY_NAME = {check.__name__: cell for check, cell in GRADED.items()}
_IMPLS = [(c, f) for c, f, _ in CATALOGUE] + list(GOOD)
_IMPLS += [(checks.EXERCISES[m.exercise][0], m.fn) for m in holdout_nb00.MISTAKES]


@pytest.fixture(scope="module")
def notebook_cells():
    cells = json.loads(SOLUTION.read_text())["cells"]
    by_id = {c["metadata"].get("nbgrader", {}).get("grade_id"): "".join(c["source"]) for c in cells}
    setup = next("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    setup = "\n".join(line for line in setup.splitlines() if not line.startswith("%"))
    return setup, by_id


def _graded_cell_passes(setup: str, source: str, name: str, impl) -> bool:
    namespace: dict = {}
    exec(setup, namespace)  # noqa: S102  (the notebook's own import cell)
    namespace[name] = impl
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(source, namespace)  # noqa: S102
    except Exception:  # an assert, a check, or any error of the implementation
        return False
    return True


def _instant_check_passes(check, impl) -> bool:
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            check(impl)
    except AssertionError:
        return False
    return True


@pytest.mark.parametrize("check, impl", _IMPLS, ids=[f"{c.__name__}-{_name(f)}" for c, f in _IMPLS])
def test_instant_check_passes_iff_grading_passes(check, impl, notebook_cells):
    setup, cells = notebook_cells
    name, grade_id = GRADED_BY_NAME[check.__name__]
    instant = _instant_check_passes(check, impl)
    graded = _graded_cell_passes(setup, cells[grade_id], name, impl)
    assert instant == graded, (
        f"{check.__name__} {'passed' if instant else 'failed'} but the graded cell {grade_id} "
        f"{'passed' if graded else 'failed'}"
    )
