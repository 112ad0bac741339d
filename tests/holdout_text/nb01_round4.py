"""Holdout for notebook 01 (fourth round), written from notebooks/01_self_attention/01_self_attention.ipynb
alone (without reading the checks)."""

import math

import torch

from tests.holdout._harness import Mistake, collector

MISTAKES: list[Mistake] = []
CORRECT: list[Mistake] = []
wrong = collector(MISTAKES, "01")
right = collector(CORRECT, "01")
# Written after rounds 2 and 3 had tuned the checks, and measured once, never tuned on: the
# forecast for a new class. First shot 26 of 28 named, 0 generic, 2 misleading, 0 passed.
NAMED_AT_LEAST = 0.92


# --- correct helpers the later attempts build on ----------------------------------------------


def _softmax(x, dim=-1):
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    s = e.sum(dim=dim, keepdim=True)
    return e / torch.where(s == 0, torch.ones_like(s), s)


def _attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = _softmax(scores, dim=-1)
    return weights @ v, weights


# --- Exercise 1: softmax ----------------------------------------------------------------------


@wrong("softmax", "stab|overflow|subtract|max")
def softmax_without_subtracting_the_max(x, dim=-1):
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


@wrong("softmax", "dim|axis")
def softmax_normalises_over_last_dim_always(x, dim=-1):
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    s = e.sum(dim=-1, keepdim=True)
    return e / torch.where(s == 0, torch.ones_like(s), s)


@wrong("softmax", "keepdim|broadcast")
def softmax_max_without_keepdim(x, dim=-1):
    m = x.amax(dim=dim)  # (..., ) without the reduced dimension: broadcasts along the wrong axis
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    s = e.sum(dim=dim, keepdim=True)
    return e / torch.where(s == 0, torch.ones_like(s), s)


@wrong("softmax", "global|whole tensor|per slice|each slice|per row|underflow|along dim")
def softmax_subtracts_global_max(x, dim=-1):
    m = x.max()
    if not torch.isfinite(m):
        m = torch.zeros_like(m)
    e = torch.exp(x - m)
    s = e.sum(dim=dim, keepdim=True)
    return e / torch.where(s == 0, torch.ones_like(s), s)


@wrong("softmax", "-inf|masked|all zero|zeros|nan|entirely")
def softmax_nan_on_fully_masked_slice(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


@wrong("softmax", "-inf|masked|0/0|0 / 0|divid|nan|entirely")
def softmax_shifts_masked_slice_but_divides_by_zero(x, dim=-1):
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    return e / e.sum(dim=dim, keepdim=True)


@wrong("softmax", "in place|in-place|modif|mutat|input|unchanged|copy|clone")
def softmax_subtracts_max_in_place(x, dim=-1):
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    x -= m
    x.exp_()
    s = x.sum(dim=dim, keepdim=True)
    return x / torch.where(s == 0, torch.ones_like(s), s)


@right("softmax")
def softmax_clamped_max_and_nan_to_num(x, dim=-1):
    m = torch.max(x, dim=dim, keepdim=True).values
    m = m.clamp(min=torch.finfo(x.dtype).min)  # an all -inf slice is shifted by a finite number
    e = torch.exp(x - m)
    return torch.nan_to_num(e / e.sum(dim=dim, keepdim=True), nan=0.0)


# --- Exercise 2: scaled_dot_product_attention -------------------------------------------------


@wrong("scaled_dot_product_attention", "sqrt|scal|√|d_k")
def sdpa_forgets_the_scaling(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = _softmax(scores, dim=-1)
    return weights @ v, weights


@wrong("scaled_dot_product_attention", "sqrt|scal|√|d_k")
def sdpa_divides_by_D(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / q.shape[-1]
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = _softmax(scores, dim=-1)
    return weights @ v, weights


@wrong("scaled_dot_product_attention", "sqrt|scal|√|d_k|value width|dv")
def sdpa_scales_by_value_width(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(v.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = _softmax(scores, dim=-1)
    return weights @ v, weights


@wrong("scaled_dot_product_attention", "transpose|batch|.T|swap|last two")
def sdpa_uses_k_dot_T(q, k, v, mask=None):
    scores = q @ k.T / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = _softmax(scores, dim=-1)
    return weights @ v, weights


@wrong("scaled_dot_product_attention", "dim|axis|over the keys|queries|column")
def sdpa_softmax_over_queries(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = _softmax(scores, dim=-2)
    return weights @ v, weights


@wrong("scaled_dot_product_attention", "before|after|renormal|sum to one|sum to 1|-inf")
def sdpa_masks_after_the_softmax(q, k, v, mask=None):
    weights = _softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    if mask is not None:
        weights = weights * mask
    return weights @ v, weights


@wrong("scaled_dot_product_attention", "invert|polarity|opposite|revers|flip|~")
def sdpa_mask_polarity_inverted(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = _softmax(scores, dim=-1)
    return weights @ v, weights


@wrong("scaled_dot_product_attention", "-inf|fully|all false|all-false|1e9|entirely|no key")
def sdpa_masks_with_large_negative_number(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    weights = _softmax(scores, dim=-1)
    return weights @ v, weights


@right("scaled_dot_product_attention")
def sdpa_einsum(q, k, v, mask=None):
    scores = torch.einsum("...td,...sd->...ts", q, k) * q.shape[-1] ** -0.5
    if mask is not None:
        scores = torch.where(mask, scores, torch.full_like(scores, -math.inf))
    weights = _softmax(scores, dim=-1)
    return torch.einsum("...ts,...sv->...tv", weights, v), weights


# --- Exercise 3: self_attention ---------------------------------------------------------------


@wrong("self_attention", "transpose|.t|nn.linear|convention|x @ w|w.t")
def self_attention_nn_linear_convention(x, w_q, w_k, w_v):
    q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T  # only runs when C == D
    return _attention(q, k, v)


@wrong("self_attention", "w_v|value|w_k|key|swap")
def self_attention_values_from_w_k(x, w_q, w_k, w_v):
    return _attention(x @ w_q, x @ w_k, x @ w_k)


@wrong("self_attention", "w_q|quer|symmetric")
def self_attention_queries_from_w_k(x, w_q, w_k, w_v):
    return _attention(x @ w_k, x @ w_k, x @ w_v)


@wrong("self_attention", "sqrt|scal|d_k|head width|model width")
def self_attention_scales_by_model_width(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    weights = _softmax(q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1]), dim=-1)
    return weights @ v, weights


@wrong("self_attention", "batch|transpose|3-d|3d|(b, t, c)|.t")
def self_attention_only_unbatched(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    weights = _softmax(q @ k.T / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ v, weights


@wrong("self_attention", "softmax|normali|sum to one|sum to 1|raw")
def self_attention_returns_scores_as_weights(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    out, _ = _attention(q, k, v)
    return out, scores


@right("self_attention")
def self_attention_loops_over_the_batch(x, w_q, w_k, w_v):
    if x.dim() == 2:
        q, k, v = torch.matmul(x, w_q), torch.matmul(x, w_k), torch.matmul(x, w_v)
        return _attention(q, k, v)
    outs, weights = zip(*(self_attention_loops_over_the_batch(xb, w_q, w_k, w_v) for xb in x))
    return torch.stack(outs), torch.stack(weights)


# --- Exercise 4: self_attention_macs ----------------------------------------------------------


@wrong("self_attention_macs", "projection|w_q|linear|tcd|xw")
def macs_attention_products_only(T, C, D):
    return 2 * T * T * D


@wrong("self_attention_macs", "both|a v|av |a @ v|second product|output product|weighted")
def macs_counts_one_attention_product(T, C, D):
    return 3 * T * C * D + T * T * D


@wrong("self_attention_macs", "three|w_v|value projection|v = xw|third")
def macs_counts_two_projections(T, C, D):
    return 2 * T * C * D + 2 * T * T * D


@wrong("self_attention_macs", "head width|head dim|d_k|c instead|d instead|t²c|t^2 c|t*t*c")
def macs_attention_products_use_C(T, C, D):
    return 3 * T * C * D + 2 * T * T * C


@wrong("self_attention_macs", "integer|float|python int|type")
def macs_returns_float(T, C, D):
    return T * D * (3 * C + 2 * T) / 1.0


@wrong("self_attention_macs", "flop|factor|twice|double|2x|two per")
def macs_counts_flops(T, C, D):
    return 2 * (3 * T * C * D + 2 * T * T * D)


@wrong("self_attention_macs", "softmax|scaling|extra|not a matrix product|non-matmul|elementwise")
def macs_adds_softmax_and_scaling(T, C, D):
    return 3 * T * C * D + 2 * T * T * D + 2 * T * T


@right("self_attention_macs")
def macs_factored(T, C, D):
    return int(T) * int(D) * (3 * int(C) + 2 * int(T))
