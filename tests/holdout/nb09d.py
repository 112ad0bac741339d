"""Holdout mistakes for notebook 09 (attention at scale), fourth round (issue 23): written from the
notebook's text after the checks were changed for that issue, and measured once, untuned.

Measured once on the checks of branch fasttrue (issue 23), before any change made because of
this set: 22 mistakes: named 19, generic 1, misleading 2, passed 0 (86%). Misleading by the keyword
rule: kv_cache_bytes without the factor 2 (the verdict, "the factor 2 is missing: the cache holds a
key AND a value", was right; the required words of this module were too narrow and were widened
afterwards), and kv_cache_bytes with a fixed 4 bytes per value, told "the factor 2 is missing"
because the first case has bytes_per_value=8 (really misleading). Generic: grouped_query_attention
whose groups all read value head 0 (the heads that differ are listed, no mistake named).
After the fixes it prompted (tuned on it from then on, so no longer a holdout figure): 21 of 22:
check_kv_cache_bytes now calls again with each argument tripled and names an ignored one first.
gqa_values_not_expanded is still generic.
"""

from __future__ import annotations

import math

import torch

from tests.holdout._harness import collector
from transformer_lab import scaled_dot_product_attention

MISTAKES: list = []
wrong = collector(MISTAKES, "09")
NAMED_AT_LEAST = 1.0  # h17: 22 of 22 named (GQA value heads)


# --- merge_softmax_stats ----------------------------------------------------------------------


@wrong("merge_softmax_stats", "nan|-inf|empty|both|shift by 0")
def merge_no_empty_guard(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    a1, a2 = torch.exp(m1 - m), torch.exp(m2 - m)
    return m, a1 * l1 + a2 * l2, a1 * o1 + a2 * o2


@wrong("merge_softmax_stats", "rescal|exp|factor")
def merge_o_not_rescaled(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    shift = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    a1, a2 = torch.exp(m1 - shift), torch.exp(m2 - shift)
    return m, a1 * l1 + a2 * l2, o1 + o2


@wrong("merge_softmax_stats", "order|tuple|(m, l, o)")
def merge_returns_l_first(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    shift = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    a1, a2 = torch.exp(m1 - shift), torch.exp(m2 - shift)
    return a1 * l1 + a2 * l2, m, a1 * o1 + a2 * o2


@wrong("merge_softmax_stats", "sign|m - m|exp(m|direction|larger")
def merge_factors_inverted(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    shift = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    a1, a2 = torch.exp(shift - m1), torch.exp(shift - m2)
    a1, a2 = torch.nan_to_num(a1, posinf=0.0), torch.nan_to_num(a2, posinf=0.0)
    return m, a1 * l1 + a2 * l2, a1 * o1 + a2 * o2


@wrong("merge_softmax_stats", "divid|o / l|normalis|divide")
def merge_divides_already(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    shift = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    a1, a2 = torch.exp(m1 - shift), torch.exp(m2 - shift)
    total = a1 * l1 + a2 * l2
    return m, total, (a1 * o1 + a2 * o2) / torch.where(total > 0, total, torch.ones_like(total))


# --- tiled_attention --------------------------------------------------------------------------


def _merge(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    shift = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    a1, a2 = torch.exp(m1 - shift), torch.exp(m2 - shift)
    return m, a1 * l1 + a2 * l2, a1 * o1 + a2 * o2


def _tiled(q, k, v, block_size, mask, *, scale=True, block_guard=True, final_guard=True,
           mask_cols=True, step=None, nan_fix=False):  # fmt: skip
    S = k.shape[-2]
    m = torch.full((*q.shape[:-1], 1), float("-inf"))
    total = torch.zeros_like(m)
    o = torch.zeros(*q.shape[:-1], v.shape[-1])
    for start in range(0, S, step or block_size):
        stop = min(start + block_size, S)
        s = q @ k[..., start:stop, :].transpose(-2, -1)
        if scale:
            s = s / math.sqrt(q.shape[-1])
        if mask is not None:
            cols = mask[..., start:stop] if mask_cols else mask[..., : stop - start]
            s = s.masked_fill(~cols, float("-inf"))
        mb = s.amax(-1, keepdim=True)
        shift = torch.where(torch.isfinite(mb), mb, torch.zeros_like(mb)) if block_guard else mb
        p = torch.exp(s - shift)
        m, total, o = _merge(m, total, o, mb, p.sum(-1, keepdim=True), p @ v[..., start:stop, :])
    out = o / torch.where(total > 0, total, torch.ones_like(total)) if final_guard else o / total
    return torch.nan_to_num(out) if nan_fix else out


@wrong("tiled_attention", "guard|-inf|block|shift by 0|no key")
def tiled_nan_patched_afterwards(q, k, v, block_size, mask=None):
    return _tiled(q, k, v, block_size, mask, block_guard=False, nan_fix=True)


@wrong("tiled_attention", "sqrt|scal|√D")
def tiled_unscaled(q, k, v, block_size, mask=None):
    return _tiled(q, k, v, block_size, mask, scale=False)


@wrong("tiled_attention", "mask|slice|columns|start:stop")
def tiled_mask_not_sliced(q, k, v, block_size, mask=None):
    return _tiled(q, k, v, block_size, mask, mask_cols=False)


@wrong("tiled_attention", "overlap|twice|step|block_size")
def tiled_overlapping_blocks(q, k, v, block_size, mask=None):
    return _tiled(q, k, v, block_size, mask, step=max(1, block_size - 1))


@wrong("tiled_attention", "zeros|all masked|no key|nan|l > 0")
def tiled_final_division_unguarded(q, k, v, block_size, mask=None):
    return _tiled(q, k, v, block_size, mask, final_guard=False)


# --- grouped_query_attention ------------------------------------------------------------------


def _check(q, k):
    H, H_kv = q.shape[1], k.shape[1]
    if H % H_kv:
        raise ValueError(f"H={H} is not a multiple of H_kv={H_kv}")
    return H // H_kv


@wrong("grouped_query_attention", "repeat_interleave|consecutive|group|repeat|tile")
def gqa_repeat_tiles(q, k, v):
    g = _check(q, k)
    return scaled_dot_product_attention(q, k.repeat(1, g, 1, 1), v.repeat(1, g, 1, 1))[0]


@wrong("grouped_query_attention", "ValueError|multiple")
def gqa_no_check(q, k, v):
    g = q.shape[1] // k.shape[1]
    return scaled_dot_product_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1))[0]


@wrong("grouped_query_attention", "value|values")
def gqa_values_not_expanded(q, k, v):
    g = _check(q, k)
    kk = k.repeat_interleave(g, 1)
    vv = v[:, :1].expand_as(kk)  # every group reads the first value head
    return scaled_dot_product_attention(q, kk, vv)[0]


@wrong("grouped_query_attention", "average|mean|query heads|group")
def gqa_averages_query_heads(q, k, v):
    g = _check(q, k)
    B, H, T, D = q.shape
    qq = q.reshape(B, H // g, g, T, D).mean(2)  # one query per group
    out = scaled_dot_product_attention(qq, k, v)[0]
    return out.repeat_interleave(g, 1)


# --- kv_cache_bytes ---------------------------------------------------------------------------


@wrong("kv_cache_bytes", "keys and values|both|twice|factor 2|key and a value|key AND a value")
def kv_keys_only(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    return n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_value


@wrong("kv_cache_bytes", "batch")
def kv_batch_ignored(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    return 2 * n_layers * n_kv_heads * d_head * seq_len * bytes_per_value


@wrong("kv_cache_bytes", "int|float|type")
def kv_in_mebibytes_float(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    return 2 * n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_value / 1.0


@wrong("kv_cache_bytes", "bytes_per_value|float32|per value")
def kv_float32_assumed(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    return 2 * n_layers * n_kv_heads * d_head * seq_len * batch * 4


# --- sliding_window_mask ----------------------------------------------------------------------


def _window(T, window, lo_strict=True, causal=True):
    t, s = torch.arange(T)[:, None], torch.arange(T)[None, :]
    lo = (s > t - window) if lo_strict else (s >= t - window)
    return (s <= t) & lo if causal else lo & (s < t + window)


@wrong("sliding_window_mask", "window|off by one|itself|w + 1|one key too many")
def swm_one_too_many(T, window):
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window}")
    return _window(T, window, lo_strict=False)


@wrong("sliding_window_mask", "causal|future|later|above")
def swm_symmetric(T, window):
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window}")
    return _window(T, window, causal=False)


@wrong("sliding_window_mask", "ValueError|window|0")
def swm_no_validation(T, window):
    return _window(T, max(window, 1))


@wrong("sliding_window_mask", "bool|dtype|True")
def swm_float_mask(T, window):
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window}")
    return _window(T, window).float()
