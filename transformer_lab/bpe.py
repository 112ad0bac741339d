"""Byte-level byte-pair encoding (BPE): notebook 0's reference tokenizer.

BPE (Sennrich, Haddow and Birch, 2016, "Neural Machine Translation of Rare Words with Subword
Units"; byte-level as in GPT-2, Radford et al., 2019) starts from the smallest units and
repeatedly glues the most frequent adjacent pair into a new token. The rules here, which the
notebook states and the tests check against Hugging Face ``tokenizers``' ``BpeTrainer``:

- **Words.** :func:`split_words` cuts text with :data:`WORD_PATTERN`: a run of non-space
  characters with at most one space in front (``" be"``), or else one whitespace character
  (``"\\n"``). Pairs are counted and merged inside words only, never across a boundary.
- **Bytes.** A word is the sequence of its UTF-8 bytes, and byte ``b`` is token ``b``
  (0..255). Every text is a byte sequence, so any text can be encoded, including characters
  never seen in training: there is no unknown token.
- **One merge.** Count every adjacent pair in every word, weighted by how often the word occurs
  (overlapping pairs all count: ``aaa`` holds the pair ``(a, a)`` twice). Take the pair with the
  highest count; **ties go to the smallest pair** ``(left id, right id)``. The new token gets the
  next id (256, 257, ...), and every word replaces that pair from left to right without overlap
  (``a a a`` becomes ``aa a``).
- **Training** stops after ``n_merges`` merges, or earlier when no word has two tokens left.
- **Encoding** splits into words and applies the merges in the order they were learned;
  **decoding** joins the tokens' bytes and decodes UTF-8 (a sequence cut inside a character
  decodes to U+FFFD).
"""

from __future__ import annotations

import heapq
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "WORD_PATTERN",
    "N_BYTES",
    "split_words",
    "word_counts",
    "count_pairs",
    "best_pair",
    "merge_pair",
    "train_merges",
    "token_bytes",
    "encode",
    "decode",
    "token_strings",
    "huggingface_merges",
]

WORD_PATTERN = r" ?\S+|\s"
"""A word: non-space characters with at most one leading space, or a single whitespace char."""
N_BYTES = 256
"""The first merge gets this id: ids 0..255 are the bytes themselves."""

_WORD = re.compile(WORD_PATTERN)

Pair = tuple[int, int]


def _require_text(text: object, name: str = "text") -> str:
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, but received {type(text).__name__}.")
    return text


def split_words(text: str) -> list[str]:
    """Cut ``text`` into words: ``"To be,\\nor"`` -> ``["To", " be,", "\\n", "or"]``.

    The words concatenate back to ``text`` exactly.
    """
    return _WORD.findall(_require_text(text))


def word_counts(text: str) -> dict[tuple[int, ...], int]:
    """Every distinct word of ``text`` as a tuple of byte ids, with how often it occurs."""
    return dict(Counter(tuple(word.encode("utf-8")) for word in split_words(text)))


def count_pairs(words: Mapping[Sequence[int], int]) -> dict[Pair, int]:
    """How often each adjacent pair occurs, inside words only, weighted by the words' counts.

    Args:
        words: {word as a tuple of token ids: how often it occurs}.
    Returns:
        {(left id, right id): count}, overlapping occurrences included.
    """
    counts: dict[Pair, int] = {}
    for word, n in words.items():
        for pair in zip(word, word[1:]):
            counts[pair] = counts.get(pair, 0) + n
    return counts


def best_pair(counts: Mapping[Pair, int]) -> Pair:
    """The pair to merge next: the highest count, ties to the smallest (left id, right id)."""
    if not counts:
        raise ValueError("expected at least one pair to choose from, but received no pairs.")
    return min(counts, key=lambda pair: (-counts[pair], pair))


def merge_pair(ids: Sequence[int], pair: Pair, new_id: int) -> list[int]:
    """Replace every occurrence of ``pair`` in ``ids`` by ``new_id``, left to right, no overlap."""
    out: list[int] = []
    i, n = 0, len(ids)
    while i < n:
        if i + 1 < n and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def train_merges(text: str, n_merges: int) -> list[Pair]:
    """Learn up to ``n_merges`` merges from ``text``; merge ``i`` creates token ``256 + i``.

    Same result as recounting every pair before each merge (see the module's rules), but only
    the words that contain the chosen pair are recounted, so a megabyte trains in seconds.
    """
    if isinstance(n_merges, bool) or not isinstance(n_merges, int) or n_merges < 0:
        raise ValueError(f"n_merges must be an int >= 0, but received {n_merges!r}.")
    counted = word_counts(text)
    words = [list(w) for w in counted]
    freq = list(counted.values())
    pairs: dict[Pair, int] = {}
    where: dict[Pair, set[int]] = {}  # pair -> indices of the words that contain it
    for index, word in enumerate(words):
        for pair in zip(word, word[1:]):
            pairs[pair] = pairs.get(pair, 0) + freq[index]
            where.setdefault(pair, set()).add(index)
    # a heap of (-count, pair): its top is best_pair's choice; stale entries are skipped
    heap = [(-n, pair) for pair, n in pairs.items()]
    heapq.heapify(heap)
    merges: list[Pair] = []
    while len(merges) < n_merges and heap:
        negative, pair = heapq.heappop(heap)
        if pairs.get(pair, 0) != -negative:
            continue  # this count changed after the entry was pushed
        new_id = N_BYTES + len(merges)
        merges.append(pair)
        touched: set[Pair] = set()
        for index in where.pop(pair):
            old = words[index]
            for p in zip(old, old[1:]):
                pairs[p] -= freq[index]
                touched.add(p)
            new = merge_pair(old, pair, new_id)
            words[index] = new
            for p in zip(new, new[1:]):
                pairs[p] = pairs.get(p, 0) + freq[index]
                where.setdefault(p, set()).add(index)
                touched.add(p)
        for p in touched:
            if pairs[p] > 0:
                heapq.heappush(heap, (-pairs[p], p))
            else:
                del pairs[p]
                where.pop(p, None)
    return merges


def token_bytes(merges: Iterable[Pair]) -> list[bytes]:
    """The bytes of every token: ids 0..255 are single bytes, id 256 + i joins merge i's pair."""
    vocab = [bytes([b]) for b in range(N_BYTES)]
    for left, right in merges:
        vocab.append(vocab[left] + vocab[right])
    return vocab


def encode(text: str, merges: Sequence[Pair]) -> list[int]:
    """Token ids of ``text``: each word's bytes with the merges applied in the order learned."""
    rank = {tuple(pair): N_BYTES + i for i, pair in enumerate(merges)}
    cache: dict[str, list[int]] = {}
    out: list[int] = []
    for word in split_words(text):
        if word not in cache:
            ids = list(word.encode("utf-8"))
            while len(ids) > 1:
                # the earliest-learned merge among this word's pairs is the next one to apply
                found = [rank[p] for p in zip(ids, ids[1:]) if p in rank]
                if not found:
                    break
                new_id = min(found)
                ids = merge_pair(ids, merges[new_id - N_BYTES], new_id)
            cache[word] = ids
        out.extend(cache[word])
    return out


def decode(ids: Iterable[int], merges: Sequence[Pair]) -> str:
    """The text of token ids: their bytes joined and decoded as UTF-8 (U+FFFD where invalid)."""
    vocab = token_bytes(merges)
    ids = list(ids)
    bad = [
        i for i in ids if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(vocab)
    ]
    if bad:
        raise ValueError(
            f"expected token ids between 0 and {len(vocab) - 1}, but received {bad[0]!r}."
        )
    return b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace")


def token_strings(ids: Iterable[int], merges: Sequence[Pair]) -> list[str]:
    """Each token as readable text (for plots): its bytes decoded, U+FFFD for partial ones."""
    vocab = token_bytes(merges)
    return [vocab[i].decode("utf-8", errors="replace") for i in ids]


def huggingface_merges(text: str, n_merges: int) -> list[Pair]:
    """The same training done by Hugging Face ``tokenizers``' ``BpeTrainer`` (an implementation
    nobody here wrote), configured to this module's rules; needs ``pip install tokenizers``.

    Each word's UTF-8 bytes are shown to it as Latin-1 characters (byte b is character b, so
    its alphabet of 256 characters, sorted by code point, gives byte b the id b); the words
    are passed already split, with no normaliser; ``min_frequency=0`` keeps pairs seen once.
    Its ties go to the smallest (left id, right id), as here.
    """
    import json

    from tokenizers import Tokenizer, models, trainers

    words = [w.encode("utf-8").decode("latin-1") for w in split_words(text)]
    tokenizer = Tokenizer(models.BPE())
    trainer = trainers.BpeTrainer(
        vocab_size=N_BYTES + n_merges,
        initial_alphabet=[chr(b) for b in range(N_BYTES)],
        min_frequency=0,
        show_progress=False,
    )
    tokenizer.train_from_iterator(words, trainer)
    vocab = tokenizer.get_vocab()
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    if merges and isinstance(merges[0], str):
        raise RuntimeError(
            "expected tokenizers >= 0.20 (merges saved as pairs), but this version saves them "
            "as strings; upgrade with pip install -U tokenizers."
        )
    return [(vocab[left], vocab[right]) for left, right in merges]
