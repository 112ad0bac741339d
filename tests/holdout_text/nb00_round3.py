"""Holdout for notebook 00 (third round), written from
notebooks/00_tokens_and_embeddings/00_tokens_and_embeddings.ipynb alone (without reading the checks).

Each wrong entry is a complete student attempt that differs from a correct solution in the one way
its name says. The BPE attempts that need the other exercises (train_merges, encode) use correct
helpers (``_count_pairs``, ``_merge_pair``), as the notebook asks students to reuse their own.
"""

import torch
import torch.nn.functional as F

from tests.holdout._harness import Mistake, collector
from transformer_lab import bpe

MISTAKES: list[Mistake] = []
CORRECT: list[Mistake] = []
wrong = collector(MISTAKES, "00")
right = collector(CORRECT, "00")
# First shot, written without reading the checks: 33 of 38 named, 3 generic, 2 misleading,
# 0 passed; 38 of 38 named after the round's check work (29 November).
NAMED_AT_LEAST = 1.0


# ---------------------------------------------------------------- correct helpers for reuse


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


def _best_pair(counts):
    return min(counts, key=lambda p: (-counts[p], p))


def _token_bytes(merges):
    vocab = {b: bytes([b]) for b in range(256)}
    for i, (left, right) in enumerate(merges):
        vocab[256 + i] = vocab[left] + vocab[right]
    return vocab


# ---------------------------------------------------------------- Exercise 1: count_pairs


@wrong(
    "count_pairs",
    "weight|how often|frequen|multipl|occurrences of the word|word's count|word count",
)
def count_pairs_ignores_word_counts(words):
    counts = {}
    for word in words:
        for pair in zip(word, word[1:]):
            counts[pair] = counts.get(pair, 0) + 1
    return counts


@wrong("count_pairs", "overlap")
def count_pairs_skips_overlapping_pairs(words):
    # after counting a pair, jumps past both tokens, as a merge would
    counts = {}
    for word, n in words.items():
        i = 0
        while i < len(word) - 1:
            pair = (word[i], word[i + 1])
            counts[pair] = counts.get(pair, 0) + n
            i += 2 if word[i] == word[i + 1] else 1
    return counts


@wrong("count_pairs", "last|final|off-by-one|off by one|end of")
def count_pairs_misses_last_pair(words):
    counts = {}
    for word, n in words.items():
        for i in range(len(word) - 2):
            pair = (word[i], word[i + 1])
            counts[pair] = counts.get(pair, 0) + n
    return counts


@wrong("count_pairs", "boundar|across|between words|inside words|within words|inside a word")
def count_pairs_across_word_boundaries(words):
    # glues all the words into one sequence first
    seq, weights = [], []
    for word, n in words.items():
        seq.extend(word)
        weights.extend([n] * len(word))
    counts = {}
    for i in range(len(seq) - 1):
        pair = (seq[i], seq[i + 1])
        counts[pair] = counts.get(pair, 0) + weights[i]
    return counts


@wrong(
    "count_pairs",
    "accumul|overwr|+=|shared|several words|more than one word|two words|add up|adds up|summed",
)
def count_pairs_overwrites_instead_of_adding(words):
    counts = {}
    for word, n in words.items():
        seen = {}
        for pair in zip(word, word[1:]):
            seen[pair] = seen.get(pair, 0) + n
        counts.update(seen)  # a pair shared by two words keeps only the last word's count
    return counts


@right("count_pairs")
def count_pairs_counter(words):
    from collections import Counter

    counts = Counter()
    for word, n in words.items():
        for i in range(len(word) - 1):
            counts[word[i], word[i + 1]] += n
    return dict(counts)


# ---------------------------------------------------------------- Exercise 2: merge_pair


@wrong("merge_pair", "in place|in-place|unchanged|modif|mutat|copy|new list")
def merge_pair_edits_ids_in_place(ids, pair, new_id):
    i = 0
    while i < len(ids) - 1:
        if ids[i] == pair[0] and ids[i + 1] == pair[1]:
            ids[i : i + 2] = [new_id]
        i += 1
    return ids


@wrong(
    "merge_pair",
    "left to right|left-to-right|right to left|right-to-left|direction|from the left|from the right",
)
def merge_pair_scans_right_to_left(ids, pair, new_id):
    out, i = [], len(ids) - 1
    while i >= 0:
        if i > 0 and ids[i - 1] == pair[0] and ids[i] == pair[1]:
            out.append(new_id)
            i -= 2
        else:
            out.append(ids[i])
            i -= 1
    return out[::-1]


@wrong(
    "merge_pair",
    "both tokens|used up|consum|skip|advance|right token|second token|i += 2|twice|duplicat|kept",
)
def merge_pair_keeps_the_right_token(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
        else:
            out.append(ids[i])
        i += 1  # after a match, the right token should be skipped too
    return out


@wrong("merge_pair", "order|revers|(right, left)|swapp|(b, a)")
def merge_pair_ignores_pair_order(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) in (tuple(pair), tuple(pair)[::-1]):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


@wrong("merge_pair", "last|final|trailing|dropped|lost|end of the list")
def merge_pair_drops_the_last_token(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids) - 1:
        if ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


@right("merge_pair")
def merge_pair_skip_flag(ids, pair, new_id):
    out, skip = [], False
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


# ---------------------------------------------------------------- Exercise 3: train_merges


@wrong("train_merges", "tie|smallest|equal count|same count")
def train_merges_ties_to_first_seen_pair(text, n_merges):
    words = bpe.word_counts(text)
    merges = []
    for i in range(n_merges):
        counts = _count_pairs(words)
        if not counts:
            break
        pair = max(counts, key=counts.get)
        merges.append(pair)
        words = {tuple(_merge_pair(list(w), pair, 256 + i)): n for w, n in words.items()}
    return merges


@wrong("train_merges", "256|next id|new id|new token|token id|off-by-one|off by one")
def train_merges_new_ids_start_at_257(text, n_merges):
    words = bpe.word_counts(text)
    merges = []
    for i in range(n_merges):
        counts = _count_pairs(words)
        if not counts:
            break
        pair = _best_pair(counts)
        merges.append(pair)
        words = {tuple(_merge_pair(list(w), pair, 257 + i)): n for w, n in words.items()}
    return merges


@wrong("train_merges", "recount|after every merge|after each merge|each merge|again|updat|stale")
def train_merges_counts_only_once(text, n_merges):
    counts = _count_pairs(bpe.word_counts(text))
    ranked = sorted(counts, key=lambda p: (-counts[p], p))
    return ranked[:n_merges]


@wrong("train_merges", "stop|no pair|exhaust|run out|fewer|two tokens|empty|nothing left")
def train_merges_does_not_stop_when_no_pair_is_left(text, n_merges):
    words = bpe.word_counts(text)
    merges = []
    for i in range(n_merges):
        counts = _count_pairs(words)
        pair = _best_pair(counts)
        merges.append(pair)
        words = {tuple(_merge_pair(list(w), pair, 256 + i)): n for w, n in words.items()}
    return merges


@wrong("train_merges", "split_words|space|whitespace|str.split|split()")
def train_merges_splits_with_str_split(text, n_merges):
    from collections import Counter

    words = dict(Counter(tuple(w.encode("utf-8")) for w in text.split()))
    merges = []
    for i in range(n_merges):
        counts = _count_pairs(words)
        if not counts:
            break
        pair = _best_pair(counts)
        merges.append(pair)
        words = {tuple(_merge_pair(list(w), pair, 256 + i)): n for w, n in words.items()}
    return merges


@wrong(
    "train_merges",
    "weight|how often|frequen|occurrences of the word|word's count|word count|multipl",
)
def train_merges_forgets_word_counts(text, n_merges):
    words = list(bpe.word_counts(text))  # every distinct word once
    merges = []
    for i in range(n_merges):
        counts = _count_pairs({w: 1 for w in words})
        if not counts:
            break
        pair = _best_pair(counts)
        merges.append(pair)
        words = [tuple(_merge_pair(list(w), pair, 256 + i)) for w in words]
    return merges


@right("train_merges")
def train_merges_sorted_counts(text, n_merges):
    words = [(list(w), n) for w, n in bpe.word_counts(text).items()]
    merges = []
    while len(merges) < n_merges:
        counts = {}
        for w, n in words:
            for a, b in zip(w, w[1:]):
                counts[(a, b)] = counts.get((a, b), 0) + n
        if not counts:
            break
        pair = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        new_id = 256 + len(merges)
        merges.append(pair)
        words = [(_merge_pair(w, pair, new_id), n) for w, n in words]
    return merges


# ---------------------------------------------------------------- Exercise 4: encode (bpe_encode)


@wrong("bpe_encode", "order|learned|sequence|revers|earlier")
def encode_applies_merges_in_reverse(text, merges):
    out = []
    for word in bpe.split_words(text):
        ids = list(word.encode("utf-8"))
        for i in reversed(range(len(merges))):
            ids = _merge_pair(ids, merges[i], 256 + i)
        out.extend(ids)
    return out


@wrong(
    "bpe_encode",
    "boundar|across|split_words|between words|inside words|per word|each word|word by word",
)
def encode_merges_across_words(text, merges):
    ids = list(text.encode("utf-8"))
    for i, pair in enumerate(merges):
        ids = _merge_pair(ids, pair, 256 + i)
    return ids


@wrong(
    "bpe_encode",
    "utf-8|utf8|code point|ord(|unicode|non-ascii|beyond ascii|multi-byte|several bytes",
)
def encode_uses_code_points(text, merges):
    out = []
    for word in bpe.split_words(text):
        ids = [ord(ch) for ch in word]
        for i, pair in enumerate(merges):
            ids = _merge_pair(ids, pair, 256 + i)
        out.extend(ids)
    return out


@wrong("bpe_encode", "space|whitespace|split_words|newline|round trip|round-trip")
def encode_splits_with_str_split(text, merges):
    out = []
    for word in text.split():
        ids = list(word.encode("utf-8"))
        for i, pair in enumerate(merges):
            ids = _merge_pair(ids, pair, 256 + i)
        out.extend(ids)
    return out


@wrong(
    "bpe_encode",
    "chain|new token|merged token|earlier merge|built on|nested|created|later merge|occur",
)
def encode_only_merges_pairs_of_the_raw_bytes(text, merges):
    # "apply only the merges whose pair occurs" -- but decided on the bytes, before any merge
    out = []
    for word in bpe.split_words(text):
        ids = list(word.encode("utf-8"))
        present = set(zip(ids, ids[1:]))
        for i, pair in enumerate(merges):
            if tuple(pair) in present:
                ids = _merge_pair(ids, pair, 256 + i)
        out.extend(ids)
    return out


# ---------------------------------------------------------------- Exercise 5: decode (bpe_decode)


@wrong("bpe_decode", "join|together|once|separately|each token|split|all the bytes|whole")
def decode_each_token_separately(ids, merges):
    vocab = _token_bytes(merges)
    return "".join(vocab[i].decode("utf-8", errors="replace") for i in ids)


@wrong("bpe_decode", "replace|U+FFFD|\ufffd|invalid|incomplete|errors")
def decode_drops_invalid_bytes(ids, merges):
    vocab = _token_bytes(merges)
    return b"".join(vocab[i] for i in ids).decode("utf-8", errors="ignore")


@wrong("bpe_decode", "swap|revers|order|left token first|right before left")
def decode_swaps_left_and_right(ids, merges):
    vocab = {b: bytes([b]) for b in range(256)}
    for i, (left, right) in enumerate(merges):
        vocab[256 + i] = vocab[right] + vocab[left]
    return b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace")


@wrong("bpe_decode", "utf-8|utf8|latin|chr(|multi-byte|multibyte|beyond ascii|non-ascii|code point")
def decode_bytes_as_latin1(ids, merges):
    vocab = _token_bytes(merges)
    return "".join(chr(b) for b in b"".join(vocab[i] for i in ids))


@wrong("bpe_decode", "recurs|nested|expand|earlier merge|merged token|fully|built from|levels")
def decode_expands_only_one_level(ids, merges):
    out = bytearray()
    for i in ids:
        if i < 256:
            out.append(i)
        else:
            out.extend(merges[i - 256])  # assumes a merge always joins two bytes
    return bytes(out).decode("utf-8", errors="replace")


@right("bpe_decode")
def decode_recursive(ids, merges):
    def expand(t):
        if t < 256:
            return bytes([t])
        left, right = merges[t - 256]
        return expand(left) + expand(right)

    return b"".join(expand(t) for t in ids).decode("utf-8", errors="replace")


# ---------------------------------------------------------------- Exercise 6: one_hot_embed


@wrong("one_hot_embed", "num_classes|vocabulary size|vocab|number of classes|small ids|largest id")
def one_hot_embed_infers_num_classes(ids, w_emb):
    return F.one_hot(ids).to(w_emb.dtype) @ w_emb


@wrong("one_hot_embed", "dtype|float64|double|precision|float32")
def one_hot_embed_casts_to_float32(ids, w_emb):
    return F.one_hot(ids, num_classes=w_emb.shape[0]).float() @ w_emb.float()


@wrong("one_hot_embed", "grad|detach|backward")
def one_hot_embed_detaches(ids, w_emb):
    one_hot = F.one_hot(ids, num_classes=w_emb.shape[0]).to(w_emb.dtype)
    return one_hot @ w_emb.detach()


@wrong("one_hot_embed", "flatten|leading|batch|(...|ids' shape|shape of ids|reshape")
def one_hot_embed_flattens_the_ids(ids, w_emb):
    one_hot = F.one_hot(ids.reshape(-1), num_classes=w_emb.shape[0]).to(w_emb.dtype)
    return one_hot @ w_emb


@wrong("one_hot_embed", "sum|axis|over V|(..., C)|width C|wrong dim")
def one_hot_embed_sums_over_the_wrong_axis(ids, w_emb):
    one_hot = F.one_hot(ids, num_classes=w_emb.shape[0]).to(w_emb.dtype)
    return (one_hot.unsqueeze(-1) * w_emb).sum(dim=-1)  # meant dim=-2: the V axis


@right("one_hot_embed")
def one_hot_embed_einsum(ids, w_emb):
    one_hot = F.one_hot(ids, num_classes=w_emb.shape[0]).to(w_emb.dtype)
    return torch.einsum("...v,vc->...c", one_hot, w_emb)


# ---------------------------------------------------------------- Exercise 7: causal_average


@wrong("causal_average", "divid|t+1|t + 1|count|cumulative sum|normali|sum instead")
def causal_average_forgets_to_divide(x):
    T = x.shape[-2]
    A = torch.tril(torch.ones(T, T, dtype=x.dtype, device=x.device))
    return A @ x


@wrong("causal_average", "t+1|t + 1|its own count|row count|per row|each row|divid")
def causal_average_divides_by_T(x):
    T = x.shape[-2]
    A = torch.tril(torch.ones(T, T, dtype=x.dtype, device=x.device)) / T
    return A @ x


@wrong("causal_average", "future|triu|upper|lower|causal|later position")
def causal_average_upper_triangle(x):
    T = x.shape[-2]
    A = torch.triu(torch.ones(T, T, dtype=x.dtype, device=x.device))
    A = A / A.sum(dim=-1, keepdim=True)
    return A @ x


@wrong("causal_average", "dtype|float64|double|precision|float32")
def causal_average_in_float32(x):
    T = x.shape[-2]
    A = torch.tril(torch.ones(T, T))
    A = A / A.sum(dim=-1, keepdim=True)
    return A @ x.float()


@wrong("causal_average", "batch|dim -2|dim=-2|(B, T, C)|first dim|dim 0|shape[0]")
def causal_average_takes_T_from_dim0(x):
    T = x.shape[0]
    A = torch.tril(torch.ones(T, T, dtype=x.dtype, device=x.device))
    A = A / A.sum(dim=-1, keepdim=True)
    return A @ x


@wrong("causal_average", "in place|in-place|unchanged|modif|mutat|copy|overwr")
def causal_average_writes_into_x(x):
    T = x.shape[-2]
    A = torch.tril(torch.ones(T, T, dtype=x.dtype, device=x.device))
    A = A / A.sum(dim=-1, keepdim=True)
    x.copy_(A @ x)
    return x


@wrong("causal_average", "itself|including|current|diagonal|0..t|inclusive|own row|own position")
def causal_average_excludes_the_current_position(x):
    T = x.shape[-2]
    A = torch.tril(torch.ones(T, T, dtype=x.dtype, device=x.device), diagonal=-1)
    A = A / A.sum(dim=-1, keepdim=True).clamp(min=1)
    return A @ x


@right("causal_average")
def causal_average_cumsum(x):
    T = x.shape[-2]
    counts = torch.arange(1, T + 1, dtype=x.dtype, device=x.device).unsqueeze(-1)
    return x.cumsum(dim=-2) / counts
