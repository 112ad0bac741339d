"""Holdout for notebook 01 (second round), written from
notebooks/01_self_attention/01_self_attention.ipynb alone (without reading the checks).

Each wrong function is a complete student attempt that differs from a correct answer in the one
way its name says. Attempts at Exercises 2 and 3 that reuse earlier answers call ``_softmax`` and
``_attention``, which stand for the student's own (correct) answers to Exercises 1 and 2.
"""

import math

import torch

from tests.holdout._harness import Mistake, collector

MISTAKES: list[Mistake] = []
CORRECT: list[Mistake] = []
wrong = collector(MISTAKES, "01")
right = collector(CORRECT, "01")
# First shot, written without reading the checks: 39 of 40 named, 1 generic, 0 misleading,
# 0 passed; 40 of 40 named after the round's check work (29 November).
NAMED_AT_LEAST = 1.0


# --- the student's own correct answers to Exercises 1 and 2, reused later --------------------------


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


# --- Exercise 1: softmax ---------------------------------------------------------------------------


@wrong("softmax", "dim|axis|dimension")
def softmax_ignores_the_dim_argument(x, dim=-1):
    m = x.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    s = e.sum(dim=-1, keepdim=True)
    return e / torch.where(s == 0, torch.ones_like(s), s)


@wrong("softmax", "dim|axis|dimension|slice|each row|every row|whole tensor|all elements")
def softmax_sums_over_the_whole_tensor(x, dim=-1):
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    return e / e.sum()


@wrong("softmax", "overflow|stab|max|large")
def softmax_without_subtracting_the_max(x, dim=-1):
    e = torch.exp(x)
    s = e.sum(dim=dim, keepdim=True)
    return e / torch.where(s == 0, torch.ones_like(s), s)


@wrong("softmax", "overflow|stab|max|large")
def softmax_subtracts_the_min(x, dim=-1):
    m = x.amin(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    s = e.sum(dim=dim, keepdim=True)
    return e / torch.where(s == 0, torch.ones_like(s), s)


@wrong(
    "softmax",
    "max along|per slice|per row|each row|each slice|global|whole tensor|underflow|keepdim",
)
def softmax_subtracts_the_global_max(x, dim=-1):
    m = x.amax()
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    return e / e.sum(dim=dim, keepdim=True)


@wrong("softmax", "keepdim|broadcast")
def softmax_max_without_keepdim(x, dim=-1):
    m = x.amax(dim=dim)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    return e / e.sum(dim=dim, keepdim=True)


@wrong("softmax", "-inf|masked|nan|all zero|zeros|entirely")
def softmax_nan_on_an_all_minus_inf_slice(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


@wrong("softmax", "-inf|masked|uniform|all zero|zeros|entirely")
def softmax_replaces_minus_inf_by_a_large_negative(x, dim=-1):
    x = x.masked_fill(x == float("-inf"), -1e9)  # "avoids the nan"
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


@wrong("softmax", "in place|in-place|modif|mutat|input|unchanged|overwr")
def softmax_edits_x_in_place(x, dim=-1):
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    x.sub_(m).exp_()
    s = x.sum(dim=dim, keepdim=True)
    return x.div_(torch.where(s == 0, torch.ones_like(s), s))


@wrong("softmax", "dtype|float64|double|float32|precision")
def softmax_casts_to_float32(x, dim=-1):
    x = x.float()
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    s = e.sum(dim=dim, keepdim=True)
    return e / torch.where(s == 0, torch.ones_like(s), s)


# --- Exercise 2: scaled_dot_product_attention ------------------------------------------------------


@wrong(
    "scaled_dot_product_attention", "sqrt|square root|√|scaling|scale by|scale the|scaled by|divid"
)
def sdpa_without_scaling(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = _softmax(scores, dim=-1)
    return weights @ v, weights


@wrong("scaled_dot_product_attention", "sqrt|square root|√|by d instead|by D,")
def sdpa_divides_by_D(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / q.shape[-1]
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = _softmax(scores, dim=-1)
    return weights @ v, weights


@wrong("scaled_dot_product_attention", "transpose|batch|k.T|last two|swap|3-d|3d")
def sdpa_transposes_k_with_dot_T(q, k, v, mask=None):
    scores = q @ k.T / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = _softmax(scores, dim=-1)
    return weights @ v, weights


@wrong(
    "scaled_dot_product_attention", "dv|d_v|of the values|value width|d_k|dk|key width|query width"
)
def sdpa_scales_by_the_value_width(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(v.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = _softmax(scores, dim=-1)
    return weights @ v, weights


@wrong("scaled_dot_product_attention", "dim|axis|over the keys|over the queries|column|last")
def sdpa_softmax_over_the_queries(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = _softmax(scores, dim=-2)
    return weights @ v, weights


@wrong("scaled_dot_product_attention", "before|after|renormal|sum to one|sum to 1|sums to")
def sdpa_masks_after_the_softmax(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = _softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    return weights @ v, weights


@wrong(
    "scaled_dot_product_attention",
    "invert|opposite|revers|~mask|true means|true =|swapped|the other way",
)
def sdpa_blocks_the_true_positions(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = _softmax(scores, dim=-1)
    return weights @ v, weights


@wrong(
    "scaled_dot_product_attention",
    "-inf|all false|all-false|fully masked|entirely|nothing|uniform|no key",
)
def sdpa_masks_with_minus_1e9(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    weights = _softmax(scores, dim=-1)
    return weights @ v, weights


@wrong(
    "scaled_dot_product_attention", "-inf|masked_fill|multipl|zero score|score of zero|exactly zero"
)
def sdpa_multiplies_the_scores_by_the_mask(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores * mask
    weights = _softmax(scores, dim=-1)
    return weights @ v, weights


@wrong("scaled_dot_product_attention", "softmax|probab|sum to one|sum to 1|sums to|raw")
def sdpa_returns_the_scores_as_weights(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return _softmax(scores, dim=-1) @ v, scores


@wrong(
    "scaled_dot_product_attention", "ignor|not applied|unused|no effect|masked key|masked position"
)
def sdpa_ignores_the_mask(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = _softmax(scores, dim=-1)
    return weights @ v, weights


# --- Exercise 3: self_attention --------------------------------------------------------------------


@wrong("self_attention", "sqrt|square root|√|scaling|scale by|scale the|scaled by|divid")
def self_attention_without_scaling(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    weights = _softmax(q @ k.transpose(-2, -1), dim=-1)
    return weights @ v, weights


@wrong("self_attention", "w_q|w_k|swap|exchang|transpos|role")
def self_attention_swaps_w_q_and_w_k(x, w_q, w_k, w_v):
    return _attention(x @ w_k, x @ w_q, x @ w_v)


@wrong("self_attention", "transpos|.T|nn.Linear|(c, d)|right|x @ w")
def self_attention_uses_transposed_weights(x, w_q, w_k, w_v):
    return _attention(x @ w_q.T, x @ w_k.T, x @ w_v.T)  # as nn.Linear does with its (D, C) weight


@wrong("self_attention", "w_v|value projection|project|v =")
def self_attention_values_without_projection(x, w_q, w_k, w_v):
    return _attention(x @ w_q, x @ w_k, x)


@wrong("self_attention", "dim|axis|batch|last|keys")
def self_attention_softmax_over_dim_1(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    weights = _softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=1)
    return weights @ v, weights


@wrong("self_attention", "transpose|batch|.T|last two|3-d|3d|(b, t, c)")
def self_attention_transposes_k_with_dot_T(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    weights = _softmax(q @ k.T / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ v, weights


@wrong("self_attention", "head width|d_k|dk|width|model width|head")
def self_attention_scales_by_the_model_width(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    weights = _softmax(q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1]), dim=-1)
    return weights @ v, weights


@wrong("self_attention", "batch|sequence|across|mix|separate|independ|other sequence")
def self_attention_flattens_the_batch(x, w_q, w_k, w_v):
    flat = x.reshape(-1, x.shape[-1])  # (B*T, C): every token of the batch in one sequence
    out, weights = _attention(flat @ w_q, flat @ w_k, flat @ w_v)
    return out.reshape(*x.shape[:-1], -1), weights


@wrong("self_attention", "tuple|pair|(out, weights)|two values|both")
def self_attention_returns_only_the_output(x, w_q, w_k, w_v):
    out, _ = _attention(x @ w_q, x @ w_k, x @ w_v)
    return out


# --- Exercise 4: self_attention_macs ---------------------------------------------------------------


@wrong("self_attention_macs", "head width|head|d_k|dk|d ≠ c|d != c|width")
def macs_with_C_in_place_of_D(T, C, D):
    return 3 * T * C * C + 2 * T * T * C


@wrong("self_attention_macs", "head width|head|d_k|dk|d ≠ c|d != c|width|attention product")
def macs_attention_products_with_C(T, C, D):
    return 3 * T * C * D + 2 * T * T * C


@wrong("self_attention_macs", "two|both|AV|A V|A @ V|output|twice|2t")
def macs_counts_one_attention_product(T, C, D):
    return 3 * T * C * D + T * T * D


@wrong("self_attention_macs", "three|projection|w_v|w_q|w_k")
def macs_counts_two_projections(T, C, D):
    return 2 * T * C * D + 2 * T * T * D


@wrong("self_attention_macs", "int|float|type")
def macs_returns_a_float(T, C, D):
    return 3 * T * C * D + 2 * math.pow(T, 2) * D


@wrong("self_attention_macs", "flop|twice|double|factor|2×|2x")
def macs_counts_flops(T, C, D):
    return 2 * (3 * T * C * D + 2 * T * T * D)


@wrong("self_attention_macs", "softmax|scal")
def macs_includes_the_softmax(T, C, D):
    return 3 * T * C * D + 2 * T * T * D + T * T


@wrong("self_attention_macs", "w_o|output projection|four|fourth|extra projection")
def macs_adds_an_output_projection(T, C, D):
    return 3 * T * C * D + 2 * T * T * D + T * D * C


@wrong("self_attention_macs", "t²|t^2|t**2|t * t|quadratic|squared|t×t|t x t")
def macs_attention_linear_in_T(T, C, D):
    return 3 * T * C * D + 2 * T * D * D


# --- correct variants, written other ways ----------------------------------------------------------


@right("softmax")
def softmax_via_logsumexp_on_the_last_dim(x, dim=-1):
    z = x.movedim(dim, -1)
    m = z.amax(dim=-1, keepdim=True)
    z = z - torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    lse = torch.logsumexp(z, dim=-1, keepdim=True)
    out = torch.where(torch.isfinite(lse), torch.exp(z - lse), torch.zeros_like(z))
    return out.movedim(-1, dim)


@right("scaled_dot_product_attention")
def sdpa_einsum_and_where(q, k, v, mask=None):
    scores = torch.einsum("...td,...sd->...ts", q, k) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = torch.where(mask, scores, torch.full_like(scores, float("-inf")))
    m = scores.amax(dim=-1, keepdim=True)
    e = torch.exp(scores - torch.where(torch.isfinite(m), m, torch.zeros_like(m)))
    weights = e / e.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(e.dtype).tiny)
    return torch.einsum("...ts,...sd->...td", weights, v), weights


@wrong("self_attention", "value width|w_v|width of the values|d_v|different width")
def self_attention_stacked_projection_split_in_three_equal_parts(x, w_q, w_k, w_v):
    # Written as a correct variant, then found wrong by the check: chunk(3) splits the stacked
    # projection into equal widths, so it breaks when the values are wider or narrower than D.
    q, k, v = (x @ torch.cat([w_q, w_k, w_v], dim=1)).chunk(3, dim=-1)
    return _attention(q, k, v)


@right("self_attention")
def self_attention_einsum(x, w_q, w_k, w_v):
    q = torch.einsum("...tc,cd->...td", x, w_q)
    k = torch.einsum("...tc,cd->...td", x, w_k)
    v = torch.einsum("...tc,cd->...td", x, w_v)
    return _attention(q, k, v)


@right("self_attention_macs")
def macs_step_by_step(T, C, D):
    projections = 3 * (T * D) * C  # output entries x length of each dot product
    scores = (T * T) * D
    output = (T * D) * T
    return int(projections + scores + output)
