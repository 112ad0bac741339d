"""Holdout for notebook 00 (fourth round), written from
notebooks/00_tokens_and_embeddings/00_tokens_and_embeddings.ipynb alone (without reading the checks)."""

import torch
import torch.nn.functional as F

from tests.holdout._harness import Mistake, collector
from transformer_lab import bpe

MISTAKES: list[Mistake] = []
CORRECT: list[Mistake] = []
wrong = collector(MISTAKES, "00")
right = collector(CORRECT, "00")
# Written after rounds 2 and 3 had tuned the checks, and measured once, never tuned on: the
# forecast for a new class. First shot 27 of 28 named, 0 generic, 1 misleading, 0 passed.
NAMED_AT_LEAST = 0.96


# --- correct helpers the multi-step attempts build on ------------------------------------------


def _count_pairs(words):
    counts = {}
    for word, n in words.items():
        for pair in zip(word, word[1:]):
            counts[pair] = counts.get(pair, 0) + n
    return counts


def _merge_pair(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _best(counts):
    return min(counts, key=lambda p: (-counts[p], p))


def _token_bytes(merges):
    table = {i: bytes([i]) for i in range(256)}
    for i, (left, right) in enumerate(merges):
        table[256 + i] = table[left] + table[right]
    return table


# --- Exercise 1: count_pairs ------------------------------------------------------------------


@wrong("count_pairs", "weight|frequen|how often|multipl|word's count|word count")
def count_pairs_ignores_word_counts(words):
    counts = {}
    for word in words:
        for pair in zip(word, word[1:]):
            counts[pair] = counts.get(pair, 0) + 1
    return counts


@wrong("count_pairs", "overlap|every adjacent|skip|step")
def count_pairs_steps_by_two(words):
    counts = {}
    for word, n in words.items():
        for i in range(0, len(word) - 1, 2):  # walks the word pair by pair, like the merge
            pair = (word[i], word[i + 1])
            counts[pair] = counts.get(pair, 0) + n
    return counts


@wrong("count_pairs", "last|final|off-by-one|off by one|miss")
def count_pairs_range_misses_last_pair(words):
    counts = {}
    for word, n in words.items():
        for i in range(len(word) - 2):
            pair = (word[i], word[i + 1])
            counts[pair] = counts.get(pair, 0) + n
    return counts


@wrong("count_pairs", "once|twice|repeat|each occurrence|per occurrence|overlap")
def count_pairs_counts_each_pair_once_per_word(words):
    counts = {}
    for word, n in words.items():
        for pair in set(zip(word, word[1:])):
            counts[pair] = counts.get(pair, 0) + n
    return counts


@right("count_pairs")
def count_pairs_with_counter(words):
    from collections import Counter

    counts = Counter()
    for word, n in words.items():
        for i in range(len(word) - 1):
            counts[word[i], word[i + 1]] += n
    return dict(counts)


# --- Exercise 2: merge_pair -------------------------------------------------------------------


@wrong("merge_pair", "in place|in-place|new list|unchanged|mutat|modif|copy")
def merge_pair_edits_ids_in_place(ids, pair, new_id):
    i = 0
    while i < len(ids) - 1:
        if ids[i] == pair[0] and ids[i + 1] == pair[1]:
            ids[i : i + 2] = [new_id]
        i += 1
    return ids


@wrong("merge_pair", "both|used up|skip|overlap|advance|consum")
def merge_pair_advances_one_after_match(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
        else:
            out.append(ids[i])
        i += 1  # forgot that the right token is used up too
    return out


@wrong("merge_pair", "last|final|drop|lost|tail|missing")
def merge_pair_drops_last_unmatched_token(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


@wrong("merge_pair", "every|first|only one|all occurrences|each occurrence|remaining")
def merge_pair_replaces_first_occurrence_only(ids, pair, new_id):
    out = list(ids)
    for i in range(len(out) - 1):
        if (out[i], out[i + 1]) == tuple(pair):
            return out[:i] + [new_id] + out[i + 2 :]
    return out


# --- Exercise 3: train_merges -----------------------------------------------------------------


@wrong("train_merges", "tie|smallest|min|equal")
def train_merges_max_breaks_ties_by_insertion_order(text, n_merges):
    words = bpe.word_counts(text)
    merges = []
    for i in range(n_merges):
        counts = _count_pairs(words)
        if not counts:
            break
        best = max(counts, key=counts.get)
        merges.append(best)
        words = {tuple(_merge_pair(list(w), best, 256 + i)): n for w, n in words.items()}
    return merges


@wrong("train_merges", "256|new id|next id|numbering|offset|fresh id")
def train_merges_new_ids_start_at_257(text, n_merges):
    words = bpe.word_counts(text)
    merges = []
    for _ in range(n_merges):
        counts = _count_pairs(words)
        if not counts:
            break
        best = _best(counts)
        merges.append(best)
        new_id = 256 + len(merges)  # appended first, so this is 257 for merge 0
        words = {tuple(_merge_pair(list(w), best, new_id)): n for w, n in words.items()}
    return merges


@wrong("train_merges", "recount|after each merge|after every merge|stale|again")
def train_merges_counts_pairs_only_once(text, n_merges):
    words = bpe.word_counts(text)
    counts = _count_pairs(words)
    merges = []
    for i in range(n_merges):
        if not counts:
            break
        best = _best(counts)
        merges.append(best)
        words = {tuple(_merge_pair(list(w), best, 256 + i)): n for w, n in words.items()}
        del counts[best]
    return merges


@wrong("train_merges", "stop|no pair|empty|nothing left|run out|fewer")
def train_merges_never_stops_early(text, n_merges):
    words = bpe.word_counts(text)
    merges = []
    for i in range(n_merges):
        counts = _count_pairs(words)
        best = _best(counts)  # fails once no word has two tokens left
        merges.append(best)
        words = {tuple(_merge_pair(list(w), best, 256 + i)): n for w, n in words.items()}
    return merges


@wrong("train_merges", "update|never merged|same pair|repeat|store|discard")
def train_merges_discards_merged_words(text, n_merges):
    words = bpe.word_counts(text)
    merges = []
    for i in range(n_merges):
        counts = _count_pairs(words)
        if not counts:
            break
        best = _best(counts)
        merges.append(best)
        for w in words:
            _merge_pair(list(w), best, 256 + i)  # result thrown away
    return merges


# --- Exercise 4: encode -----------------------------------------------------------------------


@wrong("bpe_encode", "order|learned|revers|rank")
def encode_applies_merges_in_reverse(text, merges):
    out = []
    for word in bpe.split_words(text):
        ids = list(word.encode("utf-8"))
        for i in reversed(range(len(merges))):
            ids = _merge_pair(ids, merges[i], 256 + i)
        out += ids
    return out


@wrong("bpe_encode", "boundar|across|split_words|within|inside")
def encode_merges_across_words(text, merges):
    ids = list(text.encode("utf-8"))
    for i, pair in enumerate(merges):
        ids = _merge_pair(ids, pair, 256 + i)
    return ids


@wrong("bpe_encode", "utf|byte|ord|unicode|code point|ascii")
def encode_uses_code_points_not_bytes(text, merges):
    out = []
    for word in bpe.split_words(text):
        ids = [ord(c) for c in word]
        for i, pair in enumerate(merges):
            ids = _merge_pair(ids, pair, 256 + i)
        out += ids
    return out


@wrong("bpe_encode", "space|whitespace|split_words|str.split")
def encode_splits_with_str_split(text, merges):
    out = []
    for word in text.split():
        ids = list(word.encode("utf-8"))
        for i, pair in enumerate(merges):
            ids = _merge_pair(ids, pair, 256 + i)
        out += ids
    return out


@right("bpe_encode")
def encode_lowest_rank_pair_first(text, merges):
    rank = {tuple(p): i for i, p in enumerate(merges)}
    out = []
    for word in bpe.split_words(text):
        ids = list(word.encode("utf-8"))
        while len(ids) > 1:
            pairs = [p for p in zip(ids, ids[1:]) if p in rank]
            if not pairs:
                break
            best = min(pairs, key=rank.get)
            ids = _merge_pair(ids, best, 256 + rank[best])
        out += ids
    return out


# --- Exercise 5: decode -----------------------------------------------------------------------


@wrong("bpe_decode", "join|separately|each token|per token|together|split across|one by one")
def decode_each_token_separately(ids, merges):
    table = _token_bytes(merges)
    return "".join(table[i].decode("utf-8", errors="replace") for i in ids)


@wrong("bpe_decode", "replace|fffd|�|ignore|invalid|drop")
def decode_ignores_invalid_bytes(ids, merges):
    table = _token_bytes(merges)
    return b"".join(table[i] for i in ids).decode("utf-8", errors="ignore")


@wrong("bpe_decode", "order|left|right|revers|swap")
def decode_right_token_first(ids, merges):
    table = {i: bytes([i]) for i in range(256)}
    for i, (left, right) in enumerate(merges):
        table[256 + i] = table[right] + table[left]
    return b"".join(table[i] for i in ids).decode("utf-8", errors="replace")


@wrong("bpe_decode", "recurs|nested|expand|merged token|later merge|all the way")
def decode_expands_one_level_only(ids, merges):
    out = []
    for i in ids:
        if i < 256:
            out.append(i)
        else:
            left, right = merges[i - 256]
            out += [left, right]
    return bytes(out).decode("utf-8", errors="replace")


@right("bpe_decode")
def decode_recursive(ids, merges):
    def expand(i):
        if i < 256:
            return [i]
        left, right = merges[i - 256]
        return expand(left) + expand(right)

    return bytes(b for i in ids for b in expand(i)).decode("utf-8", errors="replace")


# --- Exercise 6: one_hot_embed ----------------------------------------------------------------


@wrong("one_hot_embed", "num_classes|vocabulary|vocab size|number of classes|largest id|max")
def one_hot_embed_infers_num_classes(ids, w_emb):
    return F.one_hot(ids).to(w_emb.dtype) @ w_emb


@wrong("one_hot_embed", "grad|detach")
def one_hot_embed_detaches_the_table(ids, w_emb):
    V = w_emb.shape[0]
    return F.one_hot(ids, num_classes=V).to(w_emb.dtype) @ w_emb.detach()


@wrong("one_hot_embed", "dtype|float64|double|float32|precision")
def one_hot_embed_casts_to_float32(ids, w_emb):
    V = w_emb.shape[0]
    return F.one_hot(ids, num_classes=V).float() @ w_emb.float()


# --- Exercise 7: causal_average ---------------------------------------------------------------


@wrong("causal_average", "t+1|t + 1|divid|number of|denominator|1/t|1 / t")
def causal_average_divides_by_T(x):
    T = x.shape[-2]
    A = torch.tril(torch.ones(T, T, dtype=x.dtype)) / T
    return A @ x


@wrong("causal_average", "future|triu|lower|upper|later")
def causal_average_uses_triu(x):
    T = x.shape[-2]
    A = torch.triu(torch.ones(T, T, dtype=x.dtype))
    A = A / A.sum(dim=1, keepdim=True)
    return A @ x


@wrong("causal_average", "in place|in-place|unchanged|modif|mutat|copy|clone")
def causal_average_cumsum_in_place(x):
    T = x.shape[-2]
    out = x.cumsum_(dim=-2)
    out /= torch.arange(1, T + 1, dtype=x.dtype)[:, None]
    return out


@wrong("causal_average", "batch|3-d|3d|(b, t, c)|leading|dim 0|shape[0]")
def causal_average_takes_T_from_dim0(x):
    T = x.shape[0]
    A = torch.tril(torch.ones(T, T, dtype=x.dtype))
    A = A / A.sum(dim=1, keepdim=True)
    return A @ x if x.dim() == 2 else torch.einsum("st,t...->s...", A, x)


@right("causal_average")
def causal_average_cumsum(x):
    counts = torch.arange(1, x.shape[-2] + 1, dtype=x.dtype, device=x.device)
    return x.cumsum(dim=-2) / counts[:, None]
