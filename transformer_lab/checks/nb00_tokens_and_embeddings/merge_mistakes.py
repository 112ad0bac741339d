"""Wrong ways of merging one pair, as functions ``(ids, pair, new_id) -> list``, shared by the
checks of merge_pair, train_merges and encode: a student's train_merges or encode inherits the
merge they wrote, so each mistake is replayed inside those loops too (:data:`INNER`).

Each one differs from the right merge on a recognisable input: runs of three or more equal
tokens (overlap, right to left), a pair that occurs twice (first occurrence only), the pair in
the other order, digits that overlap as text ('1 2' inside '11 2').
"""

from __future__ import annotations

from collections.abc import Callable

from transformer_lab import bpe as _ref

__all__ = [
    "INNER",
    "STRING_MERGE",
    "first_only_merge",
    "string_merge",
    "no_skip_merge",
    "step_one_merge",
    "overlap_both_merge",
    "right_to_left_merge",
    "kept_both_merge",
    "either_order_merge",
]

_MERGE = _ref.merge_pair


def first_only_merge(ids: list, pair: tuple, new_id: int) -> list:
    """Replaces the first occurrence only."""
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == tuple(pair):
            return list(ids[:i]) + [new_id] + list(ids[i + 2 :])
    return list(ids)


def string_merge(ids: list, pair: tuple, new_id: int, padded: bool = False) -> list | None:
    """Replaces text in the ids joined with spaces: '1 2' also matches inside '11 2' (padded:
    ' 1 2 ' misses a second occurrence right after the first)."""
    a, b = pair
    text = " ".join(map(str, ids))
    if padded:
        text = f" {text} ".replace(f" {a} {b} ", f" {new_id} ")
    else:
        text = text.replace(f"{a} {b}", str(new_id))
    try:
        return [int(t) for t in text.split()]
    except ValueError:
        return None


def no_skip_merge(ids: list, pair: tuple, new_id: int) -> list:
    """Steps one token after a match when the next pair matches too: 'a a a' -> [aa, aa]."""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
            i += 1 if i + 2 < len(ids) and ids[i + 2] == pair[1] else 2
        else:
            out.append(ids[i])
            i += 1
    return out


def step_one_merge(ids: list, pair: tuple, new_id: int) -> list:
    """Always steps one token after a match: 'a a a' -> [aa, aa, a], 'a b' -> [ab, b]."""
    out = []
    for i in range(len(ids)):
        match = i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair)
        out.append(new_id if match else ids[i])
    return out


def overlap_both_merge(ids: list, pair: tuple, new_id: int) -> list:
    """Every position that starts the pair becomes new_id; a token ending a pair is dropped."""
    out = []
    for i in range(len(ids)):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
        elif not (i > 0 and (ids[i - 1], ids[i]) == tuple(pair)):
            out.append(ids[i])
    return out


def right_to_left_merge(ids: list, pair: tuple, new_id: int) -> list:
    return _MERGE(list(ids)[::-1], (pair[1], pair[0]), new_id)[::-1]


def kept_both_merge(ids: list, pair: tuple, new_id: int) -> list:
    """new_id, then the pair's second token again."""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair):
            out += [new_id, ids[i + 1]]
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def either_order_merge(ids: list, pair: tuple, new_id: int) -> list:
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) in (tuple(pair), tuple(pair)[::-1]):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


STRING_MERGE = (
    "you merge by replacing text in the ids joined as a string: '1 2' also matches inside "
    "'11 2' or '1 22', and ' 1 2 ' misses a second (1, 2) right after the first; compare the "
    "ids themselves, pair by pair, in the list"
)
_OVERLAP = (
    "your merge overlaps inside runs of one token: with the pair (a, a), 'a a a' must become "
    "[aa, a] (left to right, both tokens of a merged pair are used up, i += 2), but one token "
    "of yours is used by two merged pairs"
)

# (message, wrong merge) for the merge inside train_merges and encode.
INNER: list[tuple[str, Callable[[list, tuple, int], list | None]]] = [
    (
        "your merge replaces only the first occurrence of the pair in a word: every "
        "occurrence becomes the new token (merge_pair replaces them all, left to right)",
        first_only_merge,
    ),
    (STRING_MERGE, string_merge),
    (STRING_MERGE, lambda *a: string_merge(*a, padded=True)),
    (_OVERLAP, no_skip_merge),
    (_OVERLAP, step_one_merge),
    (_OVERLAP, overlap_both_merge),
    (
        "your merge goes from right to left: with the pair (a, a), 'a a a' must become "
        "[aa, a] (the leftmost pair first), not [a, aa]",
        right_to_left_merge,
    ),
    (
        "your merge keeps the pair's second token after the new id: skip both tokens of a "
        "merged pair (i += 2)",
        kept_both_merge,
    ),
    (
        "your merge also replaces the pair in the other order (right, left): only (left, "
        "right), in this order, becomes the new token",
        either_order_merge,
    ),
]
