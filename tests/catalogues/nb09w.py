"""Notebook 09, the wide catalogue (issue 39): mistakes a student makes reading the notebook's
text (online-softmax merges, tiled attention, grouped-query attention, the KV cache's size,
sliding windows), written without looking at what the checks detect.
``python -m tests.holdout report 09w``."""

from __future__ import annotations

import math

import torch

from tests.holdout._harness import Mistake, collector

MISTAKES: list[Mistake] = []
# Before the fixes of issue 39: 15/2/1/0 named/generic/misleading/passed; after: 18 of 18 named, 0 generic.
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
