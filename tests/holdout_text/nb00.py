"""Holdout for notebook 00, written from notebooks/00_tokens_and_embeddings/00_tokens_and_embeddings.ipynb
alone (without reading the checks)."""

from collections import Counter

import torch
import torch.nn.functional as F

from tests.holdout._harness import Mistake, collector
from transformer_lab import bpe

MISTAKES: list[Mistake] = []
CORRECT: list[Mistake] = []
wrong = collector(MISTAKES, "00")
right = collector(CORRECT, "00")
NAMED_AT_LEAST = 1.0  # 42 of 50 named when written; 50 of 50 after this round's check work


# Helpers: correct pieces the later wrong variants build on.
def _count(words):
    counts = {}
    for word, c in words.items():
        for pair in zip(word, word[1:]):
            counts[pair] = counts.get(pair, 0) + c
    return counts


def _merge(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _train(text, n_merges, count=_count, merge=_merge, pick=None, first_id=256):
    words = bpe.word_counts(text)
    merges = []
    for i in range(n_merges):
        counts = count(words)
        if not counts:
            break
        pair = pick(counts) if pick else min(counts, key=lambda p: (-counts[p], p))
        merges.append(pair)
        new = {}
        for w, c in words.items():
            m = tuple(merge(list(w), pair, first_id + i))
            new[m] = new.get(m, 0) + c
        words = new
    return merges


def _token_bytes(merges):
    table = [bytes([b]) for b in range(256)]
    for left, right in merges:
        table.append(table[left] + table[right])
    return table


# ---------------------------------------------------------------- count_pairs
@wrong("count_pairs", "weight|count|occur|frequen")
def pairs_not_weighted_by_word_count(words):
    counts = {}
    for word in words:
        for pair in zip(word, word[1:]):
            counts[pair] = counts.get(pair, 0) + 1
    return counts


@wrong("count_pairs", "overlap|once|occurrence|twice")
def pairs_counted_once_per_word(words):
    counts = {}
    for word, c in words.items():
        for pair in set(zip(word, word[1:])):
            counts[pair] = counts.get(pair, 0) + c
    return counts


@wrong("count_pairs", "last|off-by-one|off by one|miss|at the end|the end")
def pairs_range_stops_one_early(words):
    counts = {}
    for word, c in words.items():
        for i in range(len(word) - 2):
            pair = (word[i], word[i + 1])
            counts[pair] = counts.get(pair, 0) + c
    return counts


@wrong("count_pairs", "boundar|across|inside|between words")
def pairs_across_word_boundaries(words):
    stream = [t for word, c in words.items() for _ in range(c) for t in word]
    counts = {}
    for pair in zip(stream, stream[1:]):
        counts[pair] = counts.get(pair, 0) + 1
    return counts


@wrong("count_pairs", "order|revers|swap")
def pairs_sorted_as_unordered(words):
    counts = {}
    for word, c in words.items():
        for a, b in zip(word, word[1:]):
            pair = (min(a, b), max(a, b))
            counts[pair] = counts.get(pair, 0) + c
    return counts


@wrong("count_pairs", "wrap|adjacent|extra|first")
def pairs_wrap_around(words):
    counts = {}
    for word, c in words.items():
        if len(word) < 2:
            continue
        for pair in zip(word, word[1:] + word[:1]):
            counts[pair] = counts.get(pair, 0) + c
    return counts


@wrong("count_pairs", "modif|in place|in-place|unchanged|mutat")
def pairs_consume_the_input(words):
    counts = _count(words)
    words.clear()
    return counts


@wrong("count_pairs", "zero|one token|single|empty")
def pairs_single_token_word_counted(words):
    counts = _count(words)
    for word, c in words.items():
        if len(word) == 1:
            counts[(word[0], word[0])] = counts.get((word[0], word[0]), 0) + c
    return counts


@right("count_pairs")
def pairs_with_counter(words):
    counts = Counter()
    for word, c in words.items():
        for i in range(len(word) - 1):
            counts[word[i], word[i + 1]] += c
    return dict(counts)


# ---------------------------------------------------------------- merge_pair
@wrong("merge_pair", "in place|in-place|new list|unchanged|modif|mutat|copy")
def merge_edits_ids_in_place(ids, pair, new_id):
    i = 0
    while i < len(ids) - 1:
        if ids[i] == pair[0] and ids[i + 1] == pair[1]:
            ids[i : i + 2] = [new_id]
        i += 1
    return ids


@wrong("merge_pair", "overlap|used up|left to right")
def merge_with_overlap(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            if i + 2 < len(ids) and ids[i + 2] == pair[1] and pair[0] == pair[1]:
                i += 1  # "aaa" -> the second "aa" still counts
            else:
                i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


@wrong("merge_pair", "right to left|left to right|direction|scan")
def merge_scanning_right_to_left(ids, pair, new_id):
    out, i = [], len(ids) - 1
    while i >= 0:
        if i >= 1 and ids[i - 1] == pair[0] and ids[i] == pair[1]:
            out.append(new_id)
            i -= 2
        else:
            out.append(ids[i])
            i -= 1
    return out[::-1]


@wrong("merge_pair", "order|revers|swap")
def merge_either_order(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if (
            i + 1 < len(ids)
            and {ids[i], ids[i + 1]} == set(pair)
            and ids[i] != ids[i + 1]
            or (i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair))
        ):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


@wrong("merge_pair", "every|each|first|occurrence|only one")
def merge_only_first_occurrence(ids, pair, new_id):
    for i in range(len(ids) - 1):
        if ids[i] == pair[0] and ids[i + 1] == pair[1]:
            return list(ids[:i]) + [new_id] + list(ids[i + 2 :])
    return list(ids)


@wrong("merge_pair", "last|drop|lost|length|at the end|the end|miss")
def merge_drops_final_token(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids) - 1:
        if ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


@wrong("merge_pair", "both|right|second|used up")
def merge_keeps_right_token(ids, pair, new_id):
    out = list(ids)
    for i in range(len(out) - 1):
        if out[i] == pair[0] and out[i + 1] == pair[1]:
            out[i] = new_id
    return out


@wrong("merge_pair", "list|type|tuple")
def merge_returns_tuple(ids, pair, new_id):
    return tuple(_merge(ids, pair, new_id))


@right("merge_pair")
def merge_by_index_loop(ids, pair, new_id):
    out = []
    skip = False
    for i, t in enumerate(ids):
        if skip:
            skip = False
            continue
        if i + 1 < len(ids) and (t, ids[i + 1]) == tuple(pair):
            out.append(new_id)
            skip = True
        else:
            out.append(t)
    return out


# ---------------------------------------------------------------- train_merges
@wrong("train_merges", "tie|smallest")
def train_ties_to_largest(text, n_merges):
    return _train(text, n_merges, pick=lambda c: max(c, key=lambda p: (c[p], p)))


@wrong("train_merges", "tie|smallest")
def train_ties_to_first_seen(text, n_merges):
    return _train(text, n_merges, pick=lambda c: max(c, key=c.get))


@wrong("train_merges", "256|new id|token id|new token|off-by-one|off by one|offset")
def train_new_ids_from_255(text, n_merges):
    return _train(text, n_merges, first_id=255)


@wrong("train_merges", "256|new id|token id|new token|off-by-one|off by one|offset")
def train_new_ids_from_257(text, n_merges):
    return _train(text, n_merges, first_id=257)


@wrong("train_merges", "recount|again|after|each merge|once")
def train_counts_only_once(text, n_merges):
    counts = _count(bpe.word_counts(text))
    ranked = sorted(counts, key=lambda p: (-counts[p], p))
    return ranked[:n_merges]


@wrong("train_merges", "stop|no pair|empty|none left")
def train_does_not_stop(text, n_merges):
    words = bpe.word_counts(text)
    merges = []
    for i in range(n_merges):
        counts = _count(words)
        pair = min(counts, key=lambda p: (-counts[p], p))
        merges.append(pair)
        words = {tuple(_merge(list(w), pair, 256 + i)): c for w, c in words.items()}
    return merges


@wrong("train_merges", "word|boundar|across|split")
def train_on_whole_text(text, n_merges):
    ids = list(text.encode("utf-8"))
    merges = []
    for i in range(n_merges):
        counts = _count({tuple(ids): 1})
        if not counts:
            break
        pair = min(counts, key=lambda p: (-counts[p], p))
        merges.append(pair)
        ids = _merge(ids, pair, 256 + i)
    return merges


@wrong("train_merges", "once|count of 1|early|stop")
def train_stops_at_pairs_seen_once(text, n_merges):
    merges = _train(text, n_merges)
    words = bpe.word_counts(text)
    kept = []
    for i, pair in enumerate(merges):
        counts = _count(words)
        if counts[pair] < 2:
            break
        kept.append(pair)
        new = {}
        for w, c in words.items():
            m = tuple(_merge(list(w), pair, 256 + i))
            new[m] = new.get(m, 0) + c
        words = new
    return kept


@wrong("train_merges", "n_merges|number|fewer|how many|count")
def train_one_merge_short(text, n_merges):
    return _train(text, max(n_merges - 1, 0))


@wrong("train_merges", "overlap|left to right")
def train_with_overlapping_merge(text, n_merges):
    return _train(text, n_merges, merge=merge_with_overlap)


@right("train_merges")
def train_with_sorted_counts(text, n_merges):
    words = Counter(bpe.word_counts(text))
    merges = []
    while len(merges) < n_merges:
        counts = Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                counts[a, b] += c
        if not counts:
            break
        best = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        new_id = 256 + len(merges)
        merges.append(best)
        merged = Counter()
        for w, c in words.items():
            merged[tuple(_merge(w, best, new_id))] += c
        words = merged
    return merges


# ---------------------------------------------------------------- encode
def _encode_word(ids, merges, first_id=256, merge=_merge):
    for i, pair in enumerate(merges):
        ids = merge(ids, tuple(pair), first_id + i)
    return ids


@wrong("bpe_encode", "word|split|across|boundar")
def encode_without_word_split(text, merges):
    return _encode_word(list(text.encode("utf-8")), merges)


@wrong("bpe_encode", "order|learned|revers")
def encode_merges_reversed(text, merges):
    out = []
    for word in bpe.split_words(text):
        ids = list(word.encode("utf-8"))
        for i in reversed(range(len(merges))):
            ids = _merge(ids, tuple(merges[i]), 256 + i)
        out += ids
    return out


@wrong("bpe_encode", "256|new id|token id|off-by-one|off by one|offset")
def encode_ids_from_255(text, merges):
    return [t for w in bpe.split_words(text) for t in _encode_word(list(w.encode()), merges, 255)]


@wrong("bpe_encode", "utf|byte|ascii|unicode|code point")
def encode_with_ord(text, merges):
    return [t for w in bpe.split_words(text) for t in _encode_word([ord(ch) for ch in w], merges)]


@wrong("bpe_encode", "space|whitespace|split_words|split")
def encode_with_str_split(text, merges):
    return [t for w in text.split() for t in _encode_word(list(w.encode("utf-8")), merges)]


@wrong("bpe_encode", "overlap|left to right")
def encode_overlapping_merges(text, merges):
    return [
        t
        for w in bpe.split_words(text)
        for t in _encode_word(list(w.encode("utf-8")), merges, merge=merge_with_overlap)
    ]


@wrong("bpe_encode", "flat|one list|list|nested")
def encode_list_per_word(text, merges):
    return [_encode_word(list(w.encode("utf-8")), merges) for w in bpe.split_words(text)]


@wrong("bpe_encode", "utf|byte|latin|encod")
def encode_latin1_bytes(text, merges):
    return [
        t
        for w in bpe.split_words(text)
        for t in _encode_word(list(w.encode("latin-1", errors="replace")), merges)
    ]


@wrong("bpe_encode", "every|each|first|once|each merge")
def encode_each_merge_only_first_occurrence(text, merges):
    return [
        t
        for w in bpe.split_words(text)
        for t in _encode_word(list(w.encode("utf-8")), merges, merge=merge_only_first_occurrence)
    ]


@right("bpe_encode")
def encode_only_present_merges(text, merges):
    rank = {tuple(p): i for i, p in enumerate(merges)}
    out = []
    for word in bpe.split_words(text):
        ids = list(word.encode("utf-8"))
        while len(ids) > 1:
            present = [rank[p] for p in zip(ids, ids[1:]) if p in rank]
            if not present:
                break
            i = min(present)
            ids = _merge(ids, tuple(merges[i]), 256 + i)
        out.extend(ids)
    return out


# ---------------------------------------------------------------- decode
@wrong("bpe_decode", "join|each token|separately|together|byte|character")
def decode_token_by_token(ids, merges):
    table = _token_bytes(merges)
    return "".join(table[i].decode("utf-8", errors="replace") for i in ids)


@wrong("bpe_decode", "replace|fffd|\ufffd|incomplete|invalid")
def decode_ignoring_bad_bytes(ids, merges):
    table = _token_bytes(merges)
    return b"".join(table[i] for i in ids).decode("utf-8", errors="ignore")


@wrong("bpe_decode", "order|left|right|swap|revers")
def decode_right_before_left(ids, merges):
    table = [bytes([b]) for b in range(256)]
    for left, r in merges:
        table.append(table[r] + table[left])
    return b"".join(table[i] for i in ids).decode("utf-8", errors="replace")


@wrong("bpe_decode", "256|new id|token id|off-by-one|off by one|offset")
def decode_ids_from_255(ids, merges):
    table = _token_bytes(merges)
    table = table[:255] + table[256:] + [b"?"]
    return b"".join(table[i] for i in ids).decode("utf-8", errors="replace")


@wrong("bpe_decode", "utf|byte|latin|encod")
def decode_as_latin1(ids, merges):
    table = _token_bytes(merges)
    return b"".join(table[i] for i in ids).decode("latin-1")


@wrong("bpe_decode", "nested|recurs|merged token|earlier|expand")
def decode_one_level_only(ids, merges):
    out = b""
    for i in ids:
        if i < 256:
            out += bytes([i])
        else:
            left, r = merges[i - 256]
            out += bytes([left % 256, r % 256])
    return out.decode("utf-8", errors="replace")


@wrong("bpe_decode", "space|whitespace|strip")
def decode_strips_text(ids, merges):
    table = _token_bytes(merges)
    return b"".join(table[i] for i in ids).decode("utf-8", errors="replace").strip()


@right("bpe_decode")
def decode_recursive(ids, merges):
    def expand(t):
        if t < 256:
            return [t]
        left, r = merges[t - 256]
        return expand(left) + expand(r)

    return bytes(b for t in ids for b in expand(t)).decode("utf-8", errors="replace")


# ---------------------------------------------------------------- one_hot_embed
@wrong("one_hot_embed", "num_classes|vocab|width|size")
def embed_one_hot_without_num_classes(ids, w_emb):
    return F.one_hot(ids).to(w_emb.dtype) @ w_emb


@wrong("one_hot_embed", "grad|detach")
def embed_detached(ids, w_emb):
    return F.one_hot(ids, num_classes=w_emb.shape[0]).to(w_emb.dtype) @ w_emb.detach()


@wrong("one_hot_embed", "dtype|float|integer|long")
def embed_integer_one_hot(ids, w_emb):
    return F.one_hot(ids, num_classes=w_emb.shape[0]) @ w_emb


@wrong("one_hot_embed", "dtype|float64|double|precision")
def embed_always_float32(ids, w_emb):
    return F.one_hot(ids, num_classes=w_emb.shape[0]).float() @ w_emb.float()


@wrong("one_hot_embed", "shape|flatten|dim|batch")
def embed_flattened(ids, w_emb):
    oh = F.one_hot(ids.reshape(-1), num_classes=w_emb.shape[0]).to(w_emb.dtype)
    return oh @ w_emb


@wrong("one_hot_embed", "shape|dim|batch|2-d|matrix")
def embed_with_mm(ids, w_emb):
    return torch.mm(F.one_hot(ids, num_classes=w_emb.shape[0]).to(w_emb.dtype), w_emb)


@wrong("one_hot_embed", "shape|sum|position")
def embed_summed_over_positions(ids, w_emb):
    oh = F.one_hot(ids, num_classes=w_emb.shape[0]).to(w_emb.dtype)
    return oh.sum(dim=-2) @ w_emb


@wrong("one_hot_embed", "transpose|column|shape|row")
def embed_transposed_product(ids, w_emb):
    oh = F.one_hot(ids, num_classes=w_emb.shape[1]).to(w_emb.dtype)
    return oh @ w_emb.T


@right("one_hot_embed")
def embed_with_einsum(ids, w_emb):
    oh = F.one_hot(ids, w_emb.shape[0]).type_as(w_emb)  # (..., V)
    return torch.einsum("...v,vc->...c", oh, w_emb)


@right("one_hot_embed")
def embed_with_matmul(ids, w_emb):
    return torch.matmul(F.one_hot(ids, num_classes=len(w_emb)).to(dtype=w_emb.dtype), w_emb)
