"""Checks for notebook 0, exercises 1-2: counting adjacent pairs and merging one pair.

    count_pairs(words) -> {(left, right): count}     words: {tuple of ids: how often it occurs}
    merge_pair(ids, pair, new_id) -> list of ids      left to right, no overlap, a new list

The rules are the reference's (:mod:`transformer_lab.bpe`). Wrong answers are compared with a
catalogue of realistic mistakes computed on the same inputs (overlapping pairs, word counts
ignored, pairs across words, a merge that does not skip, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from transformer_lab import bpe as _bpe
from transformer_lab import bpe as _ref
from transformer_lab.checks.engine.core import Case, Runner, generator, kind_of
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_count_pairs", "check_merge_pair", "random_words", "is_int_list"]

_COUNT_PAIRS = _ref.count_pairs
_MERGE_PAIR = _ref.merge_pair
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
    ]
    text = " ".join(random_words(g, 40))
    specs.append(("words of a random text", _ref.word_counts(text)))
    if hidden:
        specs.append(("words of another text", _ref.word_counts(" ".join(random_words(g, 60)))))
    return [Case(name, (dict(words),), {}, f"words={_short(words)}") for name, words in specs]


def _short(value: Any, limit: int = 150) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + " ...}"


def check_count_pairs(count_pairs, hidden: bool = False) -> None:
    """Check ``count_pairs(words) -> {(left, right): count}`` against the reference."""
    __tracebackhide__ = True
    run = Runner(
        "check_count_pairs",
        count_pairs,
        [Forbidden("transformer_lab.bpe.count_pairs", function=_COUNT_PAIRS)],
        hidden,
        lambda e, c: _signature_hint(e, "count_pairs(words)"),
    )
    for case in _count_cases(hidden):
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
        for message, variant in _count_variants(words):
            if variant() == got and variant() != want:
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


# ---------------------------------------------------------------------------------------------
# merge_pair
def _merge_variants(ids: list, pair: tuple, new_id: int) -> list[tuple[str, Callable[[], list]]]:
    a, b = pair

    def no_skip() -> list:
        out, i = [], 0
        while i < len(ids):
            if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
                out.append(new_id)
                if i + 2 < len(ids) and ids[i + 1] == ids[i + 2] == b:
                    i += 1  # the second token is used again
                else:
                    i += 2
            else:
                out.append(ids[i])
                i += 1
        return out

    def overlap_both() -> list:  # every position that matches becomes new_id, tokens doubled
        out = []
        for i in range(len(ids)):
            if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
                out.append(new_id)
            elif i > 0 and (ids[i - 1], ids[i]) == pair:
                continue
            else:
                out.append(ids[i])
        return out

    def right_to_left() -> list:
        return _MERGE_PAIR(ids[::-1], (b, a), new_id)[::-1]

    def first_only() -> list:
        for i in range(len(ids) - 1):
            if (ids[i], ids[i + 1]) == pair:
                return ids[:i] + [new_id] + ids[i + 2 :]
        return list(ids)

    def last_lost() -> list:
        out = _MERGE_PAIR(ids, pair, new_id)
        ends_in_pair = len(ids) >= 2 and (ids[-2], ids[-1]) == pair and out[-1] == new_id
        return out if ends_in_pair else out[:-1]

    def either_order() -> list:
        out, i = [], 0
        while i < len(ids):
            if i + 1 < len(ids) and (ids[i], ids[i + 1]) in (pair, (b, a)):
                out.append(new_id)
                i += 2
            else:
                out.append(ids[i])
                i += 1
        return out

    def kept_both() -> list:
        out, i = [], 0
        while i < len(ids):
            if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
                out += [new_id, ids[i + 1]]
                i += 2
            else:
                out.append(ids[i])
                i += 1
        return out

    overlap = (
        "overlapping occurrences: in 'a a a' only the first (a, a) is merged, giving "
        "[aa, a]; go left to right and skip both tokens of a merged pair (i += 2)"
    )
    return [
        (overlap, no_skip),
        (overlap, overlap_both),
        (
            "you merge from right to left: 'a a a' must become [aa, a] (the leftmost pair "
            "first), not [a, aa]",
            right_to_left,
        ),
        ("only the first occurrence is merged: replace every occurrence of the pair", first_only),
        ("the last token is lost when it is not part of a merged pair", last_lost),
        (
            "you also merge the pair in the other order (right, left): only (left, right) "
            "in this order is replaced",
            either_order,
        ),
        (
            "after a match, skip both tokens of the pair (i += 2): your output keeps the "
            "pair's second token after new_id",
            kept_both,
        ),
    ]


def _merge_cases(hidden: bool) -> list[Case]:
    g = generator(7400 if hidden else 400)
    specs = [
        ("two occurrences", [1, 2, 3, 1, 2], (1, 2), 256),
        ("overlapping 'aaa'", [97, 97, 97], (97, 97), 256),
        ("overlapping 'aaaa'", [97, 97, 97, 97, 98], (97, 97), 300),
        ("pair absent", [5, 6, 7], (6, 5), 256),
        ("pair at the end, order matters", [2, 1, 4, 1, 2], (1, 2), 257),
        ("one token", [9], (9, 9), 256),
        ("empty", [], (1, 2), 256),
        ("merged ids", [256, 101, 101, 101, 256, 101], (256, 101), 258),
    ]
    import torch

    n = 14 if hidden else 12
    ids = torch.randint(3, (n,), generator=g).add(97).tolist()
    specs.append(
        ("random ids", ids, (ids[0], ids[1]), 256 + int(torch.randint(9, (1,), generator=g)))
    )
    if hidden:
        ids = torch.randint(2, (17,), generator=g).add(100).tolist()
        specs.append(("random ids 2", ids, (ids[1], ids[2]), 270))
    return [
        Case(name, (list(ids), pair, new_id), {}, f"ids={ids}, pair={pair}, new_id={new_id}")
        for name, ids, pair, new_id in specs
    ]


def check_merge_pair(merge_pair, hidden: bool = False) -> None:
    """Check ``merge_pair(ids, pair, new_id) -> list`` against the reference."""
    __tracebackhide__ = True
    run = Runner(
        "check_merge_pair",
        merge_pair,
        [Forbidden("transformer_lab.bpe.merge_pair", function=_MERGE_PAIR)],
        hidden,
        lambda e, c: _signature_hint(e, "merge_pair(ids, pair, new_id)"),
    )
    for case in _merge_cases(hidden):
        ids, pair, new_id = case.args
        want = _MERGE_PAIR(ids, pair, new_id)
        got = run.call(case)
        if got is None:
            run.fail("your function returned None: return the new list of ids.", case)
        if not is_int_list(got):
            if isinstance(got, (tuple, list)) or hasattr(got, "tolist"):
                run.fail(f"return a list of Python ints, but yours is {kind_of(got)}.", case)
            run.fail(f"return a list of ids, but yours is {kind_of(got)}.", case)
        if got == want:
            continue
        for message, variant in _merge_variants(ids, pair, new_id):
            if variant() == got and variant() != want:
                run.fail(message + ".", case)
        run.fail(f"expected {want}, but received {got}.", case, named=False)
    # The caller's list must stay as it was (the runner passes copies, so probe it here).
    probe = [1, 2, 3, 1, 2]
    out, error, _ = run.attempt((probe, (1, 2), 256), {})
    if error is None and probe != [1, 2, 3, 1, 2]:
        run.fail(
            "your function changed its input `ids` in place; build and return a new list so "
            "the caller's ids stay intact."
        )
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
register(
    Exercise(
        "merge_pair",
        "00_tokens_and_embeddings",
        "merge_pair(ids, pair, new_id) -> list of ids",
        cells=(Cell("merge_pair_tests", "merge_pair", 2),),
        check=check_merge_pair,
        reference=_bpe.merge_pair,
    )
)
