"""Whole-run mistakes of train_merges, replayed on the case's text: ties broken another way,
pairs counted across words or once, stale counts, ids numbered from 255 or 257 or all 256, code points
instead of bytes, one merge too many or too few, and every wrong merge of a pair the student's
loop may inherit (:data:`~.merge_mistakes.INNER`: runs of equal tokens overlapped, the first
occurrence only, ...).

    variants(text, n_merges) -> [(message, () -> merges), ...]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from transformer_lab import bpe as _ref
from transformer_lab.checks.nb00_tokens_and_embeddings.merge_mistakes import INNER

__all__ = ["variants"]

_COUNT = _ref.count_pairs
_MERGE = _ref.merge_pair


def _naive(
    words: dict,
    n_merges: int,
    pick: Callable[[dict], Any],
    first_id: int = 256,
    recount: bool = True,
    min_count: int = 1,
    merge: Callable[[list, tuple, int], list | None] = _MERGE,
) -> list:
    """The textbook loop with a chosen rule, to reproduce one mistake on the same input."""
    merges: list = []
    counts = _COUNT(words)
    for i in range(n_merges):
        if recount:
            counts = _COUNT(words)
        counts = {p: n for p, n in counts.items() if n > 0}
        if not counts:
            break
        pair = pick(counts)
        if counts[pair] < min_count:
            break
        merges.append(pair)
        merged: dict = {}
        for word, n in words.items():
            key = tuple(merge(list(word), pair, first_id + i))  # None: this mistake crashes
            merged[key] = merged.get(key, 0) + n
        words = merged
        if not recount:
            counts.pop(pair)
    return merges


def _smallest(c: dict):
    return min(c, key=lambda p: (-c[p], p))


def variants(text: str, n: int) -> list[tuple[str, Callable[[], list]]]:
    words = _ref.word_counts(text)
    points: dict = {}
    for w in _ref.split_words(text):
        key = tuple(ord(ch) for ch in w)
        points[key] = points.get(key, 0) + 1
    split_words: dict = {}
    for w in text.split():
        key = tuple(w.encode("utf-8"))
        split_words[key] = split_words.get(key, 0) + 1
    tie = (
        "ties are broken differently: among pairs with the same count take the smallest "
        "(left id, right id), e.g. min(counts, key=lambda p: (-counts[p], p))"
    )
    inner = [
        (message, lambda merge=merge: _naive(words, n, _smallest, merge=merge))
        for message, merge in INNER
    ]
    return inner + [
        (tie, lambda: _naive(words, n, lambda c: max(c, key=lambda p: (c[p], p)))),
        (tie, lambda: _naive(words, n, lambda c: max(c, key=c.get))),
        (tie, lambda: _naive(words, n, lambda c: min(c, key=lambda p: (-c[p], p[::-1])))),
        (tie, lambda: _naive(words, n, lambda c: min(c, key=lambda p: (-c[p], str(p))))),
        (
            "each word counts as often as it occurs in the text: weight its pairs by the word's "
            "count (bpe.word_counts(text) gives {word: count}), not once per distinct word",
            lambda: _naive({w: 1 for w in words}, n, _smallest),
        ),
        (
            "the words come from bpe.word_counts(text), whose words keep their leading space "
            "(' be'); text.split() drops the spaces, so the pairs (space, letter) are never "
            "counted",
            lambda: _naive(split_words, n, _smallest),
        ),
        (
            "you count pairs across word boundaries: split the text into words first "
            "(bpe.word_counts(text)) and count inside each word only",
            lambda: _naive({tuple(text.encode("utf-8")): 1}, n, _smallest),
        ),
        (
            "the pair counts are stale: recount the pairs after every merge (the merge "
            "changes which pairs exist and how often)",
            lambda: _naive(words, n, _smallest, recount=False),
        ),
        (
            "merge i must create token 256 + i (ids 0..255 are the bytes); yours starts at 255",
            lambda: _naive(words, n, _smallest, first_id=255),
        ),
        (
            "merge i must create token 256 + i (ids 0..255 are the bytes); yours starts at 257",
            lambda: _naive(words, n, _smallest, first_id=257),
        ),
        (
            "every merge creates the same token 256: merge i must create the new token "
            "256 + i, one id more per merge",
            lambda: _naive(words, n, _smallest, merge=lambda ids, pair, _: _MERGE(ids, pair, 256)),
        ),
        (
            "you stop at pairs that occur only once: keep merging while any pair occurs (count "
            ">= 1) until n_merges merges are learned",
            lambda: _naive(words, n, _smallest, min_count=2),
        ),
        (
            "the words are sequences of UTF-8 bytes (word.encode('utf-8')), not of code points "
            "(ord(ch)): use bpe.word_counts(text)",
            lambda: _naive(points, n, _smallest),
        ),
        (
            "you return one merge too many: learn exactly n_merges merges",
            lambda: _naive(words, n + 1, _smallest),
        ),
        (
            "you return one merge too few: learn exactly n_merges merges",
            lambda: _naive(words, max(n - 1, 0), _smallest),
        ),
    ]
