"""Honest alternatives for notebook 00 (tokens and embeddings: byte-pair encoding, one-hot)."""

from __future__ import annotations

from . import Alternative as A

ALTERNATIVES = {
    "count_pairs_impl": [
        A(
            "collections.Counter indexed by position, returned as the Counter itself",
            """\
from collections import Counter


def count_pairs(words):
    counts = Counter()
    for word, n in words.items():
        for i in range(len(word) - 1):
            counts[(word[i], word[i + 1])] += n
    return counts
""",
        ),
        A(
            "pairs counted inside each word first (Counter of zip), then weighted by the word's count",
            """\
from collections import Counter


def count_pairs(words):
    total = {}
    for word, n in words.items():
        inside = Counter(zip(word[:-1], word[1:]))
        for pair, k in inside.items():
            total[pair] = total.get(pair, 0) + k * n
    return total
""",
        ),
        A(
            "defaultdict(int), one flat generator of (pair, weight), converted to a plain dict",
            """\
from collections import defaultdict


def count_pairs(words):
    counts = defaultdict(int)
    weighted = ((pair, n) for word, n in words.items() for pair in zip(word, word[1:]))
    for pair, n in weighted:
        counts[pair] += n
    return dict(counts)
""",
        ),
        A(
            "sorted list of every occurrence, summed per pair with itertools.groupby",
            """\
from itertools import groupby


def count_pairs(words):
    occurrences = sorted(
        ((word[i], word[i + 1]), n) for word, n in words.items() for i in range(len(word) - 1)
    )
    return {pair: sum(n for _, n in group) for pair, group in groupby(occurrences, key=lambda o: o[0])}
""",
        ),
    ],
    "merge_pair_impl": [
        A(
            "for loop over enumerate with a skip flag for the pair's second token",
            """\
def merge_pair(ids, pair, new_id):
    left, right = pair
    out = []
    skip = False
    for i, token in enumerate(ids):
        if skip:
            skip = False
            continue
        if token == left and i + 1 < len(ids) and ids[i + 1] == right:
            out.append(new_id)
            skip = True
        else:
            out.append(token)
    return out
""",
        ),
        A(
            "recursion on the head of the list",
            """\
def merge_pair(ids, pair, new_id):
    if len(ids) < 2:
        return list(ids)
    if ids[0] == pair[0] and ids[1] == pair[1]:
        return [new_id] + merge_pair(ids[2:], pair, new_id)
    return [ids[0]] + merge_pair(ids[1:], pair, new_id)
""",
        ),
        A(
            "a stack: each token may fold into the previous output token if that one is still unmerged",
            """\
def merge_pair(ids, pair, new_id):
    out = []
    open_left = False  # is out[-1] an input token that may still start the pair?
    for token in ids:
        if open_left and out[-1] == pair[0] and token == pair[1]:
            out[-1] = new_id
            open_left = False
        else:
            out.append(token)
            open_left = True
    return out
""",
        ),
        A(
            "ids as characters, str.replace (left to right, non-overlapping), back to ints",
            """\
def merge_pair(ids, pair, new_id):
    text = "".join(map(chr, ids))
    merged = text.replace(chr(pair[0]) + chr(pair[1]), chr(new_id))
    return [ord(ch) for ch in merged]
""",
        ),
    ],
    "train_merges_impl": [
        A(
            "while loop; the tie rule as max over (count, -left, -right); words re-added in a Counter",
            """\
from collections import Counter


def train_merges(text, n_merges):
    words = Counter(bpe.word_counts(text))
    merges = []
    while len(merges) < n_merges:
        counts = count_pairs(words)
        if len(counts) == 0:
            break
        best = max(counts, key=lambda p: (counts[p], -p[0], -p[1]))
        new_id = 256 + len(merges)
        merges.append(best)
        merged = Counter()
        for word, n in words.items():
            merged[tuple(merge_pair(list(word), best, new_id))] += n
        words = merged
    return merges
""",
        ),
        A(
            "highest count first, then the smallest pair among those with it; words as lists "
            "merged in place, equal words added up when counting",
            """\
def train_merges(text, n_merges):
    entries = [[list(word), n] for word, n in bpe.word_counts(text).items()]
    merges = []
    for step in range(n_merges):
        words = {}
        for tokens, n in entries:
            key = tuple(tokens)
            words[key] = words.get(key, 0) + n
        counts = count_pairs(words)
        if not counts:
            break
        top = max(counts.values())
        pair = min(p for p, c in counts.items() if c == top)
        merges.append(pair)
        for entry in entries:
            if len(entry[0]) > 1:
                entry[0] = merge_pair(entry[0], pair, 256 + step)
    return merges
""",
        ),
        A(
            "recursive helper: one merge per call, the pair chosen by sorting (count desc, pair asc)",
            """\
def train_merges(text, n_merges):
    def learn(words, done):
        if len(done) == n_merges:
            return done
        counts = count_pairs(words)
        if not counts:
            return done
        pair = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[0][0]
        new_id = 256 + len(done)
        merged = {}
        for word, n in words.items():
            key = tuple(merge_pair(list(word), pair, new_id))
            merged[key] = merged.get(key, 0) + n
        return learn(merged, done + [pair])

    return learn(bpe.word_counts(text), [])
""",
        ),
        A(
            "words that cannot hold a pair dropped early; explicit scan for the best pair",
            """\
def train_merges(text, n_merges):
    words = {w: n for w, n in bpe.word_counts(text).items() if len(w) > 1}
    merges = []
    for i in range(n_merges):
        counts = count_pairs(words)
        best, best_count = None, 0
        for pair, c in counts.items():
            if c > best_count or (c == best_count and pair < best):
                best, best_count = pair, c
        if best is None:
            break
        merges.append(best)
        new_words = {}
        for word, n in words.items():
            merged = tuple(merge_pair(list(word), best, 256 + i))
            if len(merged) > 1:
                new_words[merged] = new_words.get(merged, 0) + n
        words = new_words
    return merges
""",
        ),
    ],
    "bpe_encode_impl": [
        A(
            "merges in the outer loop over all the words at once, flattened at the end",
            """\
def encode(text, merges):
    words = [list(word.encode("utf-8")) for word in bpe.split_words(text)]
    for i, pair in enumerate(merges):
        new_id = 256 + i
        words = [merge_pair(w, pair, new_id) for w in words]
    return [token for w in words for token in w]
""",
        ),
        A(
            "one cache per distinct word; merges whose pair is absent from the word are skipped",
            """\
def encode(text, merges):
    cache = {}
    ids = []
    for word in bpe.split_words(text):
        if word not in cache:
            tokens = list(word.encode("utf-8"))
            for i, (a, b) in enumerate(merges):
                if len(tokens) < 2:
                    break
                if (a, b) in set(zip(tokens, tokens[1:])):
                    tokens = merge_pair(tokens, (a, b), 256 + i)
            cache[word] = tokens
        ids += cache[word]
    return ids
""",
        ),
        A(
            "bytes of each word read with bytearray, merges numbered with zip(range(256, ...)), "
            "itertools.chain for the result",
            """\
from itertools import chain


def encode(text, merges):
    def encode_word(word):
        tokens = list(bytearray(word, "utf-8"))
        for new_id, pair in zip(range(256, 256 + len(merges)), merges):
            tokens = merge_pair(tokens, pair, new_id)
        return tokens

    return list(chain.from_iterable(encode_word(w) for w in bpe.split_words(text)))
""",
        ),
    ],
    "bpe_decode_impl": [
        A(
            "each token expanded recursively into its bytes (memoised), bytes joined, then decoded",
            """\
from functools import lru_cache


def decode(ids, merges):
    @lru_cache(maxsize=None)
    def expand(token):
        if token < 256:
            return bytes([token])
        left, right = merges[token - 256]
        return expand(left) + expand(right)

    data = b"".join(expand(t) for t in ids)
    return data.decode("utf-8", errors="replace")
""",
        ),
        A(
            "an explicit stack unfolds every token into a bytearray, no vocabulary table",
            """\
def decode(ids, merges):
    out = bytearray()
    for token in ids:
        stack = [token]
        while stack:
            t = stack.pop()
            if t < 256:
                out.append(t)
            else:
                left, right = merges[t - 256]
                stack.append(right)
                stack.append(left)
    return out.decode("utf-8", errors="replace")
""",
        ),
        A(
            "undoes the merges from the last learned to the first on the whole id list, then bytes()",
            """\
def decode(ids, merges):
    ids = list(ids)
    for i in range(len(merges) - 1, -1, -1):
        token = 256 + i
        expanded = []
        for t in ids:
            expanded.extend(merges[i] if t == token else (t,))
        ids = expanded
    return bytes(ids).decode("utf-8", errors="replace")
""",
        ),
        A(
            "vocabulary as a dict {id: bytes} built with enumerate, decoded with str(data, ...)",
            """\
def decode(ids, merges):
    table = {b: bytes([b]) for b in range(256)}
    for i, (left, right) in enumerate(merges):
        table[256 + i] = table[left] + table[right]
    data = bytes().join(map(table.__getitem__, ids))
    return str(data, encoding="utf-8", errors="replace")
""",
        ),
    ],
    "one_hot_embed_impl": [
        A(
            "einsum over the vocabulary axis",
            """\
import torch
import torch.nn.functional as F


def one_hot_embed(ids, w_emb):
    one_hot = F.one_hot(ids, num_classes=w_emb.size(0)).to(w_emb.dtype)
    return torch.einsum("...v,vc->...c", one_hot, w_emb)
""",
        ),
        A(
            "ids flattened to (N,), a 2-D torch.mm, reshaped back to ids.shape + (C,)",
            """\
import torch
import torch.nn.functional as F


def one_hot_embed(ids, w_emb):
    V, C = w_emb.shape
    flat = F.one_hot(ids.reshape(-1), V).type_as(w_emb)  # (N, V)
    return torch.mm(flat, w_emb).reshape(*ids.shape, C)
""",
        ),
        A(
            "the product written as broadcast multiply and a sum over V",
            """\
import torch.nn.functional as F


def one_hot_embed(ids, w_emb):
    V = len(w_emb)
    one_hot = F.one_hot(ids, num_classes=V).to(dtype=w_emb.dtype)  # (..., V)
    return (one_hot.unsqueeze(-1) * w_emb).sum(dim=-2)  # (..., V, C) -> (..., C)
""",
        ),
        A(
            "torch.tensordot contracting the last axis of the one-hot with the first of W_emb",
            """\
import torch


def one_hot_embed(ids, w_emb):
    e = torch.nn.functional.one_hot(ids, num_classes=w_emb.shape[0])
    return torch.tensordot(e.to(w_emb.dtype), w_emb, dims=1)
""",
        ),
    ],
    "causal_average_impl": [
        A(
            "a cumulative sum along the positions divided by the counts 1..T, no matrix",
            """\
import torch


def causal_average(x):
    counts = torch.arange(1, x.shape[-2] + 1, dtype=x.dtype).unsqueeze(-1)  # (T, 1)
    return torch.cumsum(x, dim=-2) / counts
""",
        ),
        A(
            "the weights as a softmax of zeros with the future masked to -inf, then A @ x",
            """\
import torch


def causal_average(x):
    T = x.size(-2)
    future = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)
    scores = torch.zeros(T, T, dtype=x.dtype).masked_fill(future, float("-inf"))
    return torch.matmul(scores.softmax(dim=-1), x)
""",
        ),
        A(
            "a loop over the positions, each the mean of a growing slice, stacked on dim -2",
            """\
import torch


def causal_average(x):
    rows = [x[..., : t + 1, :].mean(dim=-2) for t in range(x.shape[-2])]
    return torch.stack(rows, dim=-2)
""",
        ),
    ],
}
