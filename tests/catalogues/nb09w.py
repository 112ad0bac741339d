"""Notebook 09, the wide catalogue (issue 39): mistakes a student makes reading the notebook's
text (online-softmax merges, tiled attention, grouped-query attention, the KV cache's size,
sliding windows), written without looking at what the checks detect.
``python -m tests.holdout report 09w``."""

from __future__ import annotations

import math

import torch

from tests.holdout._harness import Mistake, collector

MISTAKES: list[Mistake] = []
# Before the fixes of issue 39: 15/2/1/0 named/generic/misleading/passed; after: 18 of 18 named.
# With the 11 entries of h17 (merge maxima and factors, value width, window without self, GQA
# heads): 21/7/1/0 of 29 before its probes, 29 of 29 named after.
NAMED_AT_LEAST = 1.0
wrong = collector(MISTAKES, "09")


def _safe(m):
    return torch.where(torch.isfinite(m), m, torch.zeros_like(m))


@wrong("merge_softmax_stats", "minimum|max|maximum")
def merge_min(m1, l1, o1, m2, l2, o2):
    m = torch.minimum(m1, m2)
    a1, a2 = torch.exp(m1 - _safe(m)), torch.exp(m2 - _safe(m))
    return m, a1 * l1 + a2 * l2, a1 * o1 + a2 * o2


@wrong("merge_softmax_stats", "l|sum|rescal")
def merge_l_plain_sum(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    a1, a2 = torch.exp(m1 - _safe(m)), torch.exp(m2 - _safe(m))
    return m, l1 + l2, a1 * o1 + a2 * o2


@wrong("merge_softmax_stats", "factor|exp|m - m1|sign|invert")
def merge_factor_exp_of_m(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    a1, a2 = torch.exp(_safe(m) - m1).nan_to_num(0.0), torch.exp(_safe(m) - m2).nan_to_num(0.0)
    return m, a1 * l1 + a2 * l2, a1 * o1 + a2 * o2


@wrong("merge_softmax_stats", "average|mean|weight")
def merge_average(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    a1, a2 = torch.exp(m1 - _safe(m)), torch.exp(m2 - _safe(m))
    return m, (a1 * l1 + a2 * l2) / 2, (a1 * o1 + a2 * o2) / 2


def _tiled(q, k, v, block_size, mask=None, scale=None, first_block_m=False, off=0, cols=None):
    S, D = k.shape[-2], q.shape[-1]
    m = torch.full((*q.shape[:-1], 1), float("-inf"))
    l = torch.zeros_like(m)  # noqa: E741
    o = torch.zeros(*q.shape[:-1], v.shape[-1])
    for start in range(0, S, block_size):
        stop = min(start + block_size + off, S)
        s = q @ k[..., start:stop, :].transpose(-2, -1) / (scale or math.sqrt(D))
        if mask is not None:
            s = s.masked_fill(~mask[..., start:stop], float("-inf"))
        bm = s.amax(-1, keepdim=True)
        new = bm if first_block_m else torch.maximum(m, bm)
        p = torch.exp(s - _safe(new))
        a = torch.exp(m - _safe(new))
        l = a * l + p.sum(-1, keepdim=True)  # noqa: E741
        o = a * o + p @ v[..., start:stop, :]
        m = new
    return torch.where(l > 0, o / torch.where(l > 0, l, torch.ones_like(l)), torch.zeros_like(o))


@wrong("tiled_attention", "overlap|block|boundary|twice")
def tiled_overlapping_blocks(q, k, v, block_size, mask=None):
    return _tiled(q, k, v, block_size, mask, off=1)


@wrong("tiled_attention", "sqrt|scale|D")
def tiled_scale_by_d(q, k, v, block_size, mask=None):
    return _tiled(q, k, v, block_size, mask, scale=q.shape[-1])


@wrong("tiled_attention", "running max|maximum|max")
def tiled_block_max_only(q, k, v, block_size, mask=None):
    return _tiled(q, k, v, block_size, mask, first_block_m=True)


@wrong("tiled_attention", "in place|changed")
def tiled_scales_q_in_place(q, k, v, block_size, mask=None):
    q /= math.sqrt(q.shape[-1])
    return _tiled(q, k, v, block_size, mask, scale=1.0)


def _sdpa(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1) @ v


def _need(H, H_kv):
    if H % H_kv:
        raise ValueError(f"H={H} is not a multiple of H_kv={H_kv}")


@wrong("grouped_query_attention", "sqrt|scale")
def gqa_scaled_by_heads(q, k, v):
    H, H_kv = q.shape[1], k.shape[1]
    _need(H, H_kv)
    k, v = k.repeat_interleave(H // H_kv, 1), v.repeat_interleave(H // H_kv, 1)
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1] * H), -1) @ v


@wrong("grouped_query_attention", "values|repeat_interleave")
def gqa_values_repeated(q, k, v):
    H, H_kv = q.shape[1], k.shape[1]
    _need(H, H_kv)
    g = H // H_kv
    return _sdpa(q, k.repeat_interleave(g, 1), v.repeat(1, g, 1, 1))


@wrong("grouped_query_attention", "softmax|dim|queries")
def gqa_softmax_queries(q, k, v):
    H, H_kv = q.shape[1], k.shape[1]
    _need(H, H_kv)
    k, v = k.repeat_interleave(H // H_kv, 1), v.repeat_interleave(H // H_kv, 1)
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -2) @ v


@wrong("kv_cache_bytes", "d_head|n_kv_heads|heads")
def kv_uses_heads_squared(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    return 2 * n_layers * n_kv_heads * n_kv_heads * d_head * seq_len * batch * bytes_per_value


@wrong("kv_cache_bytes", "seq_len|tokens|length")
def kv_no_seq_len(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    return 2 * n_layers * n_kv_heads * d_head * batch * bytes_per_value


@wrong("kv_cache_bytes", "int|round|divide|//")
def kv_gib(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    return 2 * n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_value // 1024


def _band(T, lo, hi=0):
    t, s = torch.arange(T)[:, None], torch.arange(T)[None, :]
    return (s <= t + hi) & (s > t - lo)


def _pos(window):
    if window < 1:
        raise ValueError(f"window must be at least 1, but received window={window}")


@wrong("sliding_window_mask", "transpos|future|causal|keys")
def window_transposed(T, window):
    _pos(window)
    return _band(T, window).T


@wrong("sliding_window_mask", "dtype|bool")
def window_int(T, window):
    _pos(window)
    return _band(T, window).long()


@wrong("sliding_window_mask", "polarity|reversed|True|inverted")
def window_inverted(T, window):
    _pos(window)
    return ~_band(T, window)


@wrong("sliding_window_mask", "window|ignored|causal")
def window_ignored(T, window):
    _pos(window)
    return _band(T, T)


# Added with issue 39's last generic classes (the merge's maximum and factors, the scale's width,
# a window without its query, values not shared like the keys), and a few more of the same kind.
def _merge_to(m1, l1, o1, m2, l2, o2, shift, f1=None, f2=None):
    a1, a2 = torch.exp(m1 - _safe(shift)), torch.exp(m2 - _safe(shift))
    a1, a2 = (a1, a2) if f1 is None else (f1, f2)
    return a1 * l1 + a2 * l2, a1 * o1 + a2 * o2


@wrong("merge_softmax_stats", "shared by all queries|per query")
def merge_global_max(m1, l1, o1, m2, l2, o2):
    big = torch.maximum(m1, m2).max()  # one number for every query
    m = big.expand_as(m1).clone()
    return (m, *_merge_to(m1, l1, o1, m2, l2, o2, m))


@wrong("merge_softmax_stats", "shared by all queries|per query")
def merge_global_max_factors_only(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    big = torch.max(m1.max(), m2.max())
    return (m, *_merge_to(m1, l1, o1, m2, l2, o2, big.expand_as(m)))


@wrong("merge_softmax_stats", "swapped")
def merge_factors_swapped(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    a1, a2 = torch.exp(m1 - _safe(m)), torch.exp(m2 - _safe(m))
    return (m, *_merge_to(m1, l1, o1, m2, l2, o2, m, a2, a1))


@wrong("tiled_attention", "value width|Dv")
def tiled_scale_by_value_width(q, k, v, block_size, mask=None):
    return _tiled(q, k, v, block_size, mask, scale=v.shape[-1])


@wrong("tiled_attention", "sqrt\\(Dv\\)|value width")
def tiled_scale_by_sqrt_value_width(q, k, v, block_size, mask=None):
    return _tiled(q, k, v, block_size, mask, scale=math.sqrt(v.shape[-1]))


@wrong("tiled_attention", "multiplied")
def tiled_scale_multiplied(q, k, v, block_size, mask=None):
    return _tiled(q, k, v, block_size, mask, scale=1 / math.sqrt(q.shape[-1]))


@wrong("sliding_window_mask", "diagonal|itself")
def window_without_self(T, window):
    _pos(window)
    return _band(T, window, hi=-1)  # keys t - window + 1 .. t - 1


@wrong("sliding_window_mask", "diagonal|itself")
def window_strictly_before(T, window):
    _pos(window)
    t, s = torch.arange(T)[:, None], torch.arange(T)[None, :]
    return (s < t) & (t - s <= window)


def _per_head(q, k, v, key_head, value_head):
    H, H_kv = q.shape[1], k.shape[1]
    _need(H, H_kv)
    heads = [
        _sdpa(q[:, h], k[:, key_head(h, H, H_kv)], v[:, value_head(h, H, H_kv)]) for h in range(H)
    ]
    return torch.stack(heads, 1)


@wrong("grouped_query_attention", "values|value heads")
def gqa_values_modulo(q, k, v):
    return _per_head(q, k, v, lambda h, H, n: h // (H // n), lambda h, H, n: h % n)


@wrong("grouped_query_attention", "keys|key heads")
def gqa_keys_modulo(q, k, v):
    return _per_head(q, k, v, lambda h, H, n: h % n, lambda h, H, n: h // (H // n))


@wrong("grouped_query_attention", "head")
def gqa_divides_by_h_kv(q, k, v):
    return _per_head(q, k, v, lambda h, H, n: h // n, lambda h, H, n: h // n)
