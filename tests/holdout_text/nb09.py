"""Holdout for notebook 09, written from notebooks/09_attention_at_scale/09_attention_at_scale.ipynb
alone (without reading the checks)."""

import math

import torch

from tests.holdout._harness import Mistake, collector
from transformer_lab import scaled_dot_product_attention

MISTAKES: list[Mistake] = []
CORRECT: list[Mistake] = []
wrong = collector(MISTAKES, "09")
right = collector(CORRECT, "09")
NAMED_AT_LEAST = 1.0  # measured: 41 of 44 named when written; 44 of 44 after the round's check work


def _merge(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    a1, a2 = torch.exp(m1 - safe), torch.exp(m2 - safe)
    return m, a1 * l1 + a2 * l2, a1 * o1 + a2 * o2


# ---------------------------------------------------------------- merge_softmax_stats
@wrong("merge_softmax_stats", "rescal|max|exp(|exponen|shift|scale")
def merge_without_rescaling(m1, l1, o1, m2, l2, o2):
    return torch.maximum(m1, m2), l1 + l2, o1 + o2


@wrong("merge_softmax_stats", "max|larger|minimum|min(")
def merge_to_smaller_maximum(m1, l1, o1, m2, l2, o2):
    m = torch.minimum(m1, m2)
    safe = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    a1, a2 = torch.exp(m1 - safe), torch.exp(m2 - safe)
    return m, a1 * l1 + a2 * l2, a1 * o1 + a2 * o2


@wrong("merge_softmax_stats", "nan|-inf|empty|both|no key")
def merge_nan_for_two_empty_sets(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    a1, a2 = torch.exp(m1 - m), torch.exp(m2 - m)
    return m, a1 * l1 + a2 * l2, a1 * o1 + a2 * o2


@wrong("merge_softmax_stats", "rescal|output|value")
def merge_output_not_rescaled(m1, l1, o1, m2, l2, o2):
    m, ell, _ = _merge(m1, l1, o1, m2, l2, o2)
    return m, ell, o1 + o2


@wrong("merge_softmax_stats", "normali|divide|unnormali")
def merge_returns_normalised_output(m1, l1, o1, m2, l2, o2):
    m, ell, o = _merge(m1, l1, o1, m2, l2, o2)
    return m, ell, torch.where(ell > 0, o / ell.clamp_min(1e-30), torch.zeros_like(o))


@wrong("merge_softmax_stats", "order|tuple|return")
def merge_returns_m_o_l(m1, l1, o1, m2, l2, o2):
    m, ell, o = _merge(m1, l1, o1, m2, l2, o2)
    return m, o, ell


@wrong("merge_softmax_stats", "sign|exp(|exponen|rescal|m1 - m|direction")
def merge_rescale_sign_flipped(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    a1 = torch.exp(safe - m1).nan_to_num(0.0, posinf=0.0)
    a2 = torch.exp(safe - m2).nan_to_num(0.0, posinf=0.0)
    return m, a1 * l1 + a2 * l2, a1 * o1 + a2 * o2


@wrong("merge_softmax_stats", "max|elementwise|per query|global|each")
def merge_global_maximum(m1, l1, o1, m2, l2, o2):
    m = torch.maximum(m1.max(), m2.max()).expand_as(m1)
    safe = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    a1, a2 = torch.exp(m1 - safe), torch.exp(m2 - safe)
    return m, a1 * l1 + a2 * l2, a1 * o1 + a2 * o2


@wrong("merge_softmax_stats", "-inf|empty|maximum")
def merge_empty_maximum_becomes_zero(m1, l1, o1, m2, l2, o2):
    m, ell, o = _merge(m1, l1, o1, m2, l2, o2)
    return torch.where(torch.isfinite(m), m, torch.zeros_like(m)), ell, o


@right("merge_softmax_stats")
def merge_with_logaddexp_weights(m1, l1, o1, m2, l2, o2):
    m = torch.max(m1, m2)
    shift = m.masked_fill(m == float("-inf"), 0.0)
    w1 = (m1 - shift).exp()
    w2 = (m2 - shift).exp()
    return m, w1 * l1 + w2 * l2, w1 * o1 + w2 * o2


# ---------------------------------------------------------------- tiled_attention
def _tiled(q, k, v, block_size, mask=None, scale=None, slice_mask=True, online=True,
           drop_last=False, empty="zero", fill=float("-inf"), normalise=True):  # fmt: skip
    T, S = q.shape[-2], k.shape[-2]
    sc = math.sqrt(q.shape[-1]) if scale is None else scale
    m = torch.full((*q.shape[:-1], 1), float("-inf"))
    ell = torch.zeros(*q.shape[:-1], 1)
    o = torch.zeros(*q.shape[:-1], v.shape[-1])
    stop_at = S - S % block_size if drop_last and S % block_size else S
    outs = []
    for start in range(0, stop_at, block_size):
        stop = min(start + block_size, S)
        s = q @ k[..., start:stop, :].transpose(-2, -1) / sc
        if mask is not None:
            full = mask.expand(*mask.shape[:-2], T, S) if mask.dim() >= 2 else mask.expand(T, S)
            mb = full[..., start:stop] if slice_mask else full[..., : stop - start]
            s = s.masked_fill(~mb, fill)
        mb_ = s.amax(-1, keepdim=True)
        safe = torch.where(torch.isfinite(mb_), mb_, torch.zeros_like(mb_))
        p = torch.exp(s - safe)
        lb, ob = p.sum(-1, keepdim=True), p @ v[..., start:stop, :]
        if online:
            m, ell, o = _merge(m, ell, o, mb_, lb, ob)
        else:
            outs.append(torch.where(lb > 0, ob / lb.clamp_min(1e-30), torch.zeros_like(ob)))
    if not online:
        return torch.stack(outs).mean(0)
    if not normalise:
        return o
    if empty == "nan":
        return o / ell
    return torch.where(ell > 0, o / ell.clamp_min(1e-30), torch.zeros_like(o))


@wrong("tiled_attention", "scale|sqrt")
def tiled_unscaled(q, k, v, block_size, mask=None):
    return _tiled(q, k, v, block_size, mask, scale=1.0)


@wrong("tiled_attention", "mask|slice|column|block")
def tiled_mask_not_sliced(q, k, v, block_size, mask=None):
    return _tiled(q, k, v, block_size, mask, slice_mask=False)


@wrong("tiled_attention", "rescal|merge|online|max|block|average")
def tiled_averages_block_outputs(q, k, v, block_size, mask=None):
    return _tiled(q, k, v, block_size, mask, online=False)


@wrong("tiled_attention", "last block|shorter|remainder|block|last")
def tiled_drops_short_last_block(q, k, v, block_size, mask=None):
    return _tiled(q, k, v, block_size, mask, drop_last=True)


@wrong("tiled_attention", "nan|no visible key|zero|masked|no key")
def tiled_nan_without_visible_key(q, k, v, block_size, mask=None):
    return _tiled(q, k, v, block_size, mask, empty="nan")


@wrong("tiled_attention", "zero|no visible|masked|-inf|no key")
def tiled_large_negative_fill(q, k, v, block_size, mask=None):
    return _tiled(q, k, v, block_size, mask, fill=-1e9)


@wrong("tiled_attention", "mask|polarity|invert|true")
def tiled_mask_inverted(q, k, v, block_size, mask=None):
    return _tiled(q, k, v, block_size, None if mask is None else ~mask)


@wrong("tiled_attention", "normali|divide|sum|denominator")
def tiled_not_normalised(q, k, v, block_size, mask=None):
    return _tiled(q, k, v, block_size, mask, normalise=False)


@wrong("tiled_attention", "block|memory|tile|all scores|full")
def tiled_computes_all_scores(q, k, v, block_size, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    mx = s.amax(-1, keepdim=True)
    mx = torch.where(torch.isfinite(mx), mx, torch.zeros_like(mx))
    p = torch.exp(s - mx)
    ell = p.sum(-1, keepdim=True)
    return torch.where(ell > 0, (p @ v) / ell.clamp_min(1e-30), torch.zeros(()))


@wrong("tiled_attention", "scale|sqrt|dv|width")
def tiled_scaled_by_value_width(q, k, v, block_size, mask=None):
    return _tiled(q, k, v, block_size, mask, scale=math.sqrt(v.shape[-1]))


@right("tiled_attention")
def tiled_running_max(q, k, v, block_size, mask=None):
    S = k.shape[-2]
    scale = q.shape[-1] ** -0.5
    run_m = q.new_full((*q.shape[:-1], 1), -math.inf)
    run_l = q.new_zeros((*q.shape[:-1], 1))
    run_o = q.new_zeros((*q.shape[:-1], v.shape[-1]))
    for lo in range(0, S, block_size):
        hi = min(lo + block_size, S)
        s = (q * scale) @ k[..., lo:hi, :].mT
        if mask is not None:
            s = s.masked_fill(~mask[..., lo:hi], -math.inf)
        new_m = torch.maximum(run_m, s.amax(-1, keepdim=True))
        shift = new_m.masked_fill(new_m == -math.inf, 0.0)
        p = (s - shift).exp()
        alpha = (run_m - shift).exp()
        run_l = alpha * run_l + p.sum(-1, keepdim=True)
        run_o = alpha * run_o + p @ v[..., lo:hi, :]
        run_m = new_m
    return run_o / run_l.masked_fill(run_l == 0, 1.0)


# ---------------------------------------------------------------- grouped_query_attention
def _heads(q, k):
    H, Hk = q.shape[1], k.shape[1]
    if H % Hk:
        raise ValueError(f"{H} query heads are not a multiple of {Hk} key/value heads")
    return H, Hk


@wrong("grouped_query_attention", "group|consecutive|interleave|repeat|head|order")
def gqa_tiles_kv_heads(q, k, v):
    H, Hk = _heads(q, k)
    r = H // Hk
    return scaled_dot_product_attention(q, k.repeat(1, r, 1, 1), v.repeat(1, r, 1, 1))[0]


@wrong("grouped_query_attention", "valueerror|multiple|divisib|raise")
def gqa_without_check(q, k, v):
    H, Hk = q.shape[1], k.shape[1]
    r = max(H // Hk, 1)
    k, v = k.repeat_interleave(r, dim=1)[:, :H], v.repeat_interleave(r, dim=1)[:, :H]
    if k.shape[1] < H:
        k = torch.cat([k, k[:, -1:].expand(-1, H - k.shape[1], -1, -1)], dim=1)
        v = torch.cat([v, v[:, -1:].expand(-1, H - v.shape[1], -1, -1)], dim=1)
    return scaled_dot_product_attention(q, k, v)[0]


@wrong("grouped_query_attention", "message|name|both|head count|number")
def gqa_error_without_counts(q, k, v):
    H, Hk = q.shape[1], k.shape[1]
    if H % Hk:
        raise ValueError("the query heads cannot be grouped over the key/value heads")
    r = H // Hk
    return scaled_dot_product_attention(
        q, k.repeat_interleave(r, dim=1), v.repeat_interleave(r, dim=1)
    )[0]


@wrong("grouped_query_attention", "group|head|index|h / |size")
def gqa_divides_by_kv_heads(q, k, v):
    H, Hk = _heads(q, k)
    idx = torch.clamp(torch.arange(H) // Hk, max=Hk - 1)
    return scaled_dot_product_attention(q, k[:, idx], v[:, idx])[0]


@wrong("grouped_query_attention", "shape|head|average|mean")
def gqa_averages_query_groups(q, k, v):
    H, Hk = _heads(q, k)
    qg = q.view(q.shape[0], Hk, H // Hk, *q.shape[2:]).mean(2)
    return scaled_dot_product_attention(qg, k, v)[0]


@wrong("grouped_query_attention", "group|head|kv|share")
def gqa_first_kv_head_for_all(q, k, v):
    H, _ = _heads(q, k)
    return scaled_dot_product_attention(
        q, k[:, :1].expand(-1, H, -1, -1), v[:, :1].expand(-1, H, -1, -1)
    )[0]


@wrong("grouped_query_attention", "scale|sqrt")
def gqa_manual_unscaled(q, k, v):
    H, Hk = _heads(q, k)
    r = H // Hk
    k, v = k.repeat_interleave(r, dim=1), v.repeat_interleave(r, dim=1)
    return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v


@wrong("grouped_query_attention", "value|repeat|group|order")
def gqa_values_tiled_keys_interleaved(q, k, v):
    H, Hk = _heads(q, k)
    r = H // Hk
    return scaled_dot_product_attention(q, k.repeat_interleave(r, dim=1), v.repeat(1, r, 1, 1))[0]


@right("grouped_query_attention")
def gqa_grouped_view(q, k, v):
    B, H, T, D = q.shape
    Hk = k.shape[1]
    if H % Hk:
        raise ValueError(f"H={H} is not a multiple of H_kv={Hk}")
    qg = q.view(B, Hk, H // Hk, T, D)  # consecutive query heads share a kv head
    out, _ = scaled_dot_product_attention(qg, k[:, :, None], v[:, :, None])
    return out.reshape(B, H, T, v.shape[-1])


# ---------------------------------------------------------------- kv_cache_bytes
@wrong("kv_cache_bytes", "keys and values|both|factor|key")
def cache_without_factor_two(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    return n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_value


@wrong("kv_cache_bytes", "bytes|dtype|bytes_per_value|per value")
def cache_ignores_bytes_per_value(
    n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2
):
    return 2 * n_layers * n_kv_heads * d_head * seq_len * batch * 2


@wrong("kv_cache_bytes", "batch")
def cache_ignores_batch(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    return 2 * n_layers * n_kv_heads * d_head * seq_len * bytes_per_value


@wrong("kv_cache_bytes", "integer|python int|type|float")
def cache_as_float(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    return 2.0 * n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_value


@wrong("kv_cache_bytes", "layer")
def cache_ignores_layers(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    return 2 * n_kv_heads * d_head * seq_len * batch * bytes_per_value


@wrong("kv_cache_bytes", "bits|bytes")
def cache_in_bits(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    return 2 * n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_value * 8


@wrong("kv_cache_bytes", "seq_len|linear|quadratic|token|length")
def cache_quadratic_in_length(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    return 2 * n_layers * n_kv_heads * d_head * seq_len * seq_len * batch * bytes_per_value


@wrong("kv_cache_bytes", "head|n_kv_heads|d_head")
def cache_ignores_heads(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    return 2 * n_layers * d_head * seq_len * batch * bytes_per_value


@right("kv_cache_bytes")
def cache_by_product(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2):
    return math.prod((2, n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_value))


# ---------------------------------------------------------------- sliding_window_mask
def _window(T, lo_incl, hi_incl=0):
    t = torch.arange(T)[:, None]
    s = torch.arange(T)[None, :]
    return (s >= t - lo_incl) & (s <= t + hi_incl)


def _wcheck(window):
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window}")


@wrong("sliding_window_mask", "off-by-one|off by one|window|one too many")
def window_one_too_wide(T, window):
    _wcheck(window)
    return _window(T, window)


@wrong("sliding_window_mask", "causal|future|symmetric|later")
def window_symmetric(T, window):
    _wcheck(window)
    return _window(T, window - 1, window - 1)


@wrong("sliding_window_mask", "valueerror|window|raise|at least")
def window_without_check(T, window):
    return _window(T, max(window, 1) - 1)


@wrong("sliding_window_mask", "message|name|value")
def window_error_without_value(T, window):
    if window < 1:
        raise ValueError("the window is too small")
    return _window(T, window - 1)


@wrong("sliding_window_mask", "bool|dtype|float")
def window_float_mask(T, window):
    _wcheck(window)
    return _window(T, window - 1).float()


@wrong("sliding_window_mask", "polarity|invert|true|false")
def window_true_means_hidden(T, window):
    _wcheck(window)
    return ~_window(T, window - 1)


@wrong("sliding_window_mask", "transpose|future|direction|query|key")
def window_transposed(T, window):
    _wcheck(window)
    return _window(T, window - 1).T.contiguous()


@wrong("sliding_window_mask", "itself|diagonal|off-by-one|off by one|window")
def window_excludes_itself(T, window):
    _wcheck(window)
    return _window(T, window - 1) & ~torch.eye(T, dtype=torch.bool)


@wrong("sliding_window_mask", "valueerror|window|raise")
def window_rejects_one(T, window):
    if window <= 1:
        raise ValueError(f"window must be at least 2, got {window}")
    return _window(T, window - 1)


@right("sliding_window_mask")
def window_from_triangles(T, window):
    if window < 1:
        raise ValueError(f"window={window} must be >= 1")
    ones = torch.ones(T, T, dtype=torch.bool)
    return ones.tril() & ones.triu(-(window - 1))
