"""Holdout for notebook 04 (fourth round), written from
notebooks/04_masking_and_cross_attention/04_masking_and_cross_attention.ipynb alone (without reading
the checks)."""

import math

import torch

from tests.holdout._harness import Mistake, collector
from transformer_lab import scaled_dot_product_attention

MISTAKES: list[Mistake] = []
CORRECT: list[Mistake] = []
wrong = collector(MISTAKES, "04")
right = collector(CORRECT, "04")
# Written after rounds 2 and 3 had tuned the checks, and measured once, never tuned on: the
# forecast for a new class. First shot 31 of 33 named, 0 generic, 2 misleading, 0 passed.
NAMED_AT_LEAST = 0.93


# --- Exercise 1: causal_mask(T) -------------------------------------------------------------------


@wrong("causal_mask", "upper|lower|transpos|triang|future")
def causal_upper_triangle(T):
    return torch.ones(T, T, dtype=torch.bool).triu()


@wrong("causal_mask", "diagonal|itself|own position|self")
def causal_excludes_diagonal(T):
    return torch.ones(T, T, dtype=torch.bool).tril(diagonal=-1)


@wrong("causal_mask", "diagonal|off-by-one|off by one|next|future")
def causal_one_step_ahead(T):
    return torch.ones(T, T, dtype=torch.bool).tril(diagonal=1)


@wrong("causal_mask", "bool|dtype|float")
def causal_float_ones(T):
    return torch.ones(T, T).tril()


@wrong("causal_mask", "invert|negat|opposite|flip|~|convention")
def causal_true_means_blocked(T):
    return torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)


@wrong("causal_mask", "size|shape|length|larger|long")
def causal_hard_coded_max_8(T):
    return torch.ones(8, 8, dtype=torch.bool).tril()[:T, :T]


@right("causal_mask")
def causal_by_arange_comparison(T):
    t = torch.arange(T)
    return t[None, :] <= t[:, None]


# --- Exercise 2: future_leaks(attend, T, C, seed=0) -----------------------------------------------


@wrong("future_leaks", "exact|strict|toleran|allclose|atol|small")
def leaks_compared_with_default_allclose(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    base = attend(x)
    for j in range(T):
        changed = x.clone()
        changed[j] = torch.randn(C, generator=g)
        if not torch.allclose(base[:j], attend(changed)[:j]):
            return True
    return False


@wrong("future_leaks", "itself|position j|including j|off-by-one|off by one|before j|earlier")
def leaks_includes_changed_position(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    base = attend(x)
    for j in range(T):
        changed = x.clone()
        changed[j] = torch.randn(C, generator=g)
        if not torch.equal(base[: j + 1], attend(changed)[: j + 1]):
            return True
    return False


@wrong("future_leaks", "earlier|before|prefix|[:j]|later positions|all positions|whole")
def leaks_compares_whole_output(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    base = attend(x)
    for j in range(T):
        changed = x.clone()
        changed[j] = torch.randn(C, generator=g)
        if not torch.equal(base, attend(changed)):
            return True
    return False


@wrong("future_leaks", "bool|python|tensor")
def leaks_returns_tensor(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    base = attend(x)
    leaked = torch.tensor(False)
    for j in range(T):
        changed = x.clone()
        changed[j] = torch.randn(C, generator=g)
        leaked = leaked | (base[:j] != attend(changed)[:j]).any()
    return leaked


@wrong("future_leaks", "copy|clone|in place|in-place|same tensor|alias")
def leaks_changes_x_in_place(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    for j in range(T):
        changed = x  # no copy: the "changed" input is x itself
        changed[j] = torch.randn(C, generator=g)
        if not torch.equal(attend(x)[:j], attend(changed)[:j]):
            return True
    return False


@wrong("future_leaks", "last|every|each|all j|off-by-one|off by one")
def leaks_skips_last_token(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    base = attend(x)
    for j in range(1, T - 1):
        changed = x.clone()
        changed[j] = torch.randn(C, generator=g)
        if not torch.equal(base[:j], attend(changed)[:j]):
            return True
    return False


@right("future_leaks")
def leaks_allclose_strict(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    base = attend(x)
    leaked = False
    for j in range(T - 1, 0, -1):
        changed = torch.cat([x[:j], torch.randn(1, C, generator=g), x[j + 1 :]])
        leaked = leaked or not torch.allclose(base[:j], attend(changed)[:j], atol=1e-7, rtol=0)
    return bool(leaked)


# --- Exercise 3: padding_mask(lengths, S) ---------------------------------------------------------


@wrong("padding_mask", "off-by-one|off by one|<=|one too many|one extra|first pad")
def padding_less_or_equal(lengths, S):
    return (torch.arange(S)[None, :] <= lengths[:, None])[:, None, None, :]


@wrong("padding_mask", "shape|dimension|broadcast|(B, 1, 1, S)|dims")
def padding_returns_b_by_s(lengths, S):
    return torch.arange(S)[None, :] < lengths[:, None]


@wrong("padding_mask", "key|quer|last dim|column|axis")
def padding_masks_queries(lengths, S):
    return (torch.arange(S)[None, :] < lengths[:, None])[:, None, :, None]


@wrong("padding_mask", "invert|negat|opposite|flip|~|convention")
def padding_true_at_pads(lengths, S):
    return (torch.arange(S)[None, :] >= lengths[:, None])[:, None, None, :]


@wrong("padding_mask", "padded length|longest|max|width|column")
def padding_width_from_longest(lengths, S):
    width = int(lengths.max())
    return (torch.arange(width)[None, :] < lengths[:, None])[:, None, None, :]


@wrong("padding_mask", "bool|dtype|float")
def padding_float_mask(lengths, S):
    mask = torch.zeros(len(lengths), 1, 1, S)
    for b, n in enumerate(lengths.tolist()):
        mask[b, 0, 0, :n] = 1.0
    return mask


@right("padding_mask")
def padding_loop(lengths, S):
    mask = torch.zeros(len(lengths), 1, 1, S, dtype=torch.bool)
    for b, n in enumerate(lengths.tolist()):
        mask[b, ..., :n] = True
    return mask


# --- Exercise 4: pad_and_truncate(sequences, max_len, pad_id) ------------------------------------


def _rectangle(rows, width, pad_id):
    return torch.tensor(
        [row + [pad_id] * (width - len(row)) for row in rows], dtype=torch.long
    ).reshape(len(rows), width)


@wrong("pad_and_truncate", "longest|truncated length|width|column")
def pad_to_max_len(sequences, max_len, pad_id):
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    rows = [list(s[:max_len]) for s in sequences]
    return _rectangle(rows, max_len, pad_id), torch.tensor([len(r) for r in rows], dtype=torch.long)


@wrong("pad_and_truncate", "first|last|end|beginning|keep")
def truncate_keeps_last_tokens(sequences, max_len, pad_id):
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    rows = [list(s[-max_len:]) if len(s) > max_len else list(s) for s in sequences]
    width = max((len(r) for r in rows), default=0)
    return _rectangle(rows, width, pad_id), torch.tensor([len(r) for r in rows], dtype=torch.long)


@wrong("pad_and_truncate", "truncat|before|original|after")
def lengths_before_truncation(sequences, max_len, pad_id):
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    rows = [list(s[:max_len]) for s in sequences]
    width = max((len(r) for r in rows), default=0)
    return _rectangle(rows, width, pad_id), torch.tensor(
        [len(s) for s in sequences], dtype=torch.long
    )


@wrong("pad_and_truncate", "ValueError|raise|max_len < 1|positive|at least 1|invalid")
def no_validation_of_max_len(sequences, max_len, pad_id):
    rows = [list(s[:max_len]) for s in sequences]
    width = max((len(r) for r in rows), default=0)
    return _rectangle(rows, width, pad_id), torch.tensor([len(r) for r in rows], dtype=torch.long)


@wrong("pad_and_truncate", "left|front|end|beginning|start")
def pads_on_the_left(sequences, max_len, pad_id):
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    rows = [list(s[:max_len]) for s in sequences]
    width = max((len(r) for r in rows), default=0)
    ids = torch.tensor([[pad_id] * (width - len(r)) + r for r in rows], dtype=torch.long).reshape(
        len(rows), width
    )
    return ids, torch.tensor([len(r) for r in rows], dtype=torch.long)


@wrong("pad_and_truncate", "empty|long|dtype|int64|float")
def dtype_left_to_torch_tensor(sequences, max_len, pad_id):
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    rows = [list(s[:max_len]) for s in sequences]
    width = max((len(r) for r in rows), default=0)
    ids = torch.tensor(
        [r + [pad_id] * (width - len(r)) for r in rows]
    )  # float32 when every row is empty
    return ids, torch.tensor([len(r) for r in rows])


@wrong("pad_and_truncate", "mutat|in place|in-place|modif|input|copy|caller")
def pads_the_callers_lists(sequences, max_len, pad_id):
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    for s in sequences:
        del s[max_len:]
    lengths = torch.tensor([len(s) for s in sequences], dtype=torch.long)
    width = max((len(s) for s in sequences), default=0)
    for s in sequences:
        s.extend([pad_id] * (width - len(s)))
    return torch.tensor(sequences, dtype=torch.long).reshape(len(sequences), width), lengths


@wrong("pad_and_truncate", "pad_id|padding id|pad id|zero")
def pads_with_zero(sequences, max_len, pad_id):
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    rows = [list(s[:max_len]) for s in sequences]
    width = max((len(r) for r in rows), default=0)
    return _rectangle(rows, width, 0), torch.tensor([len(r) for r in rows], dtype=torch.long)


@right("pad_and_truncate")
def pad_with_torch_full(sequences, max_len, pad_id):
    if max_len < 1:
        raise ValueError(f"max_len must be at least 1, got max_len={max_len}")
    lengths = torch.tensor([min(len(s), max_len) for s in sequences], dtype=torch.long)
    width = int(lengths.max()) if len(sequences) else 0
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    for b, s in enumerate(sequences):
        n = int(lengths[b])
        if n:
            ids[b, :n] = torch.tensor(s[:n], dtype=torch.long)
    return ids, lengths


# --- Exercise 5: cross_attention(x_q, x_kv, w_q, w_k, w_v, mask=None) -----------------------------


@wrong("cross_attention", "quer|key|swap|x_q|decoder|encoder")
def cross_queries_from_kv(x_q, x_kv, w_q, w_k, w_v, mask=None):
    # "Q and K from the encoder": queries and keys swap their sources (only runs when shapes agree)
    q, k, v = x_kv @ w_q, x_q @ w_k, x_kv @ w_v
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    return out, weights


@wrong("cross_attention", "value|w_v|x_kv|encoder|source")
def cross_values_from_queries(x_q, x_kv, w_q, w_k, w_v, mask=None):
    q, k, v = x_q @ w_q, x_kv @ w_k, x_q @ w_v
    return scaled_dot_product_attention(q, k, v, mask)


@wrong("cross_attention", "mask|padding")
def cross_ignores_mask(x_q, x_kv, w_q, w_k, w_v, mask=None):
    return scaled_dot_product_attention(x_q @ w_q, x_kv @ w_k, x_kv @ w_v)


@wrong("cross_attention", "invert|negat|opposite|flip|~|convention")
def cross_inverts_mask(x_q, x_kv, w_q, w_k, w_v, mask=None):
    return scaled_dot_product_attention(
        x_q @ w_q, x_kv @ w_k, x_kv @ w_v, None if mask is None else ~mask
    )


@wrong("cross_attention", "scale|sqrt|square root|d_k|width")
def cross_scales_by_input_width(x_q, x_kv, w_q, w_k, w_v, mask=None):
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v
    scores = q @ k.transpose(-2, -1) / math.sqrt(x_q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


@wrong("cross_attention", "softmax|dim|axis|normali|sum|rows")
def cross_softmax_over_queries(x_q, x_kv, w_q, w_k, w_v, mask=None):
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=1).nan_to_num(0.0)
    return weights @ v, weights


@wrong("cross_attention", "before|after|-inf|infinit|softmax")
def cross_masks_after_softmax(x_q, x_kv, w_q, w_k, w_v, mask=None):
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    if mask is not None:
        weights = weights * mask
    return weights @ v, weights


@right("cross_attention")
def cross_einsum_safe_softmax(x_q, x_kv, w_q, w_k, w_v, mask=None):
    q = torch.einsum("btc,cd->btd", x_q, w_q)
    k = torch.einsum("bsc,cd->bsd", x_kv, w_k)
    v = torch.einsum("bsc,cd->bsd", x_kv, w_v)
    scores = torch.einsum("btd,bsd->bts", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return torch.einsum("bts,bsd->btd", weights, v), weights
