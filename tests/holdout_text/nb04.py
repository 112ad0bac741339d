"""Holdout for notebook 04, written from
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
NAMED_AT_LEAST = 1.0  # measured: 40 of 45 named when written; 45 of 45 after the round's check work


# ---------------------------------------------------------------- causal_mask
@wrong("causal_mask", "upper|triangle|transpose|future|polarity|direction|lower")
def causal_upper_triangle(T):
    return torch.ones(T, T, dtype=torch.bool).triu()


@wrong("causal_mask", "diagonal|itself")
def causal_without_diagonal(T):
    return torch.ones(T, T, dtype=torch.bool).tril(-1)


@wrong("causal_mask", "polarity|invert|true|false|masked|flip")
def causal_true_means_masked(T):
    return torch.ones(T, T, dtype=torch.bool).triu(1)


@wrong("causal_mask", "bool|dtype|float")
def causal_float_mask(T):
    return torch.ones(T, T).tril()


@wrong("causal_mask", "diagonal|off-by-one|off by one|future|next")
def causal_sees_next_token(T):
    return torch.ones(T, T, dtype=torch.bool).tril(1)


@wrong("causal_mask", "bool|dtype|integer|python int|long")
def causal_integer_comparison(T):
    i = torch.arange(T)
    return (i[None, :] <= i[:, None]).long()


@wrong("causal_mask", "shape|batch|dim")
def causal_with_batch_dim(T):
    return torch.ones(T, T, dtype=torch.bool).tril()[None]


@wrong("causal_mask", "upper|transpose|future|direction|key|query")
def causal_arange_swapped(T):
    i = torch.arange(T)
    return i[:, None] <= i[None, :]


@right("causal_mask")
def causal_by_comparison(T):
    pos = torch.arange(T)
    return pos.unsqueeze(1) >= pos.unsqueeze(0)  # (T, 1) >= (1, T): s <= t


@right("causal_mask")
def causal_not_upper(T):
    return ~torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)


# ---------------------------------------------------------------- future_leaks
def _fresh(gen, C):
    return torch.randn(C, generator=gen)


@wrong("future_leaks", "exact|tolerance|allclose|strict|small|atol")
def leaks_with_loose_tolerance(attend, T, C, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=gen)
    base = attend(x)
    for j in range(1, T):
        y = x.clone()
        y[j] = _fresh(gen, C)
        if not torch.allclose(attend(y)[:j], base[:j], atol=1e-3):
            return True
    return False


@wrong("future_leaks", "itself|off-by-one|off by one|include|position j|before")
def leaks_compares_changed_position_too(attend, T, C, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=gen)
    base = attend(x)
    for j in range(T):
        y = x.clone()
        y[j] = _fresh(gen, C)
        if not torch.equal(attend(y)[: j + 1], base[: j + 1]):
            return True
    return False


@wrong("future_leaks", "before|earlier|direction|later|future|after")
def leaks_compares_later_positions(attend, T, C, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=gen)
    base = attend(x)
    for j in range(T):
        y = x.clone()
        y[j] = _fresh(gen, C)
        if not torch.equal(attend(y)[j + 1 :], base[j + 1 :]):
            return True
    return False


@wrong("future_leaks", "every|each|last|position")
def leaks_changes_only_last_token(attend, T, C, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=gen)
    y = x.clone()
    y[T - 1] = _fresh(gen, C)
    return not torch.equal(attend(y)[: T - 1], attend(x)[: T - 1])


@wrong("future_leaks", "every|each|first|position")
def leaks_changes_only_first_token(attend, T, C, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=gen)
    y = x.clone()
    y[0] = _fresh(gen, C)
    return not torch.equal(attend(y)[:0], attend(x)[:0])


@wrong("future_leaks", "bool|python|type|tensor")
def leaks_returns_tensor(attend, T, C, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=gen)
    base = attend(x)
    found = torch.tensor(False)
    for j in range(1, T):
        y = x.clone()
        y[j] = _fresh(gen, C)
        found = found | (attend(y)[:j] != base[:j]).any()
    return found


@wrong("future_leaks", "copy|clone|in place|in-place|alias|same tensor")
def leaks_changes_x_itself(attend, T, C, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=gen)
    for j in range(1, T):
        y = x
        y[j] = _fresh(gen, C)
        if not torch.equal(attend(y)[:j], attend(x)[:j]):
            return True
    return False


@wrong("future_leaks", "seed|generator|determin|reproduc")
def leaks_ignores_seed(attend, T, C, seed=0):
    x = torch.randn(T, C)
    base = attend(x)
    for j in range(1, T):
        y = x.clone()
        y[j] = torch.randn(C)
        if not torch.equal(attend(y)[:j], base[:j]):
            return True
    return False


@wrong("future_leaks", "invert|true|false|return|revers|opposite")
def leaks_answer_inverted(attend, T, C, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=gen)
    base = attend(x)
    for j in range(1, T):
        y = x.clone()
        y[j] = _fresh(gen, C)
        if not torch.equal(attend(y)[:j], base[:j]):
            return False
    return True


@wrong("future_leaks", "every|each|position|earlier")
def leaks_looks_at_position_zero_only(attend, T, C, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=gen)
    base = attend(x)
    for j in range(1, T):
        y = x.clone()
        y[j] = _fresh(gen, C)
        if not torch.equal(attend(y)[0], base[0]):
            return True
    return False


@right("future_leaks")
def leaks_perturb_each(attend, T, C, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=gen)
    with torch.no_grad():
        base = attend(x)
        for j in range(1, T):
            changed = x.clone()
            changed[j] = torch.randn(C, generator=gen)
            if not torch.equal(attend(changed)[:j], base[:j]):
                return True
    return False


@right("future_leaks")
def leaks_with_allclose_zero(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    ref = attend(x)
    leaks = []
    for j in range(T):
        other = torch.cat([x[:j], torch.randn(1, C, generator=g), x[j + 1 :]])
        leaks.append(not torch.allclose(attend(other)[:j], ref[:j], atol=1e-7, rtol=0))
    return bool(any(leaks))


# ---------------------------------------------------------------- padding_mask
def _pad(lengths, S):
    lengths = torch.as_tensor(lengths)
    return (torch.arange(S)[None, :] < lengths[:, None])[:, None, None, :]


@wrong("padding_mask", "off-by-one|off by one|length|<=|boundary|one too many")
def padding_includes_first_pad(lengths, S):
    return (torch.arange(S)[None, :] <= lengths[:, None])[:, None, None, :]


@wrong("padding_mask", "polarity|invert|true|padding|flip")
def padding_true_at_pads(lengths, S):
    return ~_pad(lengths, S)


@wrong("padding_mask", "shape|(b, 1, 1, s)|broadcast|dim")
def padding_two_dimensional(lengths, S):
    return torch.arange(S)[None, :] < lengths[:, None]


@wrong("padding_mask", "shape|key|query|broadcast|axis|dim")
def padding_masks_queries(lengths, S):
    return (torch.arange(S)[None, :] < lengths[:, None])[:, None, :, None]


@wrong("padding_mask", "bool|dtype|float")
def padding_float_mask(lengths, S):
    return _pad(lengths, S).float()


@wrong("padding_mask", "padded length|shape|length|longest")
def padding_uses_longest_length(lengths, S):
    return _pad(lengths, int(lengths.max()))


@wrong("padding_mask", "left|at the end|the end|right|start|front")
def padding_at_the_front(lengths, S):
    return (torch.arange(S)[None, :] >= S - lengths[:, None])[:, None, None, :]


@wrong("padding_mask", "each|per sequence|batch|length|row")
def padding_first_length_for_all(lengths, S):
    return _pad(lengths[:1].expand(len(lengths)), S)


@right("padding_mask")
def padding_by_loop(lengths, S):
    m = torch.zeros(len(lengths), 1, 1, S, dtype=torch.bool)
    for b, n in enumerate(lengths.tolist()):
        m[b, 0, 0, :n] = True
    return m


@right("padding_mask")
def padding_view(lengths, S):
    return (torch.arange(S, device=lengths.device) < lengths.unsqueeze(-1)).view(-1, 1, 1, S)


# ---------------------------------------------------------------- pad_and_truncate
def _batch(rows, pad_id, L=None, front=False, dtype=torch.long):
    L = max((len(r) for r in rows), default=0) if L is None else L
    ids = torch.full((len(rows), L), pad_id, dtype=dtype)
    for b, r in enumerate(rows):
        if r:
            if front:
                ids[b, L - len(r) :] = torch.tensor(r, dtype=dtype)
            else:
                ids[b, : len(r)] = torch.tensor(r, dtype=dtype)
    return ids


def _check(max_len):
    if max_len < 1:
        raise ValueError(f"max_len must be at least 1, got {max_len}")


@wrong("pad_and_truncate", "first|last|truncat|keep|at the end|the end")
def pad_keeps_last_tokens(sequences, max_len, pad_id):
    _check(max_len)
    rows = [list(s)[-max_len:] if len(s) > max_len else list(s) for s in sequences]
    return _batch(rows, pad_id), torch.tensor([len(r) for r in rows], dtype=torch.long)


@wrong("pad_and_truncate", "longest|max_len|width|shape|pad")
def pad_always_to_max_len(sequences, max_len, pad_id):
    _check(max_len)
    rows = [list(s)[:max_len] for s in sequences]
    return _batch(rows, pad_id, L=max_len), torch.tensor([len(r) for r in rows], dtype=torch.long)


@wrong("pad_and_truncate", "length|truncat|after|before")
def pad_lengths_before_truncation(sequences, max_len, pad_id):
    _check(max_len)
    rows = [list(s)[:max_len] for s in sequences]
    return _batch(rows, pad_id), torch.tensor([len(s) for s in sequences], dtype=torch.long)


@wrong("pad_and_truncate", "at the end|the end|left|front|start|right")
def pad_at_the_front(sequences, max_len, pad_id):
    _check(max_len)
    rows = [list(s)[:max_len] for s in sequences]
    return _batch(rows, pad_id, front=True), torch.tensor([len(r) for r in rows], dtype=torch.long)


@wrong("pad_and_truncate", "valueerror|max_len|raise|at least")
def pad_accepts_zero_max_len(sequences, max_len, pad_id):
    rows = [list(s)[: max(max_len, 0)] for s in sequences]
    return _batch(rows, pad_id), torch.tensor([len(r) for r in rows], dtype=torch.long)


@wrong("pad_and_truncate", "long|dtype|int64|integer")
def pad_int32_tensors(sequences, max_len, pad_id):
    _check(max_len)
    rows = [list(s)[:max_len] for s in sequences]
    ids = _batch(rows, pad_id, dtype=torch.int32)
    return ids, torch.tensor([len(r) for r in rows], dtype=torch.int32)


@wrong("pad_and_truncate", "off-by-one|off by one|max_len|truncat|one token")
def pad_truncates_one_short(sequences, max_len, pad_id):
    _check(max_len)
    rows = [list(s)[: max_len - 1] if len(s) >= max_len else list(s) for s in sequences]
    return _batch(rows, pad_id), torch.tensor([len(r) for r in rows], dtype=torch.long)


@wrong("pad_and_truncate", "in place|in-place|modif|input|mutat")
def pad_extends_the_input_lists(sequences, max_len, pad_id):
    _check(max_len)
    for s in sequences:
        del s[max_len:]
    lengths = [len(s) for s in sequences]
    L = max(lengths, default=0)
    for s in sequences:
        s.extend([pad_id] * (L - len(s)))
    return torch.tensor(sequences, dtype=torch.long).reshape(len(sequences), L), torch.tensor(
        lengths, dtype=torch.long
    )


@wrong("pad_and_truncate", "pad_id|count|length|real token")
def pad_lengths_by_counting_non_pad(sequences, max_len, pad_id):
    _check(max_len)
    rows = [list(s)[:max_len] for s in sequences]
    ids = _batch(rows, pad_id)
    return ids, (ids != pad_id).sum(dim=1)


@wrong("pad_and_truncate", "pad_id|pad id|padding value")
def pad_with_zero(sequences, max_len, pad_id):
    _check(max_len)
    rows = [list(s)[:max_len] for s in sequences]
    return _batch(rows, 0), torch.tensor([len(r) for r in rows], dtype=torch.long)


@right("pad_and_truncate")
def pad_with_list_comprehension(sequences, max_len, pad_id):
    if max_len < 1:
        raise ValueError(f"max_len={max_len} must be at least 1")
    cut = [list(s[:max_len]) for s in sequences]
    L = max(map(len, cut), default=0)
    ids = torch.tensor([c + [pad_id] * (L - len(c)) for c in cut], dtype=torch.long)
    return ids.view(len(cut), L), torch.tensor([len(c) for c in cut], dtype=torch.long)


# ---------------------------------------------------------------- cross_attention
@wrong("cross_attention", "x_kv|key|cross|source|self|encoder")
def cross_keys_from_queries(x_q, x_kv, w_q, w_k, w_v, mask=None):
    return scaled_dot_product_attention(x_q @ w_q, x_q @ w_k, x_q @ w_v, mask)


@wrong("cross_attention", "query|x_q|decoder|encoder|key|value")
def cross_queries_and_keys_from_source(x_q, x_kv, w_q, w_k, w_v, mask=None):
    return scaled_dot_product_attention(x_kv @ w_k, x_kv @ w_k, x_kv @ w_v, mask)


@wrong("cross_attention", "mask")
def cross_ignores_mask(x_q, x_kv, w_q, w_k, w_v, mask=None):
    return scaled_dot_product_attention(x_q @ w_q, x_kv @ w_k, x_kv @ w_v)


@wrong("cross_attention", "mask|polarity|invert|true|false")
def cross_mask_inverted(x_q, x_kv, w_q, w_k, w_v, mask=None):
    return scaled_dot_product_attention(
        x_q @ w_q, x_kv @ w_k, x_kv @ w_v, None if mask is None else ~mask
    )


@wrong("cross_attention", "w_v|value")
def cross_values_with_w_k(x_q, x_kv, w_q, w_k, w_v, mask=None):
    return scaled_dot_product_attention(x_q @ w_q, x_kv @ w_k, x_kv @ w_k, mask)


@wrong("cross_attention", "scale|sqrt")
def cross_scaled_by_query_width(x_q, x_kv, w_q, w_k, w_v, mask=None):
    q = x_q @ w_q * math.sqrt(w_q.shape[1]) / math.sqrt(x_q.shape[-1])
    return scaled_dot_product_attention(q, x_kv @ w_k, x_kv @ w_v, mask)


@wrong("cross_attention", "scale|sqrt")
def cross_unscaled(x_q, x_kv, w_q, w_k, w_v, mask=None):
    q = x_q @ w_q * math.sqrt(w_q.shape[1])
    return scaled_dot_product_attention(q, x_kv @ w_k, x_kv @ w_v, mask)


@wrong("cross_attention", "mask|broadcast|shape|dim")
def cross_mask_unsqueezed(x_q, x_kv, w_q, w_k, w_v, mask=None):
    return scaled_dot_product_attention(
        x_q @ w_q, x_kv @ w_k, x_kv @ w_v, None if mask is None else mask.unsqueeze(1)
    )


@wrong("cross_attention", "transpose|weights|shape|t, s|s, t")
def cross_weights_transposed(x_q, x_kv, w_q, w_k, w_v, mask=None):
    out, w = scaled_dot_product_attention(x_q @ w_q, x_kv @ w_k, x_kv @ w_v, mask)
    return out, w.transpose(-2, -1)


@right("cross_attention")
def cross_with_einsum(x_q, x_kv, w_q, w_k, w_v, mask=None):
    q = torch.einsum("btc,cd->btd", x_q, w_q)
    k = torch.einsum("bsc,cd->bsd", x_kv, w_k)
    v = torch.einsum("bsc,cd->bsd", x_kv, w_v)
    return scaled_dot_product_attention(q, k, v, mask=mask)
