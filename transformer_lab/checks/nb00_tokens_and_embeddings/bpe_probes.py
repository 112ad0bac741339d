"""Designed probes for notebook 00's BPE checks: when a case fails and no replayed mistake matches
it, the student's function is called on tiny inputs built so that each family of mistakes gives
a recognisable output (runs of 3-5 equal tokens, a merge of merges three levels deep, ids offset
by one, a word of one token, a pair in descending order, two words side by side, a pair shared by
two words). A family is named only when the
student's outputs match it on every one of its probes.

    family_of(run, families) -> message or None
    families: [(message, [(args, want), ...]), ...]   want: the output, or a test(out, error)
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from transformer_lab import bpe as _ref
from transformer_lab.checks.nb00_tokens_and_embeddings.merge_mistakes import INNER

__all__ = [
    "CHAINED",
    "family_of",
    "probe_errors",
    "COUNT_FAMILIES",
    "train_families",
    "encode_families",
    "DECODE_FAMILIES",
]

Family = tuple[str, list[tuple[tuple, Any]]]


def family_of(run, families: list[Family]) -> str | None:
    """The message of the first family whose every probe the student's function shows."""
    __tracebackhide__ = True
    seen: dict[str, tuple[Any, BaseException | None, list]] = {}

    def shows(args: tuple, want: Any) -> bool:
        key = repr(args)
        if key not in seen:
            seen[key] = run.attempt(copy.deepcopy(args), {})
        out, error, calls = seen[key]
        if calls:
            return False
        try:
            return bool(want(out, error)) if callable(want) else error is None and out == want
        except Exception:  # a test that cannot read this output: not this family
            return False

    for message, probes in families:
        if all(shows(args, want) for args, want in probes):
            return message
    return None


def probe_errors(run, families: Callable[[], list[Family]], hint: Callable) -> None:
    """An error of the student's function is first explained by the probes, then by ``hint``."""
    run.error_hint = lambda exc, case: family_of(run, families()) or hint(exc, case)


# ---------------------------------------------------------------------------------------------
# count_pairs
def _past_end(out: Any, error: BaseException | None) -> bool:
    keys = set(out) - {(1, 2), (2, 3)}
    return error is None and len(keys) == 1 and next(iter(keys)) in ((3,), (3, None))


class _CrossesWords:
    """The right pairs inside the words, plus only pairs (last token of a word, first of
    another): the words were glued together before counting. (A class, not a function that
    makes one: the probe tables below are built at import, and the graded build keeps classes
    but stubs this folder's functions.)"""

    def __init__(self, inside: dict, firsts: set, lasts: set):
        self.inside, self.boundary = inside, {(a, b) for a in lasts for b in firsts}

    def __call__(self, out: Any, error: BaseException | None) -> bool:
        extra = set(out) - set(self.inside)
        return (
            error is None
            and bool(extra)
            and extra <= self.boundary
            and all(out.get(p, 0) > 0 for p in self.inside)
        )


def _keeps_one_word(out: Any, error: BaseException | None) -> bool:
    """(1, 2) occurs in a word of count 2 and in one of count 3: one of them is kept, not 5."""
    return error is None and out.get((1, 2)) in (2, 3) and out.get((5, 1)) == 3 and len(out) == 2


COUNT_FAMILIES: list[Family] = [
    (
        "each pair adds the word's count n, how often the word occurs in the text (words is "
        "{word: count}), not the word's length",
        [
            (({(1, 2): 1},), {(1, 2): 2}),
            (({(1, 2, 3): 1},), {(1, 2): 3, (2, 3): 3}),
            (({(4, 5): 3},), lambda out, error: out in ({(4, 5): 2}, {(4, 5): 6})),
        ],
    ),
    (
        "a pair is ordered: (2, 1) is the left id 2 followed by the right id 1, a different pair "
        "from (1, 2); yours sorts each pair (or treats it as a set): keep (word[i], word[i+1]) "
        "in reading order",
        [(({(2, 1): 1},), {(1, 2): 1}), (({(3, 1, 2): 2},), {(1, 3): 2, (1, 2): 2})],
    ),
    (
        "pairs do not wrap around: (last, first) of a word is not a pair (no "
        "word[(i + 1) % len(word)], no word[1:] + word[:1]); the pairs are (word[i], word[i+1]) "
        "for i up to len(word) - 2",
        [
            (({(1, 2, 3): 1},), {(1, 2): 1, (2, 3): 1, (3, 1): 1}),
            (({(4, 5): 2},), {(4, 5): 2, (5, 4): 2}),
        ],
    ),
    (
        "your loop runs one step past the end of the word: the last token has no right "
        "neighbour, so stop at i = len(word) - 2 (range(len(word) - 1), or zip(word, word[1:]))",
        [(({(1, 2, 3): 1},), _past_end)],
    ),
    (
        "a word of one token has no pair and adds nothing to the counts, but yours counts a "
        "pair for the word (5,): the pairs are (word[i], word[i+1]), and a one-token word has "
        "none",
        [
            (({(5,): 3},), lambda out, error: error is None and out != {}),
            (({(5,): 1, (6,): 1},), lambda out, error: not {(5, 6), (6, 5)} & set(out)),
            (({(1, 2): 1},), {(1, 2): 1}),
            (({(1, 2, 3): 1},), {(1, 2): 1, (2, 3): 1}),
        ],
    ),
    (
        "you count pairs across word boundaries (the last token of one word with the first of "
        "the next, as if the words were one sequence): count the pairs inside each word only",
        [
            (({(1, 2, 3): 2},), {(1, 2): 2, (2, 3): 2}),
            (({(1, 2): 1, (3, 4): 1},), _CrossesWords({(1, 2): 1, (3, 4): 1}, {1, 3}, {2, 4})),
            (({(5,): 3, (6, 7): 1},), _CrossesWords({(6, 7): 1}, {5, 6}, {5, 7})),
        ],
    ),
    (
        "a pair shared by several words must add up the counts of all of them "
        "(counts[pair] = counts.get(pair, 0) + n); yours keeps only one word's count (it "
        "overwrites the total, e.g. with dict.update or counts[pair] = ...)",
        [
            (({(1, 2, 3): 2},), {(1, 2): 2, (2, 3): 2}),
            (({(1, 2): 2, (5, 1, 2): 3},), _keeps_one_word),
            (({(5, 1, 2): 3, (1, 2): 2},), _keeps_one_word),
        ],
    ),
]


# ---------------------------------------------------------------------------------------------
# train_merges and encode: the merge each inherits, and the ids of the new tokens
_RUNS = ["aaa", "aaaaa bbb", "abab ab", "ba ab ab"]  # runs of 3-5 equal tokens, repeats, order


def _train(text: str, n: int, merge=_ref.merge_pair, first_id: int = 256) -> list:
    words = _ref.word_counts(text)
    merges: list = []
    for i in range(n):
        counts = _ref.count_pairs(words)
        if not counts:
            break
        pair = min(counts, key=lambda p: (-counts[p], p))
        merges.append(pair)
        words = {tuple(merge(list(w), pair, first_id + i)): c for w, c in words.items()}
    return merges


def _offsets(start: str) -> list[tuple[str, int]]:
    return [
        (f"{start} must create token 256 + i (ids 0..255 are the bytes); yours starts at 255", 255),
        (f"{start} must create token 256 + i (ids 0..255 are the bytes); yours starts at 257", 257),
    ]


def _telling(families: list[Family], reference: Callable) -> list[Family]:
    """The families whose outputs differ from the reference's on at least one probe."""
    return [f for f in families if any(want != reference(*args) for args, want in f[1])]


def train_families() -> list[Family]:
    families: list[Family] = []
    for message, merge in INNER:
        families.append((message, [((t, 3), _train(t, 3, merge)) for t in _RUNS]))
    for message, first in _offsets("merge i"):
        families.append((message, [((t, 3), _train(t, 3, first_id=first)) for t in _RUNS]))
    return _telling(families, _ref.train_merges)


CHAINED = (
    "a merge may use a token created by an earlier merge (a merge of merges, such as "
    "(256, 99)): apply each merge to the ids as they are after the earlier merges, not only "
    "to pairs of the word's original bytes"
)

_ENCODE_PROBES = [
    ("aaa", [(97, 97)]),
    ("aaaaa", [(97, 97)]),
    ("abab ab", [(97, 98)]),
    ("ba", [(97, 98)]),
    ("abc", [(97, 98), (256, 99)]),
    ("aaaa", [(97, 97), (256, 256)]),
]


def _encode(text: str, merges: list, merge=_ref.merge_pair, first_id: int = 256) -> list:
    out = []
    for word in _ref.split_words(text):
        ids = list(word.encode("utf-8"))
        for i, pair in enumerate(merges):
            ids = merge(ids, pair, first_id + i)
        out += ids
    return out


def encode_families() -> list[Family]:
    families: list[Family] = []
    for message, merge in INNER:
        families.append((message, [((t, m), _encode(t, m, merge)) for t, m in _ENCODE_PROBES]))
    for message, first in _offsets("merge i of the list"):
        families.append(
            (message, [((t, m), _encode(t, m, first_id=first)) for t, m in _ENCODE_PROBES])
        )
    unchained = [
        (("ab ba", [(97, 98)]), [256, 32, 98, 97]),
        (("abc", [(98, 99), (97, 98)]), [97, 256]),
        (("abc", [(97, 98), (256, 99)]), [256, 99]),
        (("aaaa", [(97, 97), (256, 256)]), [256, 256]),
    ]
    families.append((CHAINED, unchained))
    return _telling(families, _ref.encode)


# ---------------------------------------------------------------------------------------------
# decode: ids from 256 are merges, expanded all the way down to bytes
_TWO = [(104, 105), (105, 104)]  # 256 = 'hi', 257 = 'ih'
_DEEP = [(97, 97), (256, 256), (257, 257)]  # 258 = 'aaaaaaaa', three levels
_NESTED = [(104, 105), (256, 33)]  # 257 = 'hi!'

DECODE_FAMILIES: list[Family] = [
    (
        "merge i is token 256 + i: yours reads token 256 as merge 1 (numbered from 255), so "
        "256 decodes to the second merge's bytes",
        [(([256], _TWO), "ih"), (([256], [(104, 105), (33, 33)]), "!!")],
    ),
    (
        "merge i is token 256 + i: yours numbers the merges from 257, so 257 decodes to the "
        "first merge's bytes",
        [(([257], _TWO), "hi"), (([257], [(104, 105), (33, 33)]), "hi")],
    ),
    (
        "a merge of merges must be expanded all the way down to bytes (recursively): with "
        "256 = (h, i) and 257 = (256, !), token 257 is b'hi!'; build the bytes in order, "
        "vocab[256 + i] = vocab[left] + vocab[right], so each merge reuses its parts' bytes",
        [
            (([256], _NESTED), "hi"),
            (([256, 33], _NESTED), "hi!"),
            (([257], _NESTED), lambda out, error: error is not None or out != "hi!"),
        ],
    ),
    (
        "a merge of merges must be expanded all the way down to bytes (recursively): token "
        "258 = (257, 257), 257 = (256, 256), 256 = (a, a) is eight a's; yours stops after "
        "one or two levels",
        [
            (([256], _DEEP), "aa"),
            (([257], _DEEP), "aaaa"),
            (([258], _DEEP), lambda out, error: error is not None or out != "a" * 8),
        ],
    ),
]
