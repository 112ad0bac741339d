"""Check for notebook 0, exercise 3: training the merges.

    train_merges(text, n_merges) -> [(left, right), ...]     merge i creates token 256 + i

A wrong list of merges is first compared with whole-run variants (ties broken another way,
pairs counted across words or once, ids numbered from 255, code points instead of bytes, ...);
otherwise the run is replayed up to the first merge that differs, and the message says what
was true at that step (a tie, a pair that no longer occurs, one that is not the most frequent).
"""

from __future__ import annotations

from transformer_lab import bpe as _bpe
from transformer_lab import bpe as _ref
from transformer_lab.checks.engine.core import Case, generator, kind_of
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint
from transformer_lab.checks.nb00_tokens_and_embeddings.bpe import random_words
from transformer_lab.checks.nb00_tokens_and_embeddings.bpe_probes import (
    family_of,
    probe_errors,
    train_families,
)
from transformer_lab.checks.nb00_tokens_and_embeddings.runner import WatchedRunner
from transformer_lab.checks.nb00_tokens_and_embeddings.training_mistakes import variants
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_train_merges"]

_TRAIN = _ref.train_merges
_BEST = _ref.best_pair
_COUNT = _ref.count_pairs
_MERGE = _ref.merge_pair


def _replay(text: str, got: list, want: list) -> tuple[str, bool]:
    """What was true at the first merge where ``got`` leaves ``want``."""
    k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    words = _ref.word_counts(text)
    for i, pair in enumerate(want[:k]):
        words = {tuple(_MERGE(list(w), pair, 256 + i)): n for w, n in words.items()}
    counts = _COUNT(words)
    if k >= len(want):
        return (
            f"merges {k} and after: you learned {len(got)} merges, but {len(want)} were asked "
            f"for and possible: stop after n_merges merges",
            False,
        )
    if k >= len(got):
        left = "pairs still occur" if counts else "no pair is left"
        return (
            f"you stopped after {len(got)} merges, but {len(want)} were asked for and {left} "
            f"at that point: keep merging until n_merges merges or no pair is left",
            bool(counts),
        )
    mine, best = got[k], want[k]
    where = f"at merge {k} (token {256 + k})"
    if mine not in counts:
        return (
            f"{where} you chose {mine}, which occurs in no word at that point (the most "
            f"frequent pair is {best}, {counts[best]} times): recount the pairs of the merged "
            f"words after every merge, inside words only",
            True,
        )
    if counts[mine] == counts[best]:
        return (
            f"ties are broken differently: {where} the pairs {mine} and {best} both occur "
            f"{counts[best]} times, and the rule takes the smallest (left id, right id), {best}",
            True,
        )
    return (
        f"{where} you chose {mine} ({counts[mine]} times), but {best} occurs {counts[best]} "
        f"times: take the most frequent pair, recounted after every merge",
        True,
    )


def _cases(hidden: bool) -> list[Case]:
    g = generator(7500 if hidden else 500)
    specs = [
        # words of different counts: the count-weighted first merge is (t, o), the unweighted
        # one (space, a); text.split() differs at the second merge
        ("word counts decide", "to to to to to ab abc abd", 2),
        # the graded cell's examples
        ("one word three times", "ab ab ab", 1),
        ("a tie between three pairs", "ab ba", 1),
        ("one word", "hi", 5),
        ("a pair twice in a word", "aaaa", 2),
        ("bytes 132 and 32", "Ąa a a a Ąa", 2),  # '32 97' inside '132 97'
        # runs of 3-5 equal tokens: an overlapping or right-to-left merge learns other pairs
        ("runs of one letter", "aaa aaa aaaaa baaab", 3),
        ("a tie in the first merge", "ab ab ba ba", 1),
        ("counts change after a merge", "aaa aaa ab ab ab", 3),
        ("words only", "ab ab ab\nba ba ba", 2),
        ("more merges than pairs", "hi hi", 5),
        ("no merges", "to be or not to be", 0),
        ("unicode", "naïve café naïve ñandú café ☕☕", 6),
        ("Shakespeare", _ref_excerpt(), 25),
    ]
    specs.append(("a random text", " ".join(random_words(g, 60)), 12))
    if hidden:
        specs.append(("another random text", " ".join(random_words(g, 90, 8)), 20))
    return [
        Case(name, (text, n), {}, f"text={text[:60]!r}..., n_merges={n}") for name, text, n in specs
    ]


def _ref_excerpt() -> str:
    from transformer_lab.data.text import load_shakespeare

    return load_shakespeare()[:600]


def _train_error_hint(exc: BaseException, case: Case) -> str:
    text = str(exc)
    if isinstance(exc, ValueError) and ("empty" in text or "no pairs" in text):
        return (
            "no pair is left to merge (every word is a single token now) before n_merges "
            "merges: stop the loop when the pair counts are empty, and return the merges so far"
        )
    if isinstance(exc, KeyError):
        return (
            "a pair seen for the first time has no count yet: start it at 0, "
            "counts.get(pair, 0) + n"
        )
    return _signature_hint(exc, "train_merges(text, n_merges)")


def check_train_merges(train_merges, hidden: bool = False) -> None:
    """Check ``train_merges(text, n_merges) -> [(left, right), ...]`` against the reference."""
    __tracebackhide__ = True
    run = WatchedRunner(
        "check_train_merges",
        train_merges,
        [
            Forbidden("transformer_lab.bpe.train_merges", function=_TRAIN),
            Forbidden("transformer_lab.bpe.best_pair", function=_BEST),
        ],
        hidden,
        _train_error_hint,
        function="train_merges",
    )
    probe_errors(run, train_families, _train_error_hint)
    for case in _cases(hidden):
        text, n = case.args
        want = _TRAIN(text, n)
        got = run.call(case)
        if got is None:
            run.fail("your function returned None: return the list of merges.", case)
        if type(got) is not list:
            run.fail(f"return a list of merges, but yours is {kind_of(got)}.", case)
        for item in got:
            if type(item) is list and len(item) == 2:
                run.fail("return each merge as a tuple (left, right), not a list.", case)
            if type(item) is int:
                run.fail(
                    "return the merged pairs (left id, right id), not the new token ids.", case
                )
            if type(item) is not tuple or len(item) != 2 or any(type(t) is not int for t in item):
                run.fail(
                    f"each merge is a tuple (left id, right id) of two ints, but yours holds "
                    f"{kind_of(item)}.",
                    case,
                )
        if got == want:
            continue
        for message, variant in variants(text, n):
            try:
                candidate = variant()
            except Exception:  # this mistake would crash on this input: not the student's
                continue
            if candidate == got and candidate != want:
                run.fail(message + ".", case)
        message = family_of(run, train_families())
        if message is not None:
            run.fail(message + ".", case)
        message, named = _replay(text, got, want)
        run.fail(message + ".", case, named=named)
    run.passed()


register(
    Exercise(
        "train_merges",
        "00_tokens_and_embeddings",
        "train_merges(text, n_merges) -> [(left, right), ...]",
        cells=(Cell("train_merges_tests", "train_merges", 2),),
        check=check_train_merges,
        reference=_bpe.train_merges,
    )
)
