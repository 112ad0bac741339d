"""Holdout for notebook 04 (third round), written from
notebooks/04_masking_and_cross_attention/04_masking_and_cross_attention.ipynb alone (without
reading the checks)."""

import math

import numpy as np
import torch

from tests.holdout._harness import Mistake, collector
from transformer_lab import scaled_dot_product_attention

MISTAKES: list[Mistake] = []
CORRECT: list[Mistake] = []
wrong = collector(MISTAKES, "04")
right = collector(CORRECT, "04")
# First shot, written without reading the checks: 39 of 42 named, 0 generic, 1 misleading,
# 2 passed; 41 of 42 named after the round's check work (29 November).
NAMED_AT_LEAST = 0.97


# ---------------------------------------------------------------- Exercise 1: causal_mask


@wrong("causal_mask", "upper|triu|transpos|lower|above|below")
def causal_mask_upper_triangle(T):
    return torch.ones(T, T, dtype=torch.bool).triu()


@wrong("causal_mask", "diagonal|itself|own position|own token|s <= t|s < t|strict")
def causal_mask_excludes_the_diagonal(T):
    positions = torch.arange(T)
    return positions[None, :] < positions[:, None]  # s < t: the token cannot see itself


@wrong("causal_mask", "next|diagonal|off-by-one|off by one|one position|one step|one key")
def causal_mask_lets_the_next_token_in(T):
    return torch.ones(T, T, dtype=torch.bool).tril(diagonal=1)


@wrong("causal_mask", "bool|dtype|float")
def causal_mask_returns_floats(T):
    return torch.tril(torch.ones(T, T))  # ones and zeros, but float32


@wrong("causal_mask", "invert|opposite|negat|convention|~|True = may|True means|flipped")
def causal_mask_true_marks_the_future(T):
    # nn.Transformer's convention (True = masked out) instead of the course's
    return torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)


@wrong("causal_mask", "size|shape|larger|longer|T=|T =|hard")
def causal_mask_hard_codes_eight_positions(T):
    return torch.ones(8, 8, dtype=torch.bool).tril()[:T, :T]  # the notebook's T = 8


@wrong("causal_mask", "numpy|ndarray|tensor|type")
def causal_mask_with_numpy(T):
    return np.tril(np.ones((T, T), dtype=bool))


@right("causal_mask")
def causal_mask_by_comparing_positions(T):
    t = torch.arange(T).unsqueeze(1)  # (T, 1) queries
    s = torch.arange(T).unsqueeze(0)  # (1, T) keys
    return s <= t


# ---------------------------------------------------------------- Exercise 2: future_leaks


def _inputs(T, C, seed):
    g = torch.Generator().manual_seed(seed)
    return g, torch.randn(T, C, generator=g)


@wrong("future_leaks", "exact|strict|toleran|atol|rtol|faint|small|tiny")
def future_leaks_with_default_allclose(attend, T, C, seed=0):
    g, x = _inputs(T, C, seed)
    base = attend(x)
    for j in range(1, T):
        changed = x.clone()
        changed[j] = torch.randn(C, generator=g)
        if not torch.allclose(attend(changed)[:j], base[:j]):
            return True
    return False


@wrong("future_leaks", "before|earlier|[:j]|prefix|whole|every position|all positions|itself")
def future_leaks_compares_the_whole_output(attend, T, C, seed=0):
    g, x = _inputs(T, C, seed)
    base = attend(x)
    for j in range(T):
        changed = x.clone()
        changed[j] = torch.randn(C, generator=g)
        if not torch.equal(attend(changed), base):
            return True
    return False


@wrong("future_leaks", "[:j]|itself|own|position j|off-by-one|off by one|including|before")
def future_leaks_includes_row_j(attend, T, C, seed=0):
    g, x = _inputs(T, C, seed)
    base = attend(x)
    for j in range(T):
        changed = x.clone()
        changed[j] = torch.randn(C, generator=g)
        if not torch.equal(attend(changed)[: j + 1], base[: j + 1]):
            return True
    return False


@wrong("future_leaks", "every|each|all|only the last|last token|one token|loop")
def future_leaks_only_changes_the_last_token(attend, T, C, seed=0):
    g, x = _inputs(T, C, seed)
    changed = x.clone()
    changed[-1] = torch.randn(C, generator=g)
    return not torch.equal(attend(changed)[:-1], attend(x)[:-1])


@wrong("future_leaks", "last|every|each|range|T - 1|T-1|off-by-one|off by one")
def future_leaks_skips_the_last_token(attend, T, C, seed=0):
    g, x = _inputs(T, C, seed)
    base = attend(x)
    for j in range(1, T - 1):  # one short
        changed = x.clone()
        changed[j] = torch.randn(C, generator=g)
        if not torch.equal(attend(changed)[:j], base[:j]):
            return True
    return False


@wrong("future_leaks", "clone|copy|in place|in-place|alias|accumulat|same tensor|restor")
def future_leaks_edits_x_without_copying(attend, T, C, seed=0):
    g, x = _inputs(T, C, seed)
    base = attend(x)
    for j in range(1, T):
        changed = x  # no copy: the earlier changes stay in x
        changed[j] = torch.randn(C, generator=g)
        if not torch.equal(attend(changed)[:j], base[:j]):
            return True
    return False


@wrong("future_leaks", "every|each|all|first|early|loop|return")
def future_leaks_returns_after_the_first_token(attend, T, C, seed=0):
    g, x = _inputs(T, C, seed)
    base = attend(x)
    for j in range(1, T):
        changed = x.clone()
        changed[j] = torch.randn(C, generator=g)
        if not torch.equal(attend(changed)[:j], base[:j]):
            return True
        else:
            return False
    return False


@wrong("future_leaks", "before|earlier|after|later|direction|past|[:j]")
def future_leaks_watches_the_later_outputs(attend, T, C, seed=0):
    g, x = _inputs(T, C, seed)
    base = attend(x)
    for j in range(T - 1):
        changed = x.clone()
        changed[j] = torch.randn(C, generator=g)
        if not torch.equal(attend(changed)[j + 1 :], base[j + 1 :]):
            return True
    return False


@wrong("future_leaks", "bool|Python|tensor|type")
def future_leaks_returns_a_tensor(attend, T, C, seed=0):
    g, x = _inputs(T, C, seed)
    base = attend(x)
    leak = torch.tensor(False)
    for j in range(1, T):
        changed = x.clone()
        changed[j] = torch.randn(C, generator=g)
        leak = leak | (attend(changed)[:j] != base[:j]).any()
    return leak


@right("future_leaks")
def future_leaks_changing_the_whole_future(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    before = attend(x)
    leaks = False
    for j in range(1, T):
        changed = x.clone()
        changed[j:] = torch.randn(T - j, C, generator=g)  # every token from j on
        after = attend(changed)
        leaks = leaks or not torch.allclose(after[:j], before[:j], atol=1e-7, rtol=0)
    return bool(leaks)


# ---------------------------------------------------------------- Exercise 3: padding_mask


@wrong("padding_mask", "<=|off-by-one|off by one|one extra|one too many|first pad|too long")
def padding_mask_with_less_or_equal(lengths, S):
    return (torch.arange(S)[None, :] <= lengths[:, None])[:, None, None, :]


@wrong("padding_mask", "shape|(B, 1, 1, S)|dimension|broadcast|4-d|4d|four")
def padding_mask_without_the_broadcast_dimensions(lengths, S):
    return torch.arange(S)[None, :] < lengths[:, None]  # (B, S)


@wrong("padding_mask", "shape|axis|quer|(B, 1, 1, S)|last dimension|keys")
def padding_mask_on_the_query_axis(lengths, S):
    return (torch.arange(S)[None, :] < lengths[:, None])[:, None, :, None]  # (B, 1, S, 1)


@wrong("padding_mask", "invert|opposite|negat|~|True at|True = may|flipped|padding positions")
def padding_mask_true_at_the_padding(lengths, S):
    return (torch.arange(S)[None, :] >= lengths[:, None])[:, None, None, :]


@wrong("padding_mask", "padded length|longest|max|S =|S=|ignor|shape")
def padding_mask_uses_the_longest_length_for_s(lengths, S):
    S = int(lengths.max())  # the batch's longest sequence instead of the padded length
    return (torch.arange(S)[None, :] < lengths[:, None])[:, None, None, :]


@wrong("padding_mask", "full|no padding|length S|length == S|entire|-0|every token")
def padding_mask_slices_off_the_padding_from_the_end(lengths, S):
    mask = torch.ones(len(lengths), 1, 1, S, dtype=torch.bool)
    for b, n in enumerate(lengths.tolist()):
        mask[b, 0, 0, -(S - n) :] = False  # -(0) == 0 masks everything when there is no padding
    return mask


@wrong("padding_mask", "in place|in-place|mutat|modif|input|caller|argument")
def padding_mask_unsqueezes_lengths_in_place(lengths, S):
    lengths.unsqueeze_(-1)  # (B, 1)
    return (torch.arange(S)[None, :] < lengths)[:, None, None, :]


@right("padding_mask")
def padding_mask_filled_in_a_loop(lengths, S):
    mask = torch.zeros(lengths.shape[0], 1, 1, S, dtype=torch.bool)
    for b in range(lengths.shape[0]):
        mask[b, 0, 0, : int(lengths[b])] = True
    return mask


# ---------------------------------------------------------------- Exercise 4: pad_and_truncate


def _check_max_len(max_len):
    if max_len < 1:
        raise ValueError(f"max_len must be at least 1, but received max_len={max_len}.")


@wrong("pad_and_truncate", "longest|L =|widest|batch|max_len|extra padding")
def pad_and_truncate_always_pads_to_max_len(sequences, max_len, pad_id):
    _check_max_len(max_len)
    kept = [list(s[:max_len]) for s in sequences]
    ids = torch.full((len(kept), max_len), pad_id, dtype=torch.long)
    for b, s in enumerate(kept):
        ids[b, : len(s)] = torch.tensor(s, dtype=torch.long)
    return ids, torch.tensor([len(s) for s in kept], dtype=torch.long)


@wrong("pad_and_truncate", "first|last|end|beginning|start")
def pad_and_truncate_keeps_the_last_tokens(sequences, max_len, pad_id):
    _check_max_len(max_len)
    kept = [list(s[-max_len:]) if len(s) > max_len else list(s) for s in sequences]
    L = max((len(s) for s in kept), default=0)
    ids = [s + [pad_id] * (L - len(s)) for s in kept]
    return torch.tensor(ids, dtype=torch.long), torch.tensor(
        [len(s) for s in kept], dtype=torch.long
    )


@wrong("pad_and_truncate", "left|front|beginning|start|end")
def pad_and_truncate_pads_on_the_left(sequences, max_len, pad_id):
    _check_max_len(max_len)
    kept = [list(s[:max_len]) for s in sequences]
    L = max((len(s) for s in kept), default=0)
    ids = [[pad_id] * (L - len(s)) + s for s in kept]
    return torch.tensor(ids, dtype=torch.long), torch.tensor(
        [len(s) for s in kept], dtype=torch.long
    )


@wrong("pad_and_truncate", "truncat|original|before|after")
def pad_and_truncate_lengths_before_truncation(sequences, max_len, pad_id):
    _check_max_len(max_len)
    lengths = [len(s) for s in sequences]
    kept = [list(s[:max_len]) for s in sequences]
    L = max((len(s) for s in kept), default=0)
    ids = [s + [pad_id] * (L - len(s)) for s in kept]
    return torch.tensor(ids, dtype=torch.long), torch.tensor(lengths, dtype=torch.long)


@wrong(
    "pad_and_truncate", "ValueError|raise|valid|max_len < 1|max_len=0|max_len = 0|negative|positive"
)
def pad_and_truncate_accepts_any_max_len(sequences, max_len, pad_id):
    kept = [list(s[:max_len]) for s in sequences]
    L = max((len(s) for s in kept), default=0)
    ids = [s + [pad_id] * (L - len(s)) for s in kept]
    return torch.tensor(ids, dtype=torch.long), torch.tensor(
        [len(s) for s in kept], dtype=torch.long
    )


@wrong("pad_and_truncate", "pad_id|pad id|padding id|padding value|padding token")
def pad_and_truncate_pads_with_zeros(sequences, max_len, pad_id):
    _check_max_len(max_len)
    kept = [list(s[:max_len]) for s in sequences]
    L = max((len(s) for s in kept), default=0)
    ids = torch.zeros(len(kept), L, dtype=torch.long)
    for b, s in enumerate(kept):
        ids[b, : len(s)] = torch.tensor(s, dtype=torch.long)
    return ids, torch.tensor([len(s) for s in kept], dtype=torch.long)


@wrong("pad_and_truncate", "long|dtype|int64|float")
def pad_and_truncate_fills_a_float_tensor(sequences, max_len, pad_id):
    _check_max_len(max_len)
    kept = [list(s[:max_len]) for s in sequences]
    L = max((len(s) for s in kept), default=0)
    ids = torch.zeros(len(kept), L) + pad_id  # float32
    for b, s in enumerate(kept):
        ids[b, : len(s)] = torch.tensor(s)
    return ids, torch.tensor([len(s) for s in kept])


@wrong("pad_and_truncate", "empty|long|dtype|float|length 0")
def pad_and_truncate_float_when_every_sequence_is_empty(sequences, max_len, pad_id):
    _check_max_len(max_len)
    kept = [list(s[:max_len]) for s in sequences]
    L = max((len(s) for s in kept), default=0)
    ids = torch.tensor([s + [pad_id] * (L - len(s)) for s in kept])  # [[], []] becomes float32
    return ids, torch.tensor([len(s) for s in kept])


@wrong("pad_and_truncate", "in place|in-place|mutat|modif|input|caller|argument|copy")
def pad_and_truncate_edits_the_callers_lists(sequences, max_len, pad_id):
    _check_max_len(max_len)
    for s in sequences:
        del s[max_len:]
    lengths = [len(s) for s in sequences]
    L = max(lengths, default=0)
    for s in sequences:
        s.extend([pad_id] * (L - len(s)))
    ids = torch.full((len(sequences), L), pad_id, dtype=torch.long)
    for b, s in enumerate(sequences):
        ids[b, : len(s)] = torch.tensor(s, dtype=torch.long)
    return ids, torch.tensor(lengths, dtype=torch.long)


@wrong("pad_and_truncate", "max_len=1|max_len = 1|max_len of 1|max_len 1|valid|allowed|raise")
def pad_and_truncate_rejects_max_len_one(sequences, max_len, pad_id):
    if max_len <= 1:
        raise ValueError(f"max_len must be greater than 1, but received max_len={max_len}.")
    kept = [list(s[:max_len]) for s in sequences]
    L = max((len(s) for s in kept), default=0)
    ids = [s + [pad_id] * (L - len(s)) for s in kept]
    return torch.tensor(ids, dtype=torch.long), torch.tensor(
        [len(s) for s in kept], dtype=torch.long
    )


@right("pad_and_truncate")
def pad_and_truncate_with_torch_full(sequences, max_len, pad_id):
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    lengths = torch.tensor([min(len(s), max_len) for s in sequences], dtype=torch.long)
    L = int(lengths.max()) if len(sequences) else 0
    ids = torch.full((len(sequences), L), pad_id, dtype=torch.long)
    for b, s in enumerate(sequences):
        n = int(lengths[b])
        if n:
            ids[b, :n] = torch.as_tensor(s[:n], dtype=torch.long)
    return ids, lengths


# ---------------------------------------------------------------- Exercise 5: cross_attention


@wrong(
    "cross_attention", "x_q|swap|queries from|keys from|values from|decoder|encoder|source|target"
)
def cross_attention_values_from_the_queries_sequence(x_q, x_kv, w_q, w_k, w_v, mask=None):
    # works only when T == S and C_q == C_kv
    return scaled_dot_product_attention(x_q @ w_q, x_kv @ w_k, x_q @ w_v, mask)


@wrong("cross_attention", "scale|sqrt|√|twice|double|temperature")
def cross_attention_scales_the_queries_again(x_q, x_kv, w_q, w_k, w_v, mask=None):
    q = x_q @ w_q / math.sqrt(w_q.shape[-1])  # the reference already divides by sqrt(D)
    return scaled_dot_product_attention(q, x_kv @ w_k, x_kv @ w_v, mask)


@wrong("cross_attention", "ignor|not passed|unused|not used|padding|masked keys|masked positions")
def cross_attention_drops_the_mask(x_q, x_kv, w_q, w_k, w_v, mask=None):
    return scaled_dot_product_attention(x_q @ w_q, x_kv @ w_k, x_kv @ w_v)


@wrong("cross_attention", "invert|opposite|negat|~|convention|True = may|flipped")
def cross_attention_inverts_the_mask(x_q, x_kv, w_q, w_k, w_v, mask=None):
    if mask is not None:
        mask = ~mask  # as for nn.MultiheadAttention, where True = masked
    return scaled_dot_product_attention(x_q @ w_q, x_kv @ w_k, x_kv @ w_v, mask)


@wrong("cross_attention", "transpos|(B, T, S)|shape|order|rows|columns")
def cross_attention_returns_the_weights_transposed(x_q, x_kv, w_q, w_k, w_v, mask=None):
    out, weights = scaled_dot_product_attention(x_q @ w_q, x_kv @ w_k, x_kv @ w_v, mask)
    return out, weights.transpose(-2, -1)  # (B, S, T), read as "keys by queries"


@wrong("cross_attention", "-inf|infinity|−∞|zero score|score of 0|score 0|e^0")
def cross_attention_masks_scores_with_zero(x_q, x_kv, w_q, w_k, w_v, mask=None):
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, 0.0)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


@wrong("cross_attention", "NaN|nan|fully masked|all keys|every key|all False|no key|empty")
def cross_attention_nan_when_a_row_is_fully_masked(x_q, x_kv, w_q, w_k, w_v, mask=None):
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # 0/0 where every key is masked
    return weights @ v, weights


@wrong("cross_attention", "dim|axis|over the queries|sum to one|sums to one|normalis|normaliz")
def cross_attention_softmax_over_the_queries(x_q, x_kv, w_q, w_k, w_v, mask=None):
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=1).nan_to_num(0.0)  # dim 1 of (B, T, S) is T
    return weights @ v, weights


@wrong("cross_attention", "broadcast|(T, S)|mask shape|shape of the mask|per batch|index")
def cross_attention_indexes_the_mask_per_batch(x_q, x_kv, w_q, w_k, w_v, mask=None):
    outs, weights = [], []
    for b in range(x_q.shape[0]):
        m = None if mask is None else mask[b]  # assumes the mask has a batch dimension
        o, w = scaled_dot_product_attention(x_q[b] @ w_q, x_kv[b] @ w_k, x_kv[b] @ w_v, m)
        outs.append(o)
        weights.append(w)
    return torch.stack(outs), torch.stack(weights)


@right("cross_attention")
def cross_attention_with_einsum(x_q, x_kv, w_q, w_k, w_v, mask=None):
    q = torch.einsum("btc,cd->btd", x_q, w_q)
    k = torch.einsum("bsc,cd->bsd", x_kv, w_k)
    v = torch.einsum("bsc,cd->bsd", x_kv, w_v)
    scores = torch.einsum("btd,bsd->bts", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # a fully masked row: zeros
    return torch.einsum("bts,bsd->btd", weights, v), weights


@right("cross_attention")
def cross_attention_with_the_reference(x_q, x_kv, w_q, w_k, w_v, mask=None):
    return scaled_dot_product_attention(x_q @ w_q, x_kv @ w_k, x_kv @ w_v, mask=mask)
