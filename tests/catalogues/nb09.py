"""Notebook 9's mistake catalogue: realistic wrong implementations of each exercise, the words
its instant check must say for each, and correct variants in other styles."""

from __future__ import annotations

import math

import torch

from tests.holdout._harness import Mistake, collector

MISTAKES: list[Mistake] = []
CORRECT: list[Mistake] = []
NAMED_AT_LEAST = 1.0  # 46 of 46 when converted to this format
wrong = collector(MISTAKES, "09")
correct = collector(CORRECT, "09")


def _safe(m):
    return torch.where(torch.isfinite(m), m, torch.zeros_like(m))


# ---------------------------------------------------------------------------------------------
# merge_softmax_stats(m1, l1, o1, m2, l2, o2) -> (m, l, o)
@wrong("merge_softmax_stats", "outputs o are not")
def merge_o_not_rescaled(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    return m, torch.exp(m1 - _safe(m)) * l1 + torch.exp(m2 - _safe(m)) * l2, o1 + o2


@wrong("merge_softmax_stats", "nothing is rescaled")
def merge_nothing_rescaled(m1, l1, o1, m2, l2, o2):
    return torch.maximum(m1, m2), l1 + l2, o1 + o2


@wrong("merge_softmax_stats", "inverted")
def merge_inverted_factors(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    a1, a2 = torch.exp(_safe(m) - m1), torch.exp(_safe(m) - m2)
    return m, a1 * l1 + a2 * l2, a1 * o1 + a2 * o2


@wrong("merge_softmax_stats", "divided by l")
def merge_normalises(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    a1, a2 = torch.exp(m1 - _safe(m)), torch.exp(m2 - _safe(m))
    l = a1 * l1 + a2 * l2  # noqa: E741
    return m, l, (a1 * o1 + a2 * o2) / l


@wrong("merge_softmax_stats", "not m1")
def merge_keeps_first_max(m1, l1, o1, m2, l2, o2):
    a2 = torch.exp(m2 - m1)
    return m1, l1 + a2 * l2, o1 + a2 * o2


@wrong("merge_softmax_stats", "NaN")
def merge_nan_on_empty_rows(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    a1, a2 = torch.exp(m1 - m), torch.exp(m2 - m)  # -inf - (-inf) = NaN
    return m, a1 * l1 + a2 * l2, a1 * o1 + a2 * o2


@wrong("merge_softmax_stats", "only the second set")
def merge_rescales_one_side(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    a2 = torch.exp(m2 - _safe(m))
    return m, l1 + a2 * l2, o1 + a2 * o2


@wrong("merge_softmax_stats", "(m, l, o)")
def merge_wrong_order(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    a1, a2 = torch.exp(m1 - _safe(m)), torch.exp(m2 - _safe(m))
    return a1 * l1 + a2 * l2, m, a1 * o1 + a2 * o2


@wrong("merge_softmax_stats", "tuple (m, l, o)")
def merge_returns_a_list(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    a1, a2 = torch.exp(m1 - _safe(m)), torch.exp(m2 - _safe(m))
    return [m, a1 * l1 + a2 * l2]


@wrong("merge_softmax_stats", "added")
def merge_adds_maxima(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    a1, a2 = torch.exp(m1 - _safe(m)), torch.exp(m2 - _safe(m))
    return m1 + m2, a1 * l1 + a2 * l2, a1 * o1 + a2 * o2


@correct("merge_softmax_stats")
def merge_with_nan_to_num(m1, l1, o1, m2, l2, o2):
    m = torch.max(m1, m2)
    a1 = torch.nan_to_num(torch.exp(m1 - m), nan=0.0)
    a2 = torch.nan_to_num(torch.exp(m2 - m), nan=0.0)
    return (m, a1 * l1 + a2 * l2, a1 * o1 + a2 * o2)


@correct("merge_softmax_stats")
def merge_by_cases(m1, l1, o1, m2, l2, o2):
    m = torch.where(m1 > m2, m1, m2)
    shift = torch.where(m == float("-inf"), torch.zeros_like(m), m)
    a1, a2 = (m1 - shift).exp(), (m2 - shift).exp()
    return m, l1 * a1 + l2 * a2, o1 * a1 + o2 * a2


# ---------------------------------------------------------------------------------------------
# tiled_attention(q, k, v, block_size, mask=None)
def _loop(q, k, v, block_size, mask, **bug):
    S, D = k.shape[-2], q.shape[-1]
    m = torch.full((*q.shape[:-1], 1), float("-inf"))
    l = torch.zeros_like(m)  # noqa: E741
    o = torch.zeros(*q.shape[:-1], v.shape[-1])
    end = S - S % block_size if bug.get("drop_last") else S
    for start in range(0, end, block_size):
        stop = min(start + block_size, S)
        s = (
            q
            @ k[..., start:stop, :].transpose(-2, -1)
            / (1.0 if bug.get("no_scale") else math.sqrt(D))
        )
        if mask is not None:
            cols = slice(0, stop - start) if bug.get("mask_at_zero") else slice(start, stop)
            s = s.masked_fill(~mask[..., cols], float("-inf"))
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        shift = m_new if bug.get("nan_rows") else _safe(m_new)
        p = torch.exp(s - shift)
        a = torch.exp(m - shift)
        l = (  # noqa: E741
            a * l + p.sum(-1, keepdim=True)
            if not bug.get("l_stale")
            else l + p.sum(-1, keepdim=True)
        )  # noqa: E741
        o = (o if bug.get("o_stale") else a * o) + p @ v[..., start:stop, :]
        m = m_new
    if bug.get("nan_rows"):
        return o / l
    return o / torch.where(l > 0, l, torch.ones_like(l))


@wrong("tiled_attention", "accumulator is not rescaled")
def tiled_o_not_rescaled(q, k, v, block_size, mask=None):
    return _loop(q, k, v, block_size, mask, o_stale=True)


@wrong("tiled_attention", "running sum l is not rescaled")
def tiled_l_not_rescaled(q, k, v, block_size, mask=None):
    return _loop(q, k, v, block_size, mask, l_stale=True)


@wrong("tiled_attention", "first columns")
def tiled_mask_offset(q, k, v, block_size, mask=None):
    return _loop(q, k, v, block_size, mask, mask_at_zero=True)


@wrong("tiled_attention", "sqrt(D)")
def tiled_no_scale(q, k, v, block_size, mask=None):
    return _loop(q, k, v, block_size, mask, no_scale=True)


@wrong("tiled_attention", "shorter block")
def tiled_drops_last_block(q, k, v, block_size, mask=None):
    return _loop(q, k, v, block_size, mask, drop_last=True)


@wrong("tiled_attention", "NaN")
def tiled_nan_rows(q, k, v, block_size, mask=None):
    return _loop(q, k, v, block_size, mask, nan_rows=True)


@wrong("tiled_attention", "normalised inside the loop")
def tiled_normalises_each_block(q, k, v, block_size, mask=None):
    S, outs = k.shape[-2], []
    for start in range(0, S, block_size):
        s = q @ k[..., start : start + block_size, :].transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            s = s.masked_fill(~mask[..., start : start + block_size], float("-inf"))
        m = _safe(s.amax(-1, keepdim=True))
        p = torch.exp(s - m)
        l = p.sum(-1, keepdim=True)  # noqa: E741
        outs.append(
            (p @ v[..., start : start + block_size, :]) / torch.where(l > 0, l, torch.ones_like(l))
        )
    return sum(outs) / len(outs)


@wrong("tiled_attention", "scaled_dot_product_attention")
def tiled_calls_torch(q, k, v, block_size, mask=None):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@wrong("tiled_attention", "must give zeros")
def tiled_uniform_on_empty_rows(q, k, v, block_size, mask=None):
    out = _loop(q, k, v, block_size, mask)
    if mask is not None:
        empty = ~mask.any(-1)
        out = out.clone()
        out[empty] = v.mean(-2, keepdim=True).expand_as(out)[empty]
    return out


@correct("tiled_attention")
def tiled_with_merge_helper(q, k, v, block_size, mask=None):
    from transformer_lab.tiled import merge_softmax_stats  # allowed: not the graded function

    stats = None
    for start in range(0, k.shape[-2], block_size):
        s = q @ k[..., start : start + block_size, :].transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            s = s.masked_fill(~mask[..., start : start + block_size], float("-inf"))
        m = s.amax(-1, keepdim=True)
        p = torch.exp(s - _safe(m))
        block = (m, p.sum(-1, keepdim=True), p @ v[..., start : start + block_size, :])
        stats = block if stats is None else merge_softmax_stats(*stats, *block)
    m, l, o = stats  # noqa: E741
    return torch.nan_to_num(o / l, nan=0.0)


@correct("tiled_attention")
def tiled_float64_inside(q, k, v, block_size, mask=None):
    out = _loop(q.double(), k.double(), v.double(), block_size, mask)
    return out.to(q.dtype)


@correct("tiled_attention")
def tiled_split_einsum(q, k, v, block_size, mask=None):
    """Blocks from k.split and einsum: still only (T, block_size) scores at a time (the tiling
    probe must not mistake it for the full score matrix)."""
    m = l = o = None  # noqa: E741
    starts = range(0, k.shape[-2], block_size)
    for start, kb, vb in zip(starts, k.split(block_size, -2), v.split(block_size, -2)):
        s = torch.einsum("...td,...sd->...ts", q, kb) / math.sqrt(q.shape[-1])
        if mask is not None:
            s = s.masked_fill(~mask[..., start : start + kb.shape[-2]], float("-inf"))
        mb = s.amax(-1, keepdim=True)
        p = torch.exp(s - _safe(mb))
        if m is None:
            m, l, o = mb, p.sum(-1, keepdim=True), p @ vb  # noqa: E741
            continue
        new = torch.maximum(m, mb)
        a, b = torch.exp(m - _safe(new)), torch.exp(mb - _safe(new))
        m, l, o = new, a * l + b * p.sum(-1, keepdim=True), a * o + b * (p @ vb)  # noqa: E741
    return o / torch.where(l > 0, l, torch.ones_like(l))


@correct("tiled_attention")
def tiled_keys_transposed_once(q, k, v, block_size, mask=None):
    """k transposed (and copied) once before the loop: an (S, D) copy, not (T, S) scores."""
    kt = k.transpose(-2, -1).contiguous() / math.sqrt(q.shape[-1])  # (..., D, S)
    S = k.shape[-2]
    m = torch.full((*q.shape[:-1], 1), float("-inf"))
    l = torch.zeros_like(m)  # noqa: E741
    o = torch.zeros(*q.shape[:-1], v.shape[-1])
    for start in range(0, S, block_size):
        s = q @ kt[..., start : start + block_size]
        if mask is not None:
            s = torch.where(mask[..., start : start + block_size], s, float("-inf"))
        new = torch.maximum(m, s.amax(-1, keepdim=True))
        p = torch.exp(s - _safe(new))
        a = torch.exp(m - _safe(new))
        o = a * o + p @ v[..., start : start + block_size, :]
        l, m = a * l + p.sum(-1, keepdim=True), new  # noqa: E741
    return o / torch.where(l > 0, l, torch.ones_like(l))


# ---------------------------------------------------------------------------------------------
# grouped_query_attention(q, k, v)
def _sdpa(q, k, v, scale=True):
    s = q @ k.transpose(-2, -1) / (math.sqrt(q.shape[-1]) if scale else 1.0)
    return torch.softmax(s, -1) @ v


def _need_multiple(H, H_kv):
    if H % H_kv:
        raise ValueError(f"H={H} is not a multiple of H_kv={H_kv}")


@wrong("grouped_query_attention", "repeat_interleave")
def gqa_tiles_heads(q, k, v):
    H, H_kv = q.shape[1], k.shape[1]
    _need_multiple(H, H_kv)
    return _sdpa(q, k.repeat(1, H // H_kv, 1, 1), v.repeat(1, H // H_kv, 1, 1))


@wrong("grouped_query_attention", "head 0")
def gqa_first_head_only(q, k, v):
    _need_multiple(q.shape[1], k.shape[1])
    return _sdpa(q, k[:, :1], v[:, :1])


@wrong("grouped_query_attention", "sqrt(D)")
def gqa_unscaled(q, k, v):
    g = q.shape[1] // k.shape[1]
    _need_multiple(q.shape[1], k.shape[1])
    return _sdpa(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1), scale=False)


@wrong("grouped_query_attention", "averaged")
def gqa_averages_queries(q, k, v):
    H, H_kv = q.shape[1], k.shape[1]
    _need_multiple(H, H_kv)
    return _sdpa(q.unflatten(1, (H_kv, H // H_kv)).mean(2), k, v).repeat_interleave(H // H_kv, 1)


@wrong("grouped_query_attention", "values are not")
def gqa_values_tiled(q, k, v):
    g = q.shape[1] // k.shape[1]
    _need_multiple(q.shape[1], k.shape[1])
    return _sdpa(q, k.repeat_interleave(g, 1), v.repeat(1, g, 1, 1))


@wrong("grouped_query_attention", "ValueError")
def gqa_no_head_check(q, k, v):
    g = max(1, q.shape[1] // k.shape[1])
    return _sdpa(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1))


@wrong("grouped_query_attention", "should name")
def gqa_vague_error(q, k, v):
    if q.shape[1] % k.shape[1]:
        raise ValueError("bad number of heads")
    g = q.shape[1] // k.shape[1]
    return _sdpa(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1))


@wrong("grouped_query_attention", "scaled_dot_product_attention")
def gqa_calls_torch(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)


@wrong("grouped_query_attention", "shape")
def gqa_kv_heads_out(q, k, v):
    _need_multiple(q.shape[1], k.shape[1])
    g = q.shape[1] // k.shape[1]
    return (
        _sdpa(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1))
        .unflatten(1, (k.shape[1], g))
        .mean(2)
    )


@correct("grouped_query_attention")
def gqa_grouped_reshape(q, k, v):
    B, H, T, D = q.shape
    H_kv = k.shape[1]
    if H % H_kv:
        raise ValueError(f"query heads {H} must be a multiple of key/value heads {H_kv}")
    qg = q.reshape(B, H_kv, H // H_kv, T, D)  # (B, H_kv, group, T, D)
    s = qg @ k[:, :, None].transpose(-2, -1) / math.sqrt(D)  # (B, H_kv, group, T, S)
    return (torch.softmax(s, -1) @ v[:, :, None]).reshape(B, H, T, D)


@correct("grouped_query_attention")
def gqa_with_package_attention(q, k, v):
    from transformer_lab import scaled_dot_product_attention

    H, H_kv = q.shape[1], k.shape[1]
    if H % H_kv:
        raise ValueError(f"H={H} is not divisible by H_kv={H_kv}")
    idx = torch.arange(H) // (H // H_kv)
    return scaled_dot_product_attention(q, k[:, idx], v[:, idx])[0]


# ---------------------------------------------------------------------------------------------
# kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2)
@wrong("kv_cache_bytes", "factor 2")
def kv_no_two(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    return n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_value


@wrong("kv_cache_bytes", "bits")
def kv_bits(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    return 2 * n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_value * 8


@wrong("kv_cache_bytes", "bytes_per_value is missing")
def kv_no_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    return 2 * n_layers * n_kv_heads * d_head * seq_len * batch


@wrong("kv_cache_bytes", "batch is missing")
def kv_no_batch(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    return 2 * n_layers * n_kv_heads * d_head * seq_len * bytes_per_value


@wrong("kv_cache_bytes", "n_layers is missing")
def kv_no_layers(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    return 2 * n_kv_heads * d_head * seq_len * batch * bytes_per_value


@wrong("kv_cache_bytes", "int")
def kv_float(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    return 2.0 * n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_value


@wrong("kv_cache_bytes", "ignored")
def kv_fixed_fp16(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    return 2 * n_layers * n_kv_heads * d_head * seq_len * batch * 2


@wrong("kv_cache_bytes", "int")
def kv_mebibytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    return 2 * n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_value / 2**20


@wrong("kv_cache_bytes", "factor 2 (keys and values) and bytes_per_value")
def kv_counts_values(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    return n_layers * n_kv_heads * d_head * seq_len * batch


@correct("kv_cache_bytes")
def kv_per_token(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    per_token = 2 * n_layers * n_kv_heads * d_head * bytes_per_value
    return int(per_token * seq_len * batch)


@correct("kv_cache_bytes")
def kv_math_prod(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    return math.prod([2, n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_value])


# ---------------------------------------------------------------------------------------------
# sliding_window_mask(T, window)
def _band(T, lo, hi=0):
    t, s = torch.arange(T)[:, None], torch.arange(T)[None, :]
    return (s <= t + hi) & (s > t - lo)


def _positive(window):
    if window < 1:
        raise ValueError(f"window must be at least 1, but received window={window}")


@wrong("sliding_window_mask", "window + 1 keys")
def window_one_too_many(T, window):
    _positive(window)
    return _band(T, window + 1)


@wrong("sliding_window_mask", "window - 1 keys")
def window_one_too_few(T, window):
    _positive(window)
    return _band(T, window - 1)


@wrong("sliding_window_mask", "not causal")
def window_both_sides(T, window):
    _positive(window)
    return _band(T, window, window - 1)


@wrong("sliding_window_mask", "polarity")
def window_reversed(T, window):
    _positive(window)
    return ~_band(T, window)


@wrong("sliding_window_mask", "transposed")
def window_transposed(T, window):
    _positive(window)
    return _band(T, window).T


@wrong("sliding_window_mask", "from the start")
def window_from_start(T, window):
    _positive(window)
    return torch.ones(T, T, dtype=torch.bool).tril() & (torch.arange(T)[None, :] < window)


@wrong("sliding_window_mask", "plain causal")
def window_ignored(T, window):
    _positive(window)
    return torch.ones(T, T, dtype=torch.bool).tril()


@wrong("sliding_window_mask", "boolean")
def window_float(T, window):
    _positive(window)
    return _band(T, window).float()


@wrong("sliding_window_mask", "ValueError")
def window_no_check(T, window):
    return _band(T, window)


@correct("sliding_window_mask")
def window_tril_triu(T, window):
    if window <= 0:
        raise ValueError(f"window={window} must be positive")
    ones = torch.ones(T, T, dtype=torch.bool)
    return torch.tril(ones) & torch.triu(ones, diagonal=-(window - 1))


@correct("sliding_window_mask")
def window_loops(T, window):
    if window < 1:
        raise ValueError(f"need window >= 1, received {window}")
    mask = torch.zeros(T, T, dtype=torch.bool)
    for t in range(T):
        mask[t, max(0, t - window + 1) : t + 1] = True
    return mask
