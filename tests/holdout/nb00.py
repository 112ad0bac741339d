"""Holdout for notebook 00 (tokens and embeddings): wrong implementations written from the
notebook's exercise text (signatures, the stated BPE rules) before any check of notebook 00
existed (committed first, d240e55), and a second set written after the checks were tuned.

Caveat: the same person wrote these and, afterwards, the checks, so this set measures less
independence than the other holdout modules.

Figures (named / generic / misleading / passed):
  the first set (41 mistakes), on the checks as first written:   37 / 1 / 1 / 2
  - misleading: merge_pair without the skip was named "new_id plus a token" (true, but it did not
    say "skip"); generic: one_hot built with C classes crashed with PyTorch's message;
    passed: encode over the whole text (the learned merges never cross a word boundary, so no
    case told it apart) and one_hot(ids) @ w_emb[:max+1], which is not a mistake at all (same
    values and gradient) and was removed: 40 left.
  - tuning: the merge message says "skip both tokens", an encode case whose merges would cross
    words, a hint for one_hot's "smaller than num_classes" error.
  after tuning, the first set (40):                                40 / 0 / 0 / 0
  written after tuning (11, below the marker), measured once:       9 / 2 / 0 / 0 (82%)
  - generic: pairs weighted by the word's length instead of its count; decoding two tokens at a
    time (the message shows the broken characters but names no cause). Not tuned on.
  the whole module, as committed:                                 49 / 2 / 0 / 0 (96%)
"""

from __future__ import annotations

import torch.nn.functional as F

from tests.holdout._harness import collector
from transformer_lab.bpe import split_words, word_counts

MISTAKES: list = []
wrong = collector(MISTAKES, "00")
NAMED_AT_LEAST = 1.0  # 51 of 51 (was 50): count probes name pairs weighted by word length
# (issue 39; that entry was tuned on, so it no longer measures independence)


# ---------------------------------------------------------------- helpers a student has right
def _pairs(words):
    counts = {}
    for word, n in words.items():
        for pair in zip(word, word[1:]):
            counts[pair] = counts.get(pair, 0) + n
    return counts


def _merge(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _vocab(merges):
    vocab = {i: bytes([i]) for i in range(256)}
    for i, (a, b) in enumerate(merges):
        vocab[256 + i] = vocab[a] + vocab[b]
    return vocab


# ---------------------------------------------------------------- count_pairs
@wrong("count_pairs", "occur|frequency|count of the word|weight")
def cp_ignores_word_counts(words):
    counts = {}
    for word in words:
        for pair in zip(word, word[1:]):
            counts[pair] = counts.get(pair, 0) + 1
    return counts


@wrong("count_pairs", "overlap|twice|aaa|every position")
def cp_skips_overlaps(words):
    counts = {}
    for word, n in words.items():
        i = 0
        while i < len(word) - 1:
            pair = (word[i], word[i + 1])
            counts[pair] = counts.get(pair, 0) + n
            i += 2 if word[i] == word[i + 1] else 1  # "a a a" counted once
    return counts


@wrong("count_pairs", "once per word|distinct|set|each occurrence")
def cp_set_per_word(words):
    counts = {}
    for word, n in words.items():
        for pair in set(zip(word, word[1:])):
            counts[pair] = counts.get(pair, 0) + n
    return counts


@wrong("count_pairs", "last pair|range|end|every adjacent")
def cp_misses_last_pair(words):
    counts = {}
    for word, n in words.items():
        for i in range(len(word) - 2):
            pair = (word[i], word[i + 1])
            counts[pair] = counts.get(pair, 0) + n
    return counts


@wrong("count_pairs", "boundar|across|between words")
def cp_joins_words(words):
    seq = [t for word, n in words.items() for _ in range(n) for t in word]
    counts = {}
    for pair in zip(seq, seq[1:]):
        counts[pair] = counts.get(pair, 0) + 1
    return counts


@wrong("count_pairs", "order|(left, right)|reversed|swap")
def cp_reversed_pairs(words):
    counts = {}
    for word, n in words.items():
        for a, b in zip(word, word[1:]):
            counts[(b, a)] = counts.get((b, a), 0) + n
    return counts


# ---------------------------------------------------------------- merge_pair
@wrong("merge_pair", "overlap|left to right|aaa|skip")
def mp_no_skip(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
            i += 1  # forgot to jump over the second token
        else:
            out.append(ids[i])
            i += 1
    return out


@wrong("merge_pair", "right to left|from the left|left to right")
def mp_right_to_left(ids, pair, new_id):
    out, i = [], len(ids) - 1
    while i >= 0:
        if i >= 1 and (ids[i - 1], ids[i]) == tuple(pair):
            out.append(new_id)
            i -= 2
        else:
            out.append(ids[i])
            i -= 1
    return out[::-1]


@wrong("merge_pair", "first occurrence|every occurrence|all occurrences")
def mp_first_only(ids, pair, new_id):
    ids = list(ids)
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == tuple(pair):
            return ids[:i] + [new_id] + ids[i + 2 :]
    return ids


@wrong("merge_pair", "last token|end|last")
def mp_drops_last(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out  # the last token is lost when it is not part of a pair


@wrong("merge_pair", "in place|changed its input")
def mp_in_place(ids, pair, new_id):
    i = 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) == tuple(pair):
            ids[i : i + 2] = [new_id]
        i += 1
    return ids


@wrong("merge_pair", "order|(left, right)|reversed|either order")
def mp_either_order(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and {ids[i], ids[i + 1]} == set(pair) and ids[i] != ids[i + 1]:
            out.append(new_id)
            i += 2
        elif i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


# ---------------------------------------------------------------- train_merges
def _train(text, n_merges, pick, words=None, recount=True):
    words = dict(word_counts(text)) if words is None else words
    merges = []
    counts = _pairs(words)
    for i in range(n_merges):
        if recount:
            counts = _pairs(words)
        if not counts:
            break
        pair = pick(counts)
        if pair is None:
            break
        merges.append(pair)
        new = {}
        for word, n in words.items():
            key = tuple(_merge(list(word), pair, 256 + i))
            new[key] = new.get(key, 0) + n
        words = new
        if not recount:
            counts.pop(pair, None)
    return merges


@wrong("train_merges", "tie|smallest|largest pair")
def tm_ties_to_largest(text, n_merges):
    return _train(text, n_merges, lambda c: max(c, key=lambda p: (c[p], p)))


@wrong("train_merges", "tie|first seen|smallest|order")
def tm_ties_first_seen(text, n_merges):
    return _train(text, n_merges, lambda c: max(c, key=c.get))


@wrong("train_merges", "tie|string|bytes|smallest")
def tm_ties_by_text(text, n_merges):
    def pick(c):
        return min(c, key=lambda p: (-c[p], str(p)))

    return _train(text, n_merges, pick)


@wrong("train_merges", "boundar|across|split|words")
def tm_whole_text_one_word(text, n_merges):
    return _train(text, n_merges, lambda c: min(c, key=lambda p: (-c[p], p)),
                  words={tuple(text.encode("utf-8")): 1})  # fmt: skip


@wrong("train_merges", "recount|update|stale|every merge|again")
def tm_counts_once(text, n_merges):
    return _train(text, n_merges, lambda c: min(c, key=lambda p: (-c[p], p)), recount=False)


@wrong("train_merges", "id|256|new token|numbered")
def tm_ids_from_255(text, n_merges):
    words = dict(word_counts(text))
    merges = []
    for i in range(n_merges):
        counts = _pairs(words)
        if not counts:
            break
        pair = min(counts, key=lambda p: (-counts[p], p))
        merges.append(pair)
        words = {tuple(_merge(list(w), pair, 255 + i)): n for w, n in words.items()}
    return merges


@wrong("train_merges", "count 1|once|stop|fewer|at least")
def tm_stops_at_count_one(text, n_merges):
    def pick(c):
        pair = min(c, key=lambda p: (-c[p], p))
        return pair if c[pair] > 1 else None

    return _train(text, n_merges, pick)


@wrong("train_merges", "one too many|n_merges|number of merges|fewer|more")
def tm_off_by_one(text, n_merges):
    return _train(text, n_merges + 1, lambda c: min(c, key=lambda p: (-c[p], p)))


@wrong("train_merges", "characters|bytes|utf-8|encode")
def tm_code_points(text, n_merges):
    words = {}
    for w in split_words(text):
        key = tuple(ord(ch) for ch in w)
        words[key] = words.get(key, 0) + 1
    return _train(text, n_merges, lambda c: min(c, key=lambda p: (-c[p], p)), words=words)


# ---------------------------------------------------------------- encode
@wrong("bpe_encode", "order|learned|first merge|rank")
def enc_merges_reversed(text, merges):
    out = []
    for word in split_words(text):
        ids = list(word.encode("utf-8"))
        for i in reversed(range(len(merges))):
            ids = _merge(ids, merges[i], 256 + i)
        out += ids
    return out


@wrong("bpe_encode", "unknown|unseen|drop|bytes|never seen")
def enc_drops_unseen(text, merges):
    out = []
    for word in split_words(text):
        if not word.isascii():
            continue  # characters never seen: skip them
        ids = list(word.encode("utf-8"))
        for i, pair in enumerate(merges):
            ids = _merge(ids, pair, 256 + i)
        out += ids
    return out


@wrong("bpe_encode", "boundar|across|words|split")
def enc_no_split(text, merges):
    ids = list(text.encode("utf-8"))
    for i, pair in enumerate(merges):
        ids = _merge(ids, pair, 256 + i)
    return ids


@wrong("bpe_encode", "space|whitespace|split")
def enc_str_split(text, merges):
    out = []
    for word in text.split():
        ids = list(word.encode("utf-8"))
        for i, pair in enumerate(merges):
            ids = _merge(ids, pair, 256 + i)
        out += ids
    return out


@wrong("bpe_encode", "once|every merge|repeated|only one pass|again")
def enc_one_merge_per_word(text, merges):
    out = []
    rank = {tuple(p): 256 + i for i, p in enumerate(merges)}
    for word in split_words(text):
        ids = list(word.encode("utf-8"))
        found = [rank[p] for p in zip(ids, ids[1:]) if p in rank]
        if found:
            best = min(found)
            ids = _merge(ids, merges[best - 256], best)  # stops after the first merge
        out += ids
    return out


@wrong("bpe_encode", "code point|ord|bytes|utf-8")
def enc_code_points(text, merges):
    out = []
    for word in split_words(text):
        ids = [ord(ch) for ch in word]
        for i, pair in enumerate(merges):
            ids = _merge(ids, pair, 256 + i)
        out += ids
    return out


# ---------------------------------------------------------------- decode
@wrong("bpe_decode", "space|join")
def dec_joins_with_spaces(ids, merges):
    vocab = _vocab(merges)
    return " ".join(vocab[i].decode("utf-8", errors="replace") for i in ids)


@wrong("bpe_decode", "per token|each token|partial|split inside|bytes first|join the bytes")
def dec_each_token(ids, merges):
    vocab = _vocab(merges)
    return "".join(vocab[i].decode("utf-8", errors="replace") for i in ids)


@wrong("bpe_decode", "ignore|drop|replace|U+FFFD|errors")
def dec_ignores_errors(ids, merges):
    vocab = _vocab(merges)
    return b"".join(vocab[i] for i in ids).decode("utf-8", errors="ignore")


@wrong("bpe_decode", "latin|utf-8|chr|bytes")
def dec_chr(ids, merges):
    vocab = _vocab(merges)
    return "".join(chr(b) for i in ids for b in vocab[i])


@wrong("bpe_decode", "strip|space|whitespace")
def dec_strips(ids, merges):
    vocab = _vocab(merges)
    return b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace").strip()


@wrong("bpe_decode", "order|reversed|swap|(left, right)")
def dec_vocab_swapped(ids, merges):
    vocab = {i: bytes([i]) for i in range(256)}
    for i, (a, b) in enumerate(merges):
        vocab[256 + i] = vocab[b] + vocab[a]
    return b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace")


# ---------------------------------------------------------------- one_hot_embed
@wrong("one_hot_embed", "transpose|(V, C)|rows|columns")
def emb_transposed(ids, w_emb):
    return (F.one_hot(ids, w_emb.shape[1]).float() @ w_emb.T).contiguous()


@wrong("one_hot_embed", "gradient|grad|detach")
def emb_detached(ids, w_emb):
    return (F.one_hot(ids, w_emb.shape[0]).float() @ w_emb.detach()).detach()


@wrong("one_hot_embed", "off by one|shift|id - 1|index")
def emb_off_by_one(ids, w_emb):
    return F.one_hot((ids - 1) % w_emb.shape[0], w_emb.shape[0]).float() @ w_emb


@wrong("one_hot_embed", "dtype|float|long|int")
def emb_integer_product(ids, w_emb):
    return F.one_hot(ids, w_emb.shape[0]) @ w_emb.round().long()


@wrong("one_hot_embed", "sum|batch|shape|flatten")
def emb_sums_sequence(ids, w_emb):
    return (F.one_hot(ids, w_emb.shape[0]).float() @ w_emb).sum(dim=-2)


@wrong("one_hot_embed", "last|batch|first|shape")
def emb_first_sequence_only(ids, w_emb):
    flat = ids.reshape(-1, ids.shape[-1])[0]
    return F.one_hot(flat, w_emb.shape[0]).float() @ w_emb


@wrong("one_hot_embed", "sum|scale|count|constant|factor")
def emb_scaled_by_width(ids, w_emb):
    return F.one_hot(ids, w_emb.shape[0]).float() @ w_emb * w_emb.shape[1] ** 0.5


# ================================================================ written after tuning
@wrong("count_pairs", "boundar|across|inside each word")
def cp2_pairs_with_space_between_words(words):
    counts = {}
    keys = list(words)
    for word, n in words.items():
        for pair in zip(word, word[1:]):
            counts[pair] = counts.get(pair, 0) + n
    for a, b in zip(keys, keys[1:]):  # "the last letter of a word and the next word's first"
        if a and b:
            counts[(a[-1], b[0])] = counts.get((a[-1], b[0]), 0) + 1
    return counts


@wrong("count_pairs", "frequency|occurs|count n|not 1")
def cp2_counts_words_by_length(words):
    counts = {}
    for word in words:
        for pair in zip(word, word[1:]):
            counts[pair] = counts.get(pair, 0) + len(word)
    return counts


@wrong("merge_pair", "first occurrence|every occurrence")
def mp2_str_replace_once(ids, pair, new_id):
    out = list(ids)
    for i in range(len(out) - 1):
        if out[i] == pair[0] and out[i + 1] == pair[1]:
            out[i : i + 2] = [new_id]
            break
    return out


@wrong("merge_pair", "overlap|skip|left to right")
def mp2_merge_then_rescan_same_spot(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 1
            if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
                continue  # forgot that ids[i] was used
            i += 1
        else:
            out.append(ids[i])
            i += 1
    return out


@wrong("train_merges", "tie|smallest")
def tm2_ties_to_most_recent_token(text, n_merges):
    # among equal counts prefer the pair whose left token is newest
    return _train(text, n_merges, lambda c: min(c, key=lambda p: (-c[p], -p[0], p[1])))


@wrong("train_merges", "recount|stale|no word|occurs in no")
def tm2_words_not_updated(text, n_merges):
    words = dict(word_counts(text))
    merges = []
    for _ in range(n_merges):
        counts = _pairs(words)
        for done in merges:
            counts.pop(done, None)
        if not counts:
            break
        merges.append(min(counts, key=lambda p: (-counts[p], p)))
    return merges  # the words are never merged: the same counts every time


@wrong("bpe_encode", "order|learned|every learned merge")
def enc2_merges_sorted(text, merges):
    order = sorted(range(len(merges)), key=lambda i: merges[i])  # "sorted for speed"
    out = []
    for word in split_words(text):
        ids = list(word.encode("utf-8"))
        for i in order:
            ids = _merge(ids, merges[i], 256 + i)
        out += ids
    return out


@wrong("bpe_encode", "boundar|words|split")
def enc2_lines_not_words(text, merges):
    out = []
    for line in text.splitlines(keepends=True):
        ids = list(line.encode("utf-8"))
        for i, pair in enumerate(merges):
            ids = _merge(ids, pair, 256 + i)
        out += ids
    return out


@wrong("bpe_decode", "each token|join the bytes|U+FFFD|replace")
def dec2_decode_pairs_of_tokens(ids, merges):
    vocab = _vocab(merges)
    parts = [b"".join(vocab[i] for i in ids[k : k + 2]) for k in range(0, len(ids), 2)]
    return "".join(p.decode("utf-8", errors="replace") for p in parts)


@wrong("one_hot_embed", "gradient|detach|numpy")
def emb2_through_numpy(ids, w_emb):
    import torch

    one_hot = F.one_hot(ids, w_emb.shape[0]).numpy().astype("float32")
    return torch.from_numpy(one_hot @ w_emb.detach().numpy())


@wrong("one_hot_embed", "transpose|W_emb.T|column")
def emb2_transposed_square(ids, w_emb):
    V, C = w_emb.shape
    if V == C:
        return F.one_hot(ids, V).to(w_emb.dtype) @ w_emb.T
    return F.one_hot(ids, V).to(w_emb.dtype) @ w_emb
