"""Notebook 00's mistake catalogue (the checks are tuned on it): correct implementations in
several styles (``GOOD``) and realistic wrong ones with the words their check's message must
contain (``CATALOGUE``), as ``CORRECT`` and ``MISTAKES`` in the holdout's format. It moved here
from tests/test_nb00_checks.py, which runs the correct variants; the one floor test
(tests/holdout/test_holdout.py) holds every mistake caught and named, none misleading.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import torch
import torch.nn.functional as F

from tests.holdout._harness import from_table
from transformer_lab import bpe, checks


# ---------------------------------------------------------------------------------------------
# Correct implementations, in several styles.
def cp_good(words):
    counts = {}
    for word, n in words.items():
        for pair in zip(word, word[1:]):
            counts[pair] = counts.get(pair, 0) + n
    return counts


def cp_good_counter(words):
    counts = Counter()
    for word, n in words.items():
        for i in range(len(word) - 1):
            counts[word[i], word[i + 1]] += n
    return dict(counts)


def cp_good_defaultdict(words):
    counts = defaultdict(int)
    for word, n in words.items():
        for a, b in zip(word[:-1], word[1:]):
            counts[(a, b)] += n
    return dict(counts)


def mp_good(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i < len(ids) - 1 and (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def mp_good_skip_flag(ids, pair, new_id):
    out, skip = [], False
    for i, token in enumerate(ids):
        if skip:
            skip = False
            continue
        if i + 1 < len(ids) and token == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            skip = True
        else:
            out.append(token)
    return out


def tm_good(text, n_merges):
    words = bpe.word_counts(text)
    merges = []
    for i in range(n_merges):
        counts = cp_good(words)
        if not counts:
            break
        pair = min(counts, key=lambda p: (-counts[p], p))
        merges.append(pair)
        merged = {}
        for word, n in words.items():
            key = tuple(mp_good(list(word), pair, 256 + i))
            merged[key] = merged.get(key, 0) + n
        words = merged
    return merges


def tm_good_sorted(text, n_merges):
    words = [(list(w), n) for w, n in bpe.word_counts(text).items()]
    merges = []
    while len(merges) < n_merges:
        counts = {}
        for w, n in words:
            for p in zip(w, w[1:]):
                counts[p] = counts.get(p, 0) + n
        if not counts:
            break
        best = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        new_id = 256 + len(merges)
        merges.append(best)
        words = [(mp_good_skip_flag(w, best, new_id), n) for w, n in words]
    return merges


def enc_good(text, merges):
    ids = []
    for word in bpe.split_words(text):
        w = list(word.encode("utf-8"))
        for i, pair in enumerate(merges):
            w = mp_good(w, pair, 256 + i)
        ids += w
    return ids


def enc_good_ranked(text, merges):
    rank = {tuple(p): i for i, p in enumerate(merges)}
    out = []
    for word in bpe.split_words(text):
        w = list(word.encode())
        while True:
            found = [rank[p] for p in zip(w, w[1:]) if p in rank]
            if not found:
                break
            r = min(found)
            w = mp_good(w, merges[r], 256 + r)
        out.extend(w)
    return out


def dec_good(ids, merges):
    vocab = {b: bytes([b]) for b in range(256)}
    for i, (a, b) in enumerate(merges):
        vocab[256 + i] = vocab[a] + vocab[b]
    return b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace")


def dec_good_bytearray(ids, merges):
    pieces = [bytes([b]) for b in range(256)] + [b""] * len(merges)
    for i, (a, b) in enumerate(merges):
        pieces[256 + i] = pieces[a] + pieces[b]
    buf = bytearray()
    for i in ids:
        buf += pieces[i]
    return bytes(buf).decode("utf-8", "replace")


def emb_good(ids, w_emb):
    return F.one_hot(ids, num_classes=w_emb.shape[0]).to(w_emb.dtype) @ w_emb


def emb_good_eye(ids, w_emb):
    eye = torch.eye(w_emb.shape[0], dtype=w_emb.dtype)
    return eye[ids] @ w_emb


def emb_good_index(ids, w_emb):
    return w_emb[ids]


def ca_good(x):
    T = x.shape[-2]
    w = torch.tril(torch.ones(T, T, dtype=x.dtype))  # (T, T)
    return (w / w.sum(dim=1, keepdim=True)) @ x


def ca_good_cumsum(x):
    counts = torch.arange(1, x.shape[-2] + 1, dtype=x.dtype)[:, None]  # (T, 1)
    return x.cumsum(dim=-2) / counts


def ca_good_softmax(x):
    T = x.shape[-2]
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    w = torch.zeros(T, T, dtype=x.dtype).masked_fill(future, float("-inf")).softmax(dim=-1)
    return w @ x


def ca_good_loop(x):
    out = torch.empty_like(x)
    for t in range(x.shape[-2]):
        out[..., t, :] = x[..., : t + 1, :].mean(dim=-2)
    return out


GOOD = [
    (checks.check_count_pairs, f) for f in (cp_good, cp_good_counter, cp_good_defaultdict)
] + [
    (checks.check_merge_pair, f) for f in (mp_good, mp_good_skip_flag)
] + [
    (checks.check_train_merges, f) for f in (tm_good, tm_good_sorted)
] + [
    (checks.check_bpe_encode, f) for f in (enc_good, enc_good_ranked)
] + [
    (checks.check_bpe_decode, f) for f in (dec_good, dec_good_bytearray)
] + [
    (checks.check_one_hot_embed, f) for f in (emb_good, emb_good_eye, emb_good_index)
] + [
    (checks.check_causal_average, f)
    for f in (ca_good, ca_good_cumsum, ca_good_softmax, ca_good_loop)
]  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Wrong implementations, with the words their check's message must contain.
def _cp(per_word):
    def count_pairs(words):
        counts = {}
        for word, n in words.items():
            per_word(counts, word, n)
        return counts

    return count_pairs


def _add(counts, pair, n):
    counts[pair] = counts.get(pair, 0) + n


cp_plus_one = _cp(lambda c, w, n: [_add(c, p, 1) for p in zip(w, w[1:])])


def cp_non_overlapping(words):  # a scan that jumps after every match
    counts = {}
    for word, n in words.items():
        i = 0
        while i < len(word) - 1:
            pair = (word[i], word[i + 1])
            _add(counts, pair, n)
            i += 2 if i + 2 < len(word) and (word[i + 1], word[i + 2]) == pair else 1
    return counts


cp_set = _cp(lambda c, w, n: [_add(c, p, n) for p in set(zip(w, w[1:]))])
cp_range_short = _cp(lambda c, w, n: [_add(c, (w[i], w[i + 1]), n) for i in range(len(w) - 2)])


def cp_concatenated(words):
    flat = [t for w, n in words.items() for _ in range(n) for t in w]
    counts = {}
    for p in zip(flat, flat[1:]):
        _add(counts, p, 1)
    return counts


cp_reversed = _cp(lambda c, w, n: [_add(c, (b, a), n) for a, b in zip(w, w[1:])])


def cp_assign(words):
    counts = {}
    for w, n in words.items():
        for p in zip(w, w[1:]):
            counts[p] = n
    return counts


def cp_list_keys(words):
    counts = {}
    for w, n in words.items():
        for p in zip(w, w[1:]):
            _add(counts, str(p), n)
    return counts


def mp_no_skip(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 1 if i + 2 < len(ids) and ids[i + 2] == pair[1] else 2
        else:
            out.append(ids[i])
            i += 1
    return out


def mp_reverse_scan(ids, pair, new_id):
    return mp_good(ids[::-1], pair[::-1], new_id)[::-1]


def mp_first(ids, pair, new_id):
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == pair:
            return list(ids[:i]) + [new_id] + list(ids[i + 2 :])
    return list(ids)


def mp_loses_tail(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def mp_unordered(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and sorted((ids[i], ids[i + 1])) == sorted(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def mp_keeps_second(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
        else:
            out.append(ids[i])
        i += 1
    return out


def mp_tuple(ids, pair, new_id):
    return tuple(mp_good(ids, pair, new_id))


def mp_in_place(ids, pair, new_id):
    i = 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) == pair:
            ids[i : i + 2] = [new_id]
        i += 1
    return ids


def _tm(pick, first_id=256, words_of=bpe.word_counts, recount=True, extra=0, min_count=1):
    def train_merges(text, n_merges):
        words = words_of(text)
        merges = []
        counts = cp_good(words)
        for i in range(n_merges + extra):
            if recount:
                counts = cp_good(words)
            counts = {p: c for p, c in counts.items() if c > 0}
            if not counts:
                break
            pair = pick(counts)
            if counts[pair] < min_count:
                break
            merges.append(pair)
            merged = {}
            for w, n in words.items():
                key = tuple(mp_good(list(w), pair, first_id + i))
                merged[key] = merged.get(key, 0) + n
            words = merged
            counts.pop(pair, None)
        return merges

    return train_merges


def _smallest(c):
    return min(c, key=lambda p: (-c[p], p))


def _code_points(text):
    return dict(Counter(tuple(map(ord, w)) for w in bpe.split_words(text)))


tm_ties_largest = _tm(lambda c: max(c, key=lambda p: (c[p], p)))
tm_ties_dict_order = _tm(lambda c: max(c, key=c.get))
tm_ties_by_right = _tm(lambda c: min(c, key=lambda p: (-c[p], p[1], p[0])))
tm_one_word = _tm(_smallest, words_of=lambda t: {tuple(t.encode()): 1})
tm_no_recount = _tm(_smallest, recount=False)
tm_from_255 = _tm(_smallest, first_id=255)
tm_min_two = _tm(_smallest, min_count=2)
tm_code_points = _tm(_smallest, words_of=_code_points)
tm_extra = _tm(_smallest, extra=1)


def tm_list_pairs(text, n_merges):
    return [list(p) for p in tm_good(text, n_merges)]


def tm_new_ids(text, n_merges):
    return [256 + i for i in range(len(tm_good(text, n_merges)))]


def _enc(units, order_reversed=False, to_ids=lambda w: list(w.encode("utf-8")), passes=None):
    def encode(text, merges):
        out = []
        for w in units(text):
            ids = to_ids(w)
            order = list(enumerate(merges))
            for i, pair in reversed(order) if order_reversed else order:
                ids = mp_good(ids, tuple(pair), 256 + i)
            out += ids
        return out

    return encode


enc_reversed = _enc(bpe.split_words, order_reversed=True)
enc_whole = _enc(lambda t: [t] if t else [])
enc_str_split = _enc(str.split)
enc_ord = _enc(bpe.split_words, to_ids=lambda w: [ord(c) for c in w])
enc_ascii_only = _enc(lambda t: [w for w in bpe.split_words(t) if w.isascii()])
enc_strip_unknown = _enc(
    lambda t: ["".join(c for c in w if ord(c) < 128) for w in bpe.split_words(t)]
)


def enc_single_pass(text, merges):
    rank = {tuple(p): i for i, p in enumerate(merges)}
    out = []
    for w in bpe.split_words(text):
        ids = list(w.encode())
        found = [rank[p] for p in zip(ids, ids[1:]) if p in rank]
        out += mp_good(ids, merges[min(found)], 256 + min(found)) if found else ids
    return out


def enc_tensor(text, merges):
    return torch.tensor(enc_good(text, merges))


def _vocab(merges, swap=False):
    vocab = [bytes([b]) for b in range(256)]
    for a, b in merges:
        vocab.append(vocab[b] + vocab[a] if swap else vocab[a] + vocab[b])
    return vocab


def dec_spaces(ids, merges):
    v = _vocab(merges)
    return " ".join(v[i].decode("utf-8", "replace") for i in ids)


def dec_each(ids, merges):
    v = _vocab(merges)
    return "".join(v[i].decode("utf-8", "replace") for i in ids)


def dec_ignore(ids, merges):
    return b"".join(_vocab(merges)[i] for i in ids).decode("utf-8", "ignore")


def dec_latin(ids, merges):
    return "".join(map(chr, b"".join(_vocab(merges)[i] for i in ids)))


def dec_strip(ids, merges):
    return dec_good(ids, merges).strip()


def dec_swapped(ids, merges):
    return b"".join(_vocab(merges, swap=True)[i] for i in ids).decode("utf-8", "replace")


def dec_bytes(ids, merges):
    return b"".join(_vocab(merges)[i] for i in ids)


def dec_strict(ids, merges):
    return b"".join(_vocab(merges)[i] for i in ids).decode("utf-8")


def emb_transposed(ids, w):
    return F.one_hot(ids, w.shape[1]).to(w.dtype) @ w.T


def emb_guess_v(ids, w):
    return F.one_hot(ids).to(w.dtype) @ w


def emb_detach(ids, w):
    return F.one_hot(ids, w.shape[0]).to(w.dtype) @ w.detach()


def emb_no_grad(ids, w):
    with torch.no_grad():
        return F.one_hot(ids, w.shape[0]).to(w.dtype) @ w


def emb_shift(ids, w):
    return w[(ids - 1) % w.shape[0]]


def emb_int(ids, w):
    return F.one_hot(ids, w.shape[0]) @ w.long()


def emb_scaled(ids, w):
    return emb_good(ids, w) * w.shape[1] ** 0.5


def emb_summed(ids, w):
    return emb_good(ids, w).sum(dim=-2)


def emb_embedding(ids, w):
    return F.embedding(ids, w)


def emb_double(ids, w):
    return F.one_hot(ids, w.shape[0]).double() @ w.double()


# ---------------------------------------------------------------------------------------------
# Wider catalogue: inputs changed or handed back, merges by string replacement or of the first
# occurrence only, word counts ignored, dtypes, and bare Python errors.
def cp_prunes_words(words):  # drops one-token words from the caller's dict
    for w in [w for w in words if len(w) < 2]:
        del words[w]
    return cp_good(words)


def cp_no_start(words):
    counts = {}
    for word, n in words.items():
        for pair in zip(word, word[1:]):
            counts[pair] += n
    return counts


def cp_no_items(words):
    counts = {}
    for word, n in words:
        for pair in zip(word, word[1:]):
            counts[pair] = counts.get(pair, 0) + n
    return counts


def mp_string_replace(ids, pair, new_id):
    text = " ".join(map(str, ids)).replace(f"{pair[0]} {pair[1]}", str(new_id))
    return [int(t) for t in text.split()]


def mp_string_padded(ids, pair, new_id):
    text = f" {' '.join(map(str, ids))} ".replace(f" {pair[0]} {pair[1]} ", f" {new_id} ")
    return [int(t) for t in text.split()]


def mp_same_list_if_absent(ids, pair, new_id):
    if tuple(pair) not in zip(ids, ids[1:]):
        return ids
    return mp_good(ids, pair, new_id)


def mp_reads_past_end(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _tm_merging(merge, words_of=bpe.word_counts, stop=True, name="train_merges"):
    def train_merges(text, n_merges):
        words = words_of(text)
        merges = []
        for i in range(n_merges):
            counts = cp_good(words)
            if stop and not counts:
                break
            pair = min(counts, key=lambda p: (-counts[p], p))
            merges.append(pair)
            merged = {}
            for w, n in words.items():
                key = tuple(merge(list(w), pair, 256 + i))
                merged[key] = merged.get(key, 0) + n
            words = merged
        return merges

    train_merges.__name__ = name
    return train_merges


tm_first_only = _tm_merging(mp_first, name="tm_first_only")
tm_string_merge = _tm_merging(mp_string_replace, name="tm_string_merge")
tm_unweighted = _tm_merging(
    mp_good, words_of=lambda t: {w: 1 for w in bpe.word_counts(t)}, name="tm_unweighted"
)
tm_text_split = _tm_merging(
    mp_good, words_of=lambda t: Counter(tuple(w.encode()) for w in t.split()), name="tm_text_split"
)
tm_no_stop = _tm_merging(mp_good, stop=False, name="tm_no_stop")


def _enc_merging(merge, name):
    def encode(text, merges):
        out = []
        for w in bpe.split_words(text):
            ids = list(w.encode("utf-8"))
            for i, pair in enumerate(merges):
                ids = merge(ids, tuple(pair), 256 + i)
            out += ids
        return out

    encode.__name__ = name
    return encode


enc_first_only = _enc_merging(mp_first, "enc_first_only")
enc_string_merge = _enc_merging(mp_string_replace, "enc_string_merge")


def enc_sorts_merges(text, merges):  # sorts the caller's list in place
    merges.sort()
    return enc_good(text, merges)


def enc_merges_by_pair_order(text, merges):
    ranked = sorted(merges)
    out = []
    for w in bpe.split_words(text):
        ids = list(w.encode())
        for pair in ranked:
            ids = mp_good(ids, pair, 256 + merges.index(pair))
        out += ids
    return out


def dec_bytes_of_ids(ids, merges):
    return bytes(ids).decode("utf-8", errors="replace")


def dec_in_pairs(ids, merges):  # decodes two tokens at a time
    v = _vocab(merges)
    parts = [b"".join(v[i] for i in ids[k : k + 2]) for k in range(0, len(ids), 2)]
    return "".join(p.decode("utf-8", "replace") for p in parts)


def emb_float(ids, w):
    return F.one_hot(ids, w.shape[0]).float() @ w


def emb_float_both(ids, w):
    return F.one_hot(ids, w.shape[0]).float() @ w.float()


def emb_requires_grad(ids, w):
    w.requires_grad_(True)
    return F.one_hot(ids, w.shape[0]).to(w.dtype) @ w


# ---------------------------------------------------------------------------------------------
# Issue 39: families the text-only holdout found weak (pairs sorted, wrapped or made of one
# token; merges that overlap inside runs of equal tokens; merge ids offset by one; merges of
# merges expanded one level only), each in more than one style.
cp_sorted = _cp(lambda c, w, n: [_add(c, tuple(sorted(p)), n) for p in zip(w, w[1:])])
cp_wraps = _cp(lambda c, w, n: [_add(c, p, n) for p in zip(w, w[1:] + w[:1])] if len(w) > 1 else 0)
cp_wraps_modulo = _cp(
    lambda c, w, n: (
        [_add(c, (w[i], w[(i + 1) % len(w)]), n) for i in range(len(w))] if len(w) > 1 else 0
    )
)
cp_one_token_self_pair = _cp(
    lambda c, w, n: [_add(c, p, n) for p in (list(zip(w, w[1:])) or [(w[0], w[0])])]
)
cp_one_token_slice = _cp(
    lambda c, w, n: [_add(c, tuple(w[i : i + 2]), n) for i in range(max(len(w) - 1, 1))]
)
cp_range_len = _cp(lambda c, w, n: [_add(c, tuple(w[i : i + 2]), n) for i in range(len(w))])


def cp_zip_longest(words):
    from itertools import zip_longest

    counts = {}
    for w, n in words.items():
        for p in zip_longest(w, w[1:]):
            _add(counts, p, n)
    return counts


tm_overlap = _tm_merging(mp_no_skip, name="tm_overlap")
tm_overlap_step = _tm_merging(
    lambda ids, pair, new_id: [
        new_id if tuple(ids[i : i + 2]) == tuple(pair) else ids[i] for i in range(len(ids))
    ],
    name="tm_overlap_step",
)
tm_right_to_left = _tm_merging(mp_reverse_scan, name="tm_right_to_left")
enc_overlap = _enc_merging(mp_no_skip, "enc_overlap")
enc_right_to_left = _enc_merging(mp_reverse_scan, "enc_right_to_left")


def enc_from_255(text, merges):
    out = []
    for word in bpe.split_words(text):
        ids = list(word.encode("utf-8"))
        for i, pair in enumerate(merges):
            ids = mp_good(ids, tuple(pair), 255 + i)
        out += ids
    return out


def enc_ranked_from_257(text, merges):
    rank = {tuple(p): i for i, p in enumerate(merges)}
    out = []
    for word in bpe.split_words(text):
        w = list(word.encode())
        while True:
            found = [rank[p] for p in zip(w, w[1:]) if p in rank]
            if not found:
                break
            w = mp_good(w, merges[min(found)], 257 + min(found))
        out.extend(w)
    return out


def dec_from_255(ids, merges):
    vocab = {b: bytes([b]) for b in range(256)}
    for i, (a, b) in enumerate(merges):
        vocab[255 + i] = vocab[a] + vocab[b]
    return b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace")


def dec_recursive_minus_255(ids, merges):
    def piece(t):
        if t < 256:
            return bytes([t])
        a, b = merges[t - 255]
        return piece(a) + piece(b)

    return b"".join(piece(t) for t in ids).decode("utf-8", errors="replace")


def dec_one_level(ids, merges):  # expands a merge into its two ids once
    out = bytearray()
    for t in ids:
        out += bytes([t]) if t < 256 else bytes(merges[t - 256])
    return bytes(out).decode("utf-8", errors="replace")


def dec_one_level_drops(ids, merges):  # keeps only the byte halves of a merge
    out = bytearray()
    for t in ids:
        parts = [t] if t < 256 else list(merges[t - 256])
        out += bytes(p for p in parts if p < 256)
    return bytes(out).decode("utf-8", errors="replace")


def dec_two_levels(ids, merges):
    def expand(t):
        return [t] if t < 256 else list(merges[t - 256])

    flat = [u for t in ids for v in expand(t) for u in expand(v)]
    return bytes(u for u in flat if u < 256).decode("utf-8", errors="replace")


# causal_average: one helper builds A from a (T, T) 0/1 pattern and the divisor the student chose
def _ca(name, keep, divide, dtype=None):
    def causal_average(x):
        T = x.shape[-2]
        ones = torch.ones(T, T, dtype=dtype or x.dtype)
        w = keep(ones)
        return divide(w) @ x

    causal_average.__name__ = causal_average.__qualname__ = name
    return causal_average


_rows = lambda w: w / w.sum(dim=1, keepdim=True)  # noqa: E731
ca_upper = _ca("ca_upper", torch.triu, _rows)
ca_transposed = _ca("ca_transposed", torch.tril, lambda w: _rows(w).T)
ca_next_too = _ca("ca_next_too", lambda o: o.tril(1), _rows)
ca_no_mask = _ca("ca_no_mask", lambda o: o, _rows)
ca_by_T = _ca("ca_by_T", torch.tril, lambda w: w / w.shape[0])
ca_by_t = _ca("ca_by_t", torch.tril, lambda w: w / torch.arange(w.shape[0])[:, None])
ca_by_t_plus_2 = _ca(
    "ca_by_t_plus_2", torch.tril, lambda w: w / torch.arange(2, w.shape[0] + 2)[:, None]
)
ca_no_keepdim = _ca("ca_no_keepdim", torch.tril, lambda w: w / w.sum(dim=1))
ca_by_column = _ca("ca_by_column", torch.tril, lambda w: w / w.sum(dim=0))
ca_sum = _ca("ca_sum", torch.tril, lambda w: w)
ca_float32 = _ca("ca_float32", torch.tril, _rows, dtype=torch.float32)


def ca_exclusive(x):  # the mean of the positions before t
    out = torch.zeros_like(x)
    for t in range(x.shape[-2]):
        out[..., t, :] = x[..., :t, :].mean(dim=-2)
    return out


def ca_masked_zero(x):  # the future filled with 0, not -inf, before the softmax
    T = x.shape[-2]
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    return torch.zeros(T, T, dtype=x.dtype).masked_fill(future, 0.0).softmax(dim=-1) @ x


def ca_floor_div(x):
    T = x.shape[-2]
    w = torch.tril(torch.ones(T, T, dtype=torch.long))
    return (w // w.sum(dim=1, keepdim=True)).to(x.dtype) @ x


def ca_channels(x):  # cumsum along the last dimension
    return x.cumsum(dim=-1) / torch.arange(1, x.shape[-1] + 1, dtype=x.dtype)


def ca_right_product(x):  # x @ A: the channels mixed
    T = x.shape[-2]
    w = torch.tril(torch.ones(T, T, dtype=x.dtype))
    return x @ (w / w.sum(dim=1, keepdim=True))


def ca_dim1(x):  # dim=1 is the positions of (B, T, C) only
    return x.cumsum(dim=1) / torch.arange(1, x.shape[1] + 1, dtype=x.dtype)


def ca_dim0(x):  # dim=0 is the positions of (T, C) only
    counts = torch.arange(1, x.shape[0] + 1, dtype=x.dtype).reshape(-1, *[1] * (x.dim() - 1))
    return x.cumsum(dim=0) / counts


def ca_unpack(x):  # (T, C) only
    T, C = x.shape
    w = torch.tril(torch.ones(T, T, dtype=x.dtype))
    return (w / w.sum(dim=1, keepdim=True)) @ x


def ca_mm(x):
    T = x.shape[-2]
    w = torch.tril(torch.ones(T, T, dtype=x.dtype))
    return torch.mm(w / w.sum(dim=1, keepdim=True), x)


def ca_shape0(x):  # T read as x.shape[0]
    T = x.shape[0]
    w = torch.tril(torch.ones(T, T, dtype=x.dtype))
    return (w / w.sum(dim=1, keepdim=True)) @ x


def ca_first_sequence(x):
    if x.dim() == 3:
        x = x[0]
    return ca_good(x)


def ca_in_place(x):  # divides the running sums inside x
    torch.cumsum(x, dim=-2, out=x)
    x /= torch.arange(1, x.shape[-2] + 1, dtype=x.dtype)[:, None]
    return x


def ca_in_place_loop(x):  # each row overwritten by a mean that reads overwritten rows
    for t in range(x.shape[-2]):
        x[..., t, :] = x[..., : t + 1, :].mean(dim=-2)
    return x


def ca_weights(x):
    T = x.shape[-2]
    w = torch.tril(torch.ones(T, T, dtype=x.dtype))
    return w / w.sum(dim=1, keepdim=True)


def ca_loop_from_1(x):
    out = torch.zeros_like(x)
    for t in range(1, x.shape[-2]):
        out[..., t, :] = x[..., : t + 1, :].mean(dim=-2)
    return out


def ca_whole_mean(x):
    return x.mean(dim=-2, keepdim=True)


def ca_reference(x):
    from transformer_lab.lessons import why_attention

    return why_attention.causal_average(x)


C = checks
CATALOGUE = [
    (C.check_count_pairs, cp_plus_one, "frequency"),
    (C.check_count_pairs, cp_non_overlapping, "overlapping"),
    (C.check_count_pairs, cp_set, "twice"),
    (C.check_count_pairs, cp_range_short, "last pair"),
    (C.check_count_pairs, cp_concatenated, "word boundaries"),
    (C.check_count_pairs, cp_reversed, "(right, left)"),
    (C.check_count_pairs, cp_assign, "overwrite"),
    (C.check_count_pairs, cp_list_keys, "tuple"),
    (C.check_merge_pair, mp_no_skip, "overlapping"),
    (C.check_merge_pair, mp_reverse_scan, "right to left"),
    (C.check_merge_pair, mp_first, "first occurrence"),
    (C.check_merge_pair, mp_loses_tail, "last token"),
    (C.check_merge_pair, mp_unordered, "other order"),
    (C.check_merge_pair, mp_keeps_second, "skip both"),
    (C.check_merge_pair, mp_tuple, "list"),
    (C.check_merge_pair, mp_in_place, "in place"),
    (C.check_train_merges, tm_ties_largest, "ties"),
    (C.check_train_merges, tm_ties_dict_order, "ties"),
    (C.check_train_merges, tm_ties_by_right, "ties"),
    (C.check_train_merges, tm_one_word, "word boundaries"),
    (C.check_train_merges, tm_no_recount, "recount"),
    (C.check_train_merges, tm_from_255, "256 + i"),
    (C.check_train_merges, tm_min_two, "only once"),
    (C.check_train_merges, tm_code_points, "UTF-8"),
    (C.check_train_merges, tm_extra, "one merge too many"),
    (C.check_train_merges, tm_list_pairs, "tuple"),
    (C.check_train_merges, tm_new_ids, "not the new token ids"),
    (C.check_bpe_encode, enc_reversed, "order they were learned"),
    (C.check_bpe_encode, enc_whole, "word boundaries"),
    (C.check_bpe_encode, enc_str_split, "text.split()"),
    (C.check_bpe_encode, enc_ord, "code points"),
    (C.check_bpe_encode, enc_ascii_only, "never seen"),
    (C.check_bpe_encode, enc_strip_unknown, "never seen"),
    (C.check_bpe_encode, enc_single_pass, "only one merge"),
    (C.check_bpe_encode, enc_tensor, "list of Python ints"),
    (C.check_bpe_decode, dec_spaces, "joined with spaces"),
    (C.check_bpe_decode, dec_each, "each token on its own"),
    (C.check_bpe_decode, dec_ignore, "errors='replace'"),
    (C.check_bpe_decode, dec_latin, "Latin-1"),
    (C.check_bpe_decode, dec_strip, "stripped"),
    (C.check_bpe_decode, dec_swapped, "other order"),
    (C.check_bpe_decode, dec_bytes, "return a str"),
    (C.check_bpe_decode, dec_strict, "errors='replace'"),
    (C.check_one_hot_embed, emb_transposed, "num_classes must be V"),
    (C.check_one_hot_embed, emb_guess_v, "num_classes=w_emb.shape[0]"),
    (C.check_one_hot_embed, emb_detach, "no gradient"),
    (C.check_one_hot_embed, emb_no_grad, "no gradient"),
    (C.check_one_hot_embed, emb_shift, "off by one"),
    (C.check_one_hot_embed, emb_int, "dtype"),
    (C.check_one_hot_embed, emb_scaled, "sqrt(C)"),
    (C.check_one_hot_embed, emb_summed, "summed over the sequence"),
    (C.check_one_hot_embed, emb_embedding, "torch.nn.functional.embedding"),
    (C.check_one_hot_embed, emb_double, "dtype"),
    (C.check_count_pairs, cp_prunes_words, "in place"),
    (C.check_count_pairs, cp_no_start, "start it at 0"),
    (C.check_count_pairs, cp_no_items, "words.items()"),
    (C.check_merge_pair, mp_string_replace, "joined as a string"),
    (C.check_merge_pair, mp_string_padded, "joined as a string"),
    (C.check_merge_pair, mp_same_list_if_absent, "returned its input"),
    (C.check_merge_pair, mp_reads_past_end, "i + 1 < len(ids)"),
    (C.check_train_merges, tm_first_only, "first occurrence"),
    (C.check_train_merges, tm_string_merge, "joined as a string"),
    (C.check_train_merges, tm_unweighted, "as often as it occurs"),
    (C.check_train_merges, tm_text_split, "text.split()"),
    (C.check_train_merges, tm_no_stop, "no pair is left"),
    (C.check_bpe_encode, enc_first_only, "first occurrence"),
    (C.check_bpe_encode, enc_string_merge, "joined as a string"),
    (C.check_bpe_encode, enc_sorts_merges, "in place"),
    (C.check_bpe_encode, enc_merges_by_pair_order, "first differ at position"),
    (C.check_bpe_decode, dec_bytes_of_ids, "merges, not bytes"),
    (C.check_bpe_decode, dec_in_pairs, "decoded apart"),
    (C.check_one_hot_embed, emb_float, "not .float()"),
    (C.check_one_hot_embed, emb_float_both, "not .float()"),
    (C.check_one_hot_embed, emb_requires_grad, "requires_grad"),
    (C.check_count_pairs, cp_sorted, "order"),
    (C.check_count_pairs, cp_wraps, "wrap"),
    (C.check_count_pairs, cp_wraps_modulo, "wrap"),
    (C.check_count_pairs, cp_one_token_self_pair, "one token"),
    (C.check_count_pairs, cp_one_token_slice, "one token"),
    (C.check_count_pairs, cp_range_len, "past the end"),
    (C.check_count_pairs, cp_zip_longest, "past the end"),
    (C.check_train_merges, tm_overlap, "overlap"),
    (C.check_train_merges, tm_overlap_step, "overlap"),
    (C.check_train_merges, tm_right_to_left, "right to left"),
    (C.check_bpe_encode, enc_overlap, "overlap"),
    (C.check_bpe_encode, enc_right_to_left, "right to left"),
    (C.check_bpe_encode, enc_from_255, "starts at 255"),
    (C.check_bpe_encode, enc_ranked_from_257, "starts at 257"),
    (C.check_bpe_decode, dec_from_255, "256 + i"),
    (C.check_bpe_decode, dec_recursive_minus_255, "256 + i"),
    (C.check_bpe_decode, dec_one_level, "recursively"),
    (C.check_bpe_decode, dec_one_level_drops, "recursively"),
    (C.check_bpe_decode, dec_two_levels, "recursively"),
    (C.check_causal_average, ca_upper, "future"),
    (C.check_causal_average, ca_transposed, "future"),
    (C.check_causal_average, ca_next_too, "future"),
    (C.check_causal_average, ca_no_mask, "future"),
    (C.check_causal_average, ca_masked_zero, "future"),
    (C.check_causal_average, ca_by_T, "by T"),
    (C.check_causal_average, ca_by_t, "off by one"),
    (C.check_causal_average, ca_by_t_plus_2, "off by one"),
    (C.check_causal_average, ca_exclusive, "itself is left out"),
    (C.check_causal_average, ca_no_keepdim, "keepdim=True"),
    (C.check_causal_average, ca_by_column, "keepdim=True"),
    (C.check_causal_average, ca_sum, "running sums"),
    (C.check_causal_average, ca_floor_div, "integer division"),
    (C.check_causal_average, ca_float32, "dtype=x.dtype"),
    (C.check_causal_average, ca_channels, "channels"),
    (C.check_causal_average, ca_right_product, "channels"),
    (C.check_causal_average, ca_dim1, "channels"),
    (C.check_causal_average, ca_dim0, "batch"),
    (C.check_causal_average, ca_unpack, "(B, T, C)"),
    (C.check_causal_average, ca_mm, "(B, T, C)"),
    (C.check_causal_average, ca_shape0, "x.shape[-2]"),
    (C.check_causal_average, ca_first_sequence, "one sequence only"),
    (C.check_causal_average, ca_in_place, "in place"),
    (C.check_causal_average, ca_in_place_loop, "in place"),
    (C.check_causal_average, ca_weights, "weight matrix"),
    (C.check_causal_average, ca_loop_from_1, "position 0"),
    (C.check_causal_average, ca_whole_mean, "whole sequence"),
    (C.check_causal_average, ca_reference, "why_attention.causal_average"),
]

MISTAKES = from_table("00", CATALOGUE)
CORRECT = from_table("00", GOOD)
NAMED_AT_LEAST = 1.0  # every entry named when converted to this format
