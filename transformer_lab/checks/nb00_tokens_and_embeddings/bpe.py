"""Check for notebook 00, exercise 1: counting adjacent pairs (exercise 2, merging one pair, is
checked in merge_pair.py; the random words both use are here).

    count_pairs(words) -> {(left, right): count}     words: {tuple of ids: how often it occurs}

The rules are the reference's (:mod:`transformer_lab.bpe`). Wrong answers are compared with a
catalogue of realistic mistakes computed on the same inputs (overlapping pairs, word counts
ignored, pairs across words, a merge that does not skip, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from transformer_lab import bpe as _bpe
from transformer_lab import bpe as _ref
from transformer_lab.checks.engine.core import Case, generator, kind_of
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint
from transformer_lab.checks.nb00_tokens_and_embeddings.bpe_probes import (
    COUNT_FAMILIES,
    family_of,
    probe_errors,
)
from transformer_lab.checks.nb00_tokens_and_embeddings.confirm import confirmed_variant
from transformer_lab.checks.nb00_tokens_and_embeddings.runner import WatchedRunner
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = [
    "check_count_pairs",
    "random_words",
    "is_int_list",
]


_COUNT_PAIRS = _ref.count_pairs


# A few non-ASCII letters, so words hold multi-byte characters.
_LETTERS = "abcdeehilnorst" + "éßλ"


def random_words(g, n_words: int, longest: int = 6) -> list[str]:
    """Seeded words over a small alphabet (repeats and doubled letters are frequent)."""
    import torch

    words = []
    for _ in range(n_words):
        n = int(torch.randint(1, longest + 1, (1,), generator=g))
        picks = torch.randint(len(_LETTERS), (n,), generator=g).tolist()
        words.append("".join(_LETTERS[i] for i in picks))
    return words


def is_int_list(value: Any) -> bool:
    return type(value) is list and all(type(v) is int for v in value)


# ---------------------------------------------------------------------------------------------
# count_pairs
def _count_variants(words: dict) -> list[tuple[str, Callable[[], dict]]]:
    def unweighted() -> dict:
        return _COUNT_PAIRS({w: 1 for w in words})

    def non_overlapping() -> dict:
        counts: dict = {}
        for word, n in words.items():
            i = 0
            while i < len(word) - 1:
                pair = (word[i], word[i + 1])
                counts[pair] = counts.get(pair, 0) + n
                i += 2 if word[i] == word[i + 1] else 1
        return counts

    def once_per_word() -> dict:
        counts: dict = {}
        for word, n in words.items():
            for pair in set(zip(word, word[1:])):
                counts[pair] = counts.get(pair, 0) + n
        return counts

    def last_pair_missing() -> dict:
        return _COUNT_PAIRS({w[:-1]: n for w, n in words.items() if len(w) > 1})

    def across_words() -> dict:
        seq = [t for word, n in words.items() for _ in range(n) for t in word]
        return _COUNT_PAIRS({tuple(seq): 1})

    def across_words_distinct() -> dict:
        seq = [t for word in words for t in word]
        return _COUNT_PAIRS({tuple(seq): 1})

    def reversed_pairs() -> dict:
        return {(b, a): n for (a, b), n in _COUNT_PAIRS(words).items()}

    def started_at_one() -> dict:
        return {p: n + 1 for p, n in _COUNT_PAIRS(words).items()}

    def equal_tokens_skipped() -> dict:
        return {p: n for p, n in _COUNT_PAIRS(words).items() if p[0] != p[1]}

    def overwritten() -> dict:
        counts: dict = {}
        for word, n in words.items():
            for pair in zip(word, word[1:]):
                counts[pair] = n
        return counts

    return [
        (
            "each word counts as often as it occurs: add the word's count n for every pair in "
            "it, not 1 (the words come with their frequency)",
            unweighted,
        ),
        (
            "overlapping pairs all count: a word 'aaa' holds the pair (a, a) twice, at every "
            "position i of (word[i], word[i+1]); do not skip ahead after a pair",
            non_overlapping,
        ),
        (
            "a pair that occurs twice in one word counts twice: count each occurrence (every "
            "position i), not the distinct pairs of the word (no set())",
            once_per_word,
        ),
        (
            "the last pair of each word is missing: the pairs are (word[i], word[i+1]) for every "
            "i up to len(word) - 2, e.g. zip(word, word[1:])",
            last_pair_missing,
        ),
        (
            "you count pairs across word boundaries (the last token of one word with the first "
            "of the next): count inside each word only",
            across_words,
        ),
        (
            "you count pairs across word boundaries (the last token of one word with the first "
            "of the next): count inside each word only",
            across_words_distinct,
        ),
        (
            "a pair seen for the first time starts at count 1 (counts.get(pair, 1)): start "
            "it at 0, then add n, counts.get(pair, 0) + n",
            started_at_one,
        ),
        (
            "a pair of two equal tokens, such as (a, a) in 'aaa', is a pair too: count it like "
            "any other",
            equal_tokens_skipped,
        ),
        (
            "your keys are (right, left): a key is the pair in reading order, (word[i], word[i+1])",
            reversed_pairs,
        ),
        (
            "you overwrite counts[pair] = n instead of adding to it: a pair seen in several "
            "words, or twice in one, must add up (counts.get(pair, 0) + n)",
            overwritten,
        ),
    ]


def _count_cases(hidden: bool) -> list[Case]:
    g = generator(7300 if hidden else 300)
    specs: list[tuple[str, dict]] = [
        ("one word", {(104, 105): 1}),
        ("a word of one token", {(97,): 4, (98, 99): 1}),
        ("no words", {}),
        ("overlapping pairs", {tuple(b"aaa"): 1, tuple(b"aaaa"): 1}),
        ("word counts", {tuple(b"low"): 5, tuple(b"lower"): 2, tuple(b"newest"): 6}),
        ("merged ids", {(256, 101, 256, 101): 3, (256, 101, 114): 1, (101, 256): 2}),
        # the graded cell's examples
        ("three tokens", {(1, 2, 3): 1}),
        ("'aaa' twice", {(97, 97, 97): 2}),
        ("a pair in two words", {(1, 2): 2, (2, 1, 2): 1}),
    ]
    text = " ".join(random_words(g, 40))
    specs.append(("words of a random text", _ref.word_counts(text)))
    if hidden:
        specs.append(("words of another text", _ref.word_counts(" ".join(random_words(g, 60)))))
    return [Case(name, (dict(words),), {}, f"words={_short(words)}") for name, words in specs]


def _short(value: Any, limit: int = 150) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + " ...}"


def _count_error_hint(exc: BaseException, case: Case) -> str:
    text = str(exc)
    if isinstance(exc, KeyError):
        return (
            "a pair seen for the first time has no count yet: start it at 0, "
            "counts[pair] = counts.get(pair, 0) + n"
        )
    if isinstance(exc, (TypeError, ValueError)) and any(
        w in text for w in ("unpack", "iterable", "subscriptable")
    ):
        return (
            "words is a dict {word: count}: loop over words.items() to get each word (a tuple "
            "of ids) with its count"
        )
    return _signature_hint(exc, "count_pairs(words)")


def check_count_pairs(count_pairs, hidden: bool = False) -> None:
    """Check ``count_pairs(words) -> {(left, right): count}`` against the reference."""
    __tracebackhide__ = True
    run = WatchedRunner(
        "check_count_pairs",
        count_pairs,
        [Forbidden("transformer_lab.bpe.count_pairs", function=_COUNT_PAIRS)],
        hidden,
        _count_error_hint,
        function="count_pairs",
    )
    probe_errors(run, lambda: COUNT_FAMILIES, _count_error_hint)
    cases = _count_cases(hidden)
    for case in cases:
        words = case.args[0]
        want = _COUNT_PAIRS(words)
        got = run.call(case)
        if got is None:
            run.fail("your function returned None: return the dict {(left, right): count}.", case)
        if not isinstance(got, dict):
            run.fail(f"return a dict {{(left, right): count}}, but yours is {kind_of(got)}.", case)
        bad_key = next((k for k in got if type(k) is not tuple), None)
        if bad_key is not None:
            run.fail(
                f"each key is a tuple (left id, right id), but one of yours is {bad_key!r} "
                f"({type(bad_key).__name__}).",
                case,
            )
        bad_value = next((v for v in got.values() if type(v) is not int), None)
        if bad_value is not None:
            run.fail(f"each count is a Python int, but one of yours is {kind_of(bad_value)}.", case)
        zero = [k for k, v in got.items() if v == 0 and k not in want]
        if zero and {k: v for k, v in got.items() if v != 0} == want:
            run.fail(f"list only the pairs that occur: {zero[0]} has count 0.", case)
        if got == want:
            continue
        message = confirmed_variant(run, case, cases, _count_variants, got)
        message = message or family_of(run, COUNT_FAMILIES)
        message = message or next((m for m, v in _count_variants(words) if v() == got), None)
        if message is not None:
            run.fail(message + ".", case)
        missing = [p for p in want if p not in got]
        extra = [p for p in got if p not in want]
        if missing:
            detail = f"the pair {missing[0]} (count {want[missing[0]]}) is missing"
        elif extra:
            detail = f"the pair {extra[0]} does not occur inside any word"
        else:
            pair = next(p for p in want if got[p] != want[p])
            detail = f"the pair {pair} should count {want[pair]}, but yours says {got[pair]}"
        run.fail(f"{detail}.", case, named=False)
    run.passed()


register(
    Exercise(
        "count_pairs",
        "00_tokens_and_embeddings",
        "count_pairs(words) -> {(left, right): count}",
        cells=(Cell("count_pairs_tests", "count_pairs", 1),),
        check=check_count_pairs,
        reference=_bpe.count_pairs,
    )
)
