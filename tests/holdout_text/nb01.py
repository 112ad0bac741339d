"""Holdout for notebook 01, written from notebooks/01_self_attention/01_self_attention.ipynb alone
(without reading the checks)."""

import math

import torch

from tests.holdout._harness import Mistake, collector

MISTAKES: list[Mistake] = []
CORRECT: list[Mistake] = []
wrong = collector(MISTAKES, "01")
right = collector(CORRECT, "01")
NAMED_AT_LEAST = 1.0  # measured: 45 of 45 named


def _softmax(x, dim=-1):
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    s = e.sum(dim=dim, keepdim=True)
    return e / torch.where(s == 0, torch.ones_like(s), s)


def _attend(q, k, v, mask=None, scale=None, dim=-1):
    scores = q @ k.transpose(-2, -1) / (math.sqrt(q.shape[-1]) if scale is None else scale)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = _softmax(scores, dim=dim)
    return w @ v, w


# ---------------------------------------------------------------- softmax
@wrong("softmax", "overflow|stab|max|-inf|infinit|nan|large")
def softmax_without_max_shift(x, dim=-1):
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


@wrong("softmax", "dim|axis")
def softmax_ignores_dim(x, dim=-1):
    return _softmax(x, -1)


@wrong("softmax", "max|slice|row|whole|global|underflow|dim")
def softmax_shift_by_global_max(x, dim=-1):
    e = torch.exp(x - x.max())
    return e / e.sum(dim=dim, keepdim=True)


@wrong("softmax", "max|minimum|min(|overflow|stab")
def softmax_shift_by_min(x, dim=-1):
    e = torch.exp(x - x.amin(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


@wrong("softmax", "dim|axis|sum|normali")
def softmax_sum_over_other_dim(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    other = 0 if dim % x.dim() != 0 else -1
    return e / e.sum(dim=other, keepdim=True)


@wrong("softmax", "-inf|masked|nan|fully|entire|zero")
def softmax_nan_on_all_minus_inf(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


@wrong("softmax", "-inf|masked|zero|uniform|fully|entire")
def softmax_minus_inf_as_large_negative(x, dim=-1):
    x = torch.nan_to_num(x, neginf=-1e9)
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


@wrong("softmax", "in place|in-place|modif|input|mutat")
def softmax_in_place(x, dim=-1):
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    x.sub_(m).exp_()
    s = x.sum(dim=dim, keepdim=True)
    return x.div_(torch.where(s == 0, torch.ones_like(s), s))


@wrong("softmax", "keepdim|broadcast|shape|dim")
def softmax_max_without_keepdim(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim))
    return e / e.sum(dim=dim)


@wrong("softmax", "log-prob|log prob|log_softmax|log-softmax|log softmax|logarithm")
def softmax_returns_log_probs(x, dim=-1):
    m = x.amax(dim=dim, keepdim=True)
    return x - m - torch.log(torch.exp(x - m).sum(dim=dim, keepdim=True))


@wrong("softmax", "sum|normali|divid")
def softmax_not_normalised(x, dim=-1):
    return torch.exp(x - x.amax(dim=dim, keepdim=True))


@right("softmax")
def softmax_via_logsumexp(x, dim=-1):
    lse = torch.logsumexp(x, dim=dim, keepdim=True)  # -inf for an all -inf slice
    safe = torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))
    out = torch.exp(x - safe)
    return torch.where(torch.isfinite(lse), out, torch.zeros_like(out))


@right("softmax")
def softmax_moved_dim(x, dim=-1):
    y = x.movedim(dim, -1)
    m = y.max(dim=-1, keepdim=True).values
    m = m.masked_fill(torch.isinf(m) & (m < 0), 0.0)
    e = (y - m).exp()
    total = e.sum(-1, keepdim=True)
    return (e / total.clamp_min(torch.finfo(e.dtype).tiny)).movedim(-1, dim)


# ---------------------------------------------------------------- scaled_dot_product_attention
@wrong("scaled_dot_product_attention", "scale|sqrt")
def sdpa_unscaled(q, k, v, mask=None):
    return _attend(q, k, v, mask, scale=1.0)


@wrong("scaled_dot_product_attention", "scale|sqrt")
def sdpa_divided_by_d(q, k, v, mask=None):
    return _attend(q, k, v, mask, scale=q.shape[-1])


@wrong("scaled_dot_product_attention", "scale|sqrt|width|value|dv")
def sdpa_scaled_by_value_width(q, k, v, mask=None):
    return _attend(q, k, v, mask, scale=math.sqrt(v.shape[-1]))


@wrong("scaled_dot_product_attention", "scale|sqrt|key|length")
def sdpa_scaled_by_key_count(q, k, v, mask=None):
    return _attend(q, k, v, mask, scale=math.sqrt(k.shape[-2]))


@wrong("scaled_dot_product_attention", "dim|axis|key|row|column|quer")
def sdpa_softmax_over_queries(q, k, v, mask=None):
    return _attend(q, k, v, mask, dim=-2)


@wrong("scaled_dot_product_attention", "transpose|k.t|batch|last two|shape|dim")
def sdpa_k_dot_T(q, k, v, mask=None):
    scores = q @ k.T / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = _softmax(scores)
    return w @ v, w


@wrong("scaled_dot_product_attention", "mask|polarity|invert|true|false")
def sdpa_mask_inverted(q, k, v, mask=None):
    return _attend(q, k, v, None if mask is None else ~mask)


@wrong("scaled_dot_product_attention", "mask|before|after|sum")
def sdpa_mask_after_softmax(q, k, v, mask=None):
    _, w = _attend(q, k, v)
    if mask is not None:
        w = w * mask
    return w @ v, w


@wrong("scaled_dot_product_attention", "mask|-inf|infinit|zero")
def sdpa_mask_fills_zero(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, 0.0)
    w = _softmax(scores)
    return w @ v, w


@wrong("scaled_dot_product_attention", "mask")
def sdpa_ignores_mask(q, k, v, mask=None):
    return _attend(q, k, v)


@wrong("scaled_dot_product_attention", "order|return|swap|tuple|weights")
def sdpa_returns_weights_first(q, k, v, mask=None):
    out, w = _attend(q, k, v, mask)
    return w, out


@wrong("scaled_dot_product_attention", "scale|sqrt|after|before")
def sdpa_scales_after_softmax(q, k, v, mask=None):
    _, w = _attend(q, k, v, mask, scale=1.0)
    w = w / math.sqrt(q.shape[-1])
    return w @ v, w


@wrong("scaled_dot_product_attention", "-inf|fully|entire|nothing|zero|uniform|nan")
def sdpa_mask_large_negative(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    w = torch.softmax(scores, dim=-1)
    return w @ v, w


@right("scaled_dot_product_attention")
def sdpa_einsum(q, k, v, mask=None):
    scores = torch.einsum("...td,...sd->...ts", q * q.shape[-1] ** -0.5, k)
    if mask is not None:
        scores = torch.where(mask, scores, torch.full_like(scores, float("-inf")))
    w = _softmax(scores, dim=-1)
    return torch.einsum("...ts,...sv->...tv", w, v), w


@right("scaled_dot_product_attention")
def sdpa_matmul_swapaxes(q, k, v, mask=None):
    scores = torch.matmul(q, k.swapaxes(-1, -2)) / q.size(-1) ** 0.5
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), -math.inf)
    w = _softmax(scores)
    return torch.matmul(w, v), w


# ---------------------------------------------------------------- self_attention
@wrong("self_attention", "weight|projection|w_q|w_k|w_v|ignor")
def self_attention_without_projections(x, w_q, w_k, w_v):
    return _attend(x, x, x)


@wrong("self_attention", "w_q|w_k|swap|transpose|query|key")
def self_attention_swapped_q_and_k(x, w_q, w_k, w_v):
    return _attend(x @ w_k, x @ w_q, x @ w_v)


@wrong("self_attention", "w_v|value")
def self_attention_values_unprojected(x, w_q, w_k, w_v):
    return _attend(x @ w_q, x @ w_k, x)


@wrong("self_attention", "transpose|shape|linear|w.t|orient")
def self_attention_linear_convention(x, w_q, w_k, w_v):
    return _attend(x @ w_q.T, x @ w_k.T, x @ w_v.T)


@wrong("self_attention", "scale|sqrt")
def self_attention_unscaled(x, w_q, w_k, w_v):
    return _attend(x @ w_q, x @ w_k, x @ w_v, scale=1.0)


@wrong("self_attention", "scale|sqrt")
def self_attention_divided_by_d(x, w_q, w_k, w_v):
    return _attend(x @ w_q, x @ w_k, x @ w_v, scale=w_q.shape[1])


@wrong("self_attention", "scale|sqrt|width")
def self_attention_scaled_by_model_width(x, w_q, w_k, w_v):
    return _attend(x @ w_q, x @ w_k, x @ w_v, scale=math.sqrt(x.shape[-1]))


@wrong("self_attention", "batch|3-d|transpose|dim|shape")
def self_attention_only_2d(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    w = _softmax(q @ k.T / math.sqrt(q.shape[-1]))
    return w @ v, w


@wrong("self_attention", "dim|axis|row|column")
def self_attention_softmax_over_queries(x, w_q, w_k, w_v):
    return _attend(x @ w_q, x @ w_k, x @ w_v, dim=-2)


@wrong("self_attention", "transpose|weights|row|column")
def self_attention_weights_transposed(x, w_q, w_k, w_v):
    out, w = _attend(x @ w_q, x @ w_k, x @ w_v)
    return out, w.transpose(-2, -1)


@wrong("self_attention", "w_v|w_q|value|query|swap")
def self_attention_values_with_w_q(x, w_q, w_k, w_v):
    return _attend(x @ w_q, x @ w_k, x @ w_q)


@right("self_attention")
def self_attention_with_einsum(x, w_q, w_k, w_v):
    q = torch.einsum("...tc,cd->...td", x, w_q)
    k = torch.einsum("...tc,cd->...td", x, w_k)
    v = torch.einsum("...tc,cd->...td", x, w_v)
    return _attend(q, k, v)


@right("self_attention")
def self_attention_stacked_weights(x, w_q, w_k, w_v):
    sizes = [w_q.shape[1], w_k.shape[1], w_v.shape[1]]
    qkv = x @ torch.cat([w_q, w_k, w_v], dim=1)  # (..., T, 2D + Dv)
    q, k, v = qkv.split(sizes, dim=-1)
    return _attend(q, k, v)


# ---------------------------------------------------------------- self_attention_macs
@wrong("self_attention_macs", "projection|w_q|three")
def macs_without_projections(T, C, D):
    return 2 * T * T * D


@wrong("self_attention_macs", "projection|three")
def macs_two_projections(T, C, D):
    return 2 * T * C * D + 2 * T * T * D


@wrong("self_attention_macs", "projection|three")
def macs_one_projection(T, C, D):
    return T * C * D + 2 * T * T * D


@wrong("self_attention_macs", "two products|both products|product|output")
def macs_one_attention_product(T, C, D):
    return 3 * T * C * D + T * T * D


@wrong("self_attention_macs", "width|head")
def macs_scores_with_model_width(T, C, D):
    return 3 * T * C * D + 2 * T * T * C


@wrong("self_attention_macs", "width|head")
def macs_projections_square(T, C, D):
    return 3 * T * C * C + 2 * T * T * D


@wrong("self_attention_macs", "integer|python int|type|float")
def macs_as_float(T, C, D):
    return 3.0 * T * C * D + 2.0 * T**2 * D


@wrong("self_attention_macs", "flop|twice|double|multiply-add")
def macs_counted_as_flops(T, C, D):
    return 2 * (3 * T * C * D + 2 * T * T * D)


@wrong("self_attention_macs", "softmax|scale|extra")
def macs_with_softmax(T, C, D):
    return 3 * T * C * D + 2 * T * T * D + 2 * T * T


@wrong("self_attention_macs", "quadratic|square|length|t^2|t²|t * t")
def macs_attention_linear_in_T(T, C, D):
    return 3 * T * C * D + 2 * T * D


@right("self_attention_macs")
def macs_per_step(T, C, D):
    projections = 3 * (T * C * D)  # (T, C) @ (C, D), three times
    scores = T * T * D  # (T, D) @ (D, T)
    mix = T * T * D  # (T, T) @ (T, D)
    return int(projections + scores + mix)


@right("self_attention_macs")
def macs_factored(T, C, D):
    return T * D * (3 * C + 2 * T)
