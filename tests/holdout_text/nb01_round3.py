"""Holdout for notebook 01 (third round), written from notebooks/01_self_attention/01_self_attention.ipynb
alone (without reading the checks).

Each wrong entry is a complete student attempt that differs from a correct solution in the one way
its name says. Attempts at the later exercises reuse a correct ``_softmax`` / ``_attention``, as the
notebook asks students to reuse their own.
"""

import math

import torch

from tests.holdout._harness import Mistake, collector

MISTAKES: list[Mistake] = []
CORRECT: list[Mistake] = []
wrong = collector(MISTAKES, "01")
right = collector(CORRECT, "01")
# First shot, written without reading the checks: 36 of 36 named, 0 generic, 0 misleading,
# 0 passed; 36 of 36 named after the round's check work (29 November).
NAMED_AT_LEAST = 1.0


# ---------------------------------------------------------------- correct helpers for reuse


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


# ---------------------------------------------------------------- Exercise 1: softmax


@wrong("softmax", "overflow|stab|max|large")
def softmax_without_max_shift(x, dim=-1):
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


@wrong(
    "softmax",
    "global|whole tensor|per slice|each slice|per row|along dim|along the dim|every slice|underflow",
)
def softmax_subtracts_the_global_max(x, dim=-1):
    m = x.amax()  # one maximum for the whole tensor
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    s = e.sum(dim=dim, keepdim=True)
    return e / torch.where(s == 0, torch.ones_like(s), s)


@wrong("softmax", "dim|axis|dimension")
def softmax_normalises_the_last_dim_always(x, dim=-1):
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    s = e.sum(dim=-1, keepdim=True)
    return e / torch.where(s == 0, torch.ones_like(s), s)


@wrong("softmax", "dim|axis|dimension|max")
def softmax_max_along_the_last_dim_always(x, dim=-1):
    m = x.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    s = e.sum(dim=dim, keepdim=True)
    return e / torch.where(s == 0, torch.ones_like(s), s)


@wrong("softmax", "keepdim|broadcast")
def softmax_without_keepdim(x, dim=-1):
    m = x.amax(dim=dim)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    s = e.sum(dim=dim, keepdim=True)
    return e / torch.where(s == 0, torch.ones_like(s), s)


@wrong("softmax", "-inf|all masked|fully masked|entirely|nan|masked row|masked slice")
def softmax_nan_on_an_all_minus_inf_slice(x, dim=-1):
    m = x.amax(dim=dim, keepdim=True)
    e = torch.exp(x - m)
    return e / e.sum(dim=dim, keepdim=True)


@wrong("softmax", "-inf|all masked|fully masked|entirely|zero|uniform|masked row|masked slice")
def softmax_replaces_minus_inf_by_a_large_negative(x, dim=-1):
    x = torch.nan_to_num(x, neginf=-1e9)  # an all -inf slice becomes uniform instead of zeros
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


@wrong("softmax", "in place|in-place|unchanged|modif|mutat|copy|overwr")
def softmax_edits_x_in_place(x, dim=-1):
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    x.sub_(m).exp_()
    s = x.sum(dim=dim, keepdim=True)
    return x.div_(torch.where(s == 0, torch.ones_like(s), s))


@wrong("softmax", "dtype|float64|double|precision|float32")
def softmax_in_float32(x, dim=-1):
    x = x.float()
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    s = e.sum(dim=dim, keepdim=True)
    return e / torch.where(s == 0, torch.ones_like(s), s)


@right("softmax")
def softmax_logsumexp(x, dim=-1):
    m = x.amax(dim=dim, keepdim=True)
    z = x - torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    lse = torch.logsumexp(z, dim=dim, keepdim=True)  # -inf only for an all -inf slice
    return torch.exp(z - torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse)))


# ---------------------------------------------------------------- Exercise 2: scaled_dot_product_attention


@wrong("scaled_dot_product_attention", "sqrt|square root|√|scal|d_k")
def sdpa_without_scaling(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = _softmax(scores, dim=-1)
    return weights @ v, weights


@wrong("scaled_dot_product_attention", "sqrt|square root|√")
def sdpa_divides_by_D(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / q.shape[-1]
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = _softmax(scores, dim=-1)
    return weights @ v, weights


@wrong("scaled_dot_product_attention", "sqrt|square root|√|scal|d_k")
def sdpa_scales_by_the_number_of_keys(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-2])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = _softmax(scores, dim=-1)
    return weights @ v, weights


@wrong("scaled_dot_product_attention", "transpose|batch|.T|-2|last two")
def sdpa_uses_k_T(q, k, v, mask=None):
    scores = q @ k.T / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = _softmax(scores, dim=-1)
    return weights @ v, weights


@wrong("scaled_dot_product_attention", "dim|axis|over the keys|row|last")
def sdpa_softmax_over_the_queries(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = _softmax(scores, dim=-2)
    return weights @ v, weights


@wrong("scaled_dot_product_attention", "before|after|renormal|sum to one|sum to 1")
def sdpa_masks_after_the_softmax(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = _softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * mask
    return weights @ v, weights


@wrong("scaled_dot_product_attention", "invert|~|true|false|may attend|allowed|opposite")
def sdpa_inverted_mask(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = _softmax(scores, dim=-1)
    return weights @ v, weights


@wrong("scaled_dot_product_attention", "-inf|infinity|inf|zero weight|exactly zero")
def sdpa_masks_with_zero_scores(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, 0.0)
    weights = _softmax(scores, dim=-1)
    return weights @ v, weights


@wrong(
    "scaled_dot_product_attention",
    "-inf|all masked|fully masked|entirely|no key|nothing|uniform|every key",
)
def sdpa_masks_with_minus_1e9(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)  # a query with no allowed key gets uniform weights
    weights = _softmax(scores, dim=-1)
    return weights @ v, weights


@wrong("scaled_dot_product_attention", "order|swap|(out, weights)|tuple|reversed")
def sdpa_returns_weights_first(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = _softmax(scores, dim=-1)
    return weights, weights @ v


@right("scaled_dot_product_attention")
def sdpa_einsum(q, k, v, mask=None):
    scores = torch.einsum("...td,...sd->...ts", q, k) * q.shape[-1] ** -0.5
    if mask is not None:
        scores = torch.where(mask, scores, torch.full_like(scores, float("-inf")))
    weights = _softmax(scores, dim=-1)
    return torch.einsum("...ts,...se->...te", weights, v), weights


# ---------------------------------------------------------------- Exercise 3: self_attention


@wrong("self_attention", "sqrt|square root|√|scal|d_k")
def self_attention_without_scaling(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    weights = _softmax(q @ k.transpose(-2, -1), dim=-1)
    return weights @ v, weights


@wrong("self_attention", "sqrt|square root|√")
def self_attention_divides_by_D(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    weights = _softmax(q @ k.transpose(-2, -1) / w_q.shape[-1], dim=-1)
    return weights @ v, weights


@wrong("self_attention", "sqrt|square root|√|scal|d_k|head width|model width")
def self_attention_scales_by_the_model_width(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    weights = _softmax(q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1]), dim=-1)
    return weights @ v, weights


@wrong("self_attention", "transpose|.T|row vector|orientation|X W|x @ w|nn.Linear|(C, D)")
def self_attention_projects_with_transposed_weights(x, w_q, w_k, w_v):
    # as if the weights were nn.Linear's (D, C) matrices
    return _attention(x @ w_q.T, x @ w_k.T, x @ w_v.T)


@wrong("self_attention", "w_k|w_v|swap|exchanged|mixed up|keys and values")
def self_attention_swaps_w_k_and_w_v(x, w_q, w_k, w_v):
    return _attention(x @ w_q, x @ w_v, x @ w_k)


@wrong("self_attention", "w_v|value projection|as the values|V = X|project the values|unprojected")
def self_attention_uses_x_as_values(x, w_q, w_k, w_v):
    q, k = x @ w_q, x @ w_k
    weights = _softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ x, weights


@wrong("self_attention", "transpose|swap|K Q|k @ q|keys against|rows and columns|symmetric")
def self_attention_scores_keys_against_queries(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    weights = _softmax(k @ q.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ v, weights


@wrong("self_attention", "batch|transpose|.T|-2|last two")
def self_attention_transposes_k_with_T(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    weights = _softmax(q @ k.T / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ v, weights


@wrong("self_attention", "mask|causal|future|triangular|later token")
def self_attention_adds_a_causal_mask(x, w_q, w_k, w_v):
    T = x.shape[-2]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
    return _attention(x @ w_q, x @ w_k, x @ w_v, mask=causal)


@right("self_attention")
def self_attention_einsum(x, w_q, w_k, w_v):
    q = torch.einsum("...tc,cd->...td", x, w_q)
    k = torch.einsum("...tc,cd->...td", x, w_k)
    v = torch.einsum("...tc,cd->...td", x, w_v)
    scores = torch.einsum("...td,...sd->...ts", q, k) / math.sqrt(w_q.shape[1])
    weights = _softmax(scores, dim=-1)
    return torch.einsum("...ts,...sd->...td", weights, v), weights


@right("self_attention")
def self_attention_matmul_and_torch_softmax(x, w_q, w_k, w_v):
    q, k, v = torch.matmul(x, w_q), torch.matmul(x, w_k), torch.matmul(x, w_v)
    weights = torch.softmax(torch.matmul(q, k.mT) / q.size(-1) ** 0.5, dim=-1)
    return torch.matmul(weights, v), weights


# ---------------------------------------------------------------- Exercise 4: self_attention_macs


@wrong(
    "self_attention_macs",
    "head width|d_k|instead of D|not C|T²D|T^2 D|T^2*D|T*T*D|D, not C|attention products",
)
def macs_attention_products_use_C(T, C, D):
    return 3 * T * C * D + 2 * T * T * C


@wrong(
    "self_attention_macs",
    "head width|d_k|instead of D|ignores D|depends on D|D ≠ C|D != C|D = C|D=C",
)
def macs_ignores_D(T, C, D):
    return 3 * T * C * C + 2 * T * T * C


@wrong("self_attention_macs", "three|projection|w_k|w_v|Q, K|K and V")
def macs_counts_one_projection(T, C, D):
    return T * C * D + 2 * T * T * D


@wrong("self_attention_macs", "two|AV|A V|A @ V|output product|values|second product|weights times")
def macs_counts_one_attention_product(T, C, D):
    return 3 * T * C * D + T * T * D


@wrong("self_attention_macs", "integer|float|python int|int(|type")
def macs_returns_a_float(T, C, D):
    return 3 * T * C * D + 2 * math.pow(T, 2) * D


@wrong("self_attention_macs", "T²|T^2|T**2|T * T|T*T|quadratic|square")
def macs_squares_D_instead_of_T(T, C, D):
    return 3 * T * C * D + 2 * T * D * D


@wrong("self_attention_macs", "flop|factor of 2|factor 2|twice|double|2x|two operations|separately")
def macs_counts_flops(T, C, D):
    return 2 * (3 * T * C * D + 2 * T * T * D)  # a multiply and an add counted separately


@wrong(
    "self_attention_macs",
    "softmax|scal|not a matrix product|not multiply-adds|only matrix products|extra",
)
def macs_adds_the_softmax(T, C, D):
    return 3 * T * C * D + 2 * T * T * D + T * T


@right("self_attention_macs")
def macs_factored(T, C, D):
    projections = sum(T * C * D for _ in ("q", "k", "v"))
    return int(projections + T * D * (2 * T))
