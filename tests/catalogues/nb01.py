"""Notebook 01: softmax, scaled dot-product attention, self-attention, the multiply-add count."""

from tests.catalogues._source import right, wrong

NAMED_AT_LEAST = 1.0  # every entry named (the floor since the feedback work; see _source.py)

MISTAKES = [
    # ---------------------------------------------------------------- softmax
    wrong(
        "softmax",
        "overflow",
        """
# no maximum subtracted
def softmax(x, dim=-1):
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)
""",
    ),
    wrong(
        "softmax",
        "whole tensor",
        """
# global maximum instead of per slice
def softmax(x, dim=-1):
    e = torch.exp(x - x.max())
    return e / e.sum(dim=dim, keepdim=True)
""",
    ),
    wrong(
        "softmax",
        "keepdim",
        """
# sum without keepdim
def softmax(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim)
""",
    ),
    wrong(
        "softmax",
        "keepdim",
        """
# max without keepdim
def softmax(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim))
    return e / e.sum(dim=dim, keepdim=True)
""",
    ),
    wrong(
        "softmax",
        "ignores & dim",
        """
# always the last dimension
def softmax(x, dim=-1):
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)
""",
    ),
    wrong(
        "softmax",
        "over dimension 0",
        """
# hard-coded dim=0
def softmax(x, dim=-1):
    e = torch.exp(x - x.amax(dim=0, keepdim=True))
    return e / e.sum(dim=0, keepdim=True)
""",
    ),
    wrong(
        "softmax",
        "-inf & zeros",
        """
# the textbook stable softmax: NaN on an all -inf slice
def softmax(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)
""",
    ),
    wrong(
        "softmax",
        "log-softmax",
        """
# returns the log of the softmax
def softmax(x, dim=-1):
    m = x.amax(dim=dim, keepdim=True)
    return x - m - torch.log(torch.exp(x - m).sum(dim=dim, keepdim=True))
""",
    ),
    wrong(
        "softmax",
        "maximum & divide",
        """
# divides by the maximum instead of the sum
def softmax(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.amax(dim=dim, keepdim=True)
""",
    ),
    wrong(
        "softmax",
        "whole tensor & sum",
        """
# sums over every element
def softmax(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum()
""",
    ),
    wrong(
        "softmax",
        "in place",
        """
# subtracts in place
def softmax(x, dim=-1):
    x -= x.amax(dim=dim, keepdim=True)
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)
""",
    ),
    wrong(
        "softmax",
        "sign",
        """
# exp(max - x)
def softmax(x, dim=-1):
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(m - x)
    return e / e.sum(dim=dim, keepdim=True)
""",
    ),
    wrong(
        "softmax",
        "dtype",
        """
# computes in float32 always
def softmax(x, dim=-1):
    x = x.float()
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    s = e.sum(dim=dim, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones_like(s))
""",
    ),
    wrong(
        "softmax",
        "numpy array",
        """
# goes through numpy
def softmax(x, dim=-1):
    a = x.numpy()
    e = np.exp(a - a.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)
""",
    ),
    # ---------------------------------------------------------------- scaled dot-product attention
    wrong(
        "scaled_dot_product_attention",
        "scaling is missing",
        """
# no 1/sqrt(D)
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores, dim=-1)
    return w @ v, w
""",
    ),
    wrong(
        "scaled_dot_product_attention",
        "by d instead of sqrt(d)",
        """
# divides by D
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / q.shape[-1]
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores, dim=-1)
    return w @ v, w
""",
    ),
    wrong(
        "scaled_dot_product_attention",
        "multiplied",
        """
# multiplies by sqrt(D)
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) * math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores, dim=-1)
    return w @ v, w
""",
    ),
    wrong(
        "scaled_dot_product_attention",
        "values' width",
        """
# scales by the values' width
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(v.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores, dim=-1)
    return w @ v, w
""",
    ),
    wrong(
        "scaled_dot_product_attention",
        "over the queries",
        """
# softmax over the queries
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores, dim=-2)
    return w @ v, w
""",
    ),
    wrong(
        "scaled_dot_product_attention",
        "transpose",
        """
# k.T on batched keys
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.T / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores, dim=-1)
    return w @ v, w
""",
    ),
    wrong(
        "scaled_dot_product_attention",
        "transpose",
        """
# k.transpose(1, 2)
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores, dim=-1)
    return w @ v, w
""",
    ),
    wrong(
        "scaled_dot_product_attention",
        "after the softmax",
        """
# mask applied after the softmax
def scaled_dot_product_attention(q, k, v, mask=None):
    w = softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    if mask is not None:
        w = w * mask
    return w @ v, w
""",
    ),
    wrong(
        "scaled_dot_product_attention",
        "polarity",
        """
# mask polarity reversed, on the student's own zero-safe softmax
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    w = softmax(scores, dim=-1)
    return w @ v, w
""",
    ),
    wrong(
        "scaled_dot_product_attention",
        "polarity",
        """
# mask polarity reversed, on torch.softmax
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return w @ v, w
""",
    ),
    wrong(
        "scaled_dot_product_attention",
        "set to 0",
        """
# masked scores set to 0
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, 0.0)
    w = softmax(scores, dim=-1)
    return w @ v, w
""",
    ),
    wrong(
        "scaled_dot_product_attention",
        "-1e9",
        """
# masks with -1e9
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    w = softmax(scores, dim=-1)
    return w @ v, w
""",
    ),
    wrong(
        "scaled_dot_product_attention",
        "ignore & mask",
        """
# mask ignored
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    w = softmax(scores, dim=-1)
    return w @ v, w
""",
    ),
    wrong(
        "scaled_dot_product_attention",
        "tuple",
        """
# returns only out
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return softmax(scores, dim=-1) @ v
""",
    ),
    wrong(
        "scaled_dot_product_attention",
        "wrong order",
        """
# returns (weights, out)
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores, dim=-1)
    return w, w @ v
""",
    ),
    wrong(
        "scaled_dot_product_attention",
        "in place",
        """
# scales q in place
def scaled_dot_product_attention(q, k, v, mask=None):
    q /= math.sqrt(q.shape[-1])
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores, dim=-1)
    return w @ v, w
""",
    ),
    # ---------------------------------------------------------------- self-attention
    wrong(
        "self_attention",
        "scaling is missing",
        """
# no scaling
def self_attention(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    w = softmax(q @ k.transpose(-2, -1), dim=-1)
    return w @ v, w
""",
    ),
    wrong(
        "self_attention",
        "sqrt(c)",
        """
# scaled by the model width
def self_attention(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    w = softmax(q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1]), dim=-1)
    return w @ v, w
""",
    ),
    wrong(
        "self_attention",
        "swapped",
        """
# queries and keys swapped
def self_attention(x, w_q, w_k, w_v):
    return scaled_dot_product_attention(x @ w_k, x @ w_q, x @ w_v)
""",
    ),
    wrong(
        "self_attention",
        "row vectors",
        """
# column-vector convention
def self_attention(x, w_q, w_k, w_v):
    return scaled_dot_product_attention(x @ w_q.T, x @ w_k.T, x @ w_v.T)
""",
    ),
    wrong(
        "self_attention",
        "w_v",
        """
# values not projected
def self_attention(x, w_q, w_k, w_v):
    return scaled_dot_product_attention(x @ w_q, x @ w_k, x)
""",
    ),
    wrong(
        "self_attention",
        "tuple",
        """
# returns only out
def self_attention(x, w_q, w_k, w_v):
    out, _ = scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v)
    return out
""",
    ),
    wrong(
        "self_attention",
        "wrong order",
        """
# returns (weights, out)
def self_attention(x, w_q, w_k, w_v):
    out, w = scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v)
    return w, out
""",
    ),
    wrong(
        "self_attention",
        "over the queries",
        """
# softmax over the queries
def self_attention(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    w = softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-2)
    return w @ v, w
""",
    ),
    wrong(
        "self_attention",
        "w_q & w_k",
        """
# w_q used for the keys too
def self_attention(x, w_q, w_k, w_v):
    return scaled_dot_product_attention(x @ w_q, x @ w_q, x @ w_v)
""",
    ),
    wrong(
        "self_attention",
        "transpose",
        """
# k.T breaks batches
def self_attention(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    w = softmax(q @ k.T / math.sqrt(q.shape[-1]), dim=-1)
    return w @ v, w
""",
    ),
    # ---------------------------------------------------------------- multiply-adds
    wrong(
        "self_attention_macs",
        "projections only",
        """
# projections only
def self_attention_macs(T, C, D):
    return 3 * T * C * D
""",
    ),
    wrong(
        "self_attention_macs",
        "only one",
        """
# one of the two T x T products
def self_attention_macs(T, C, D):
    return 3 * T * C * D + T * T * D
""",
    ),
    wrong(
        "self_attention_macs",
        "projections & missing",
        """
# no projections
def self_attention_macs(T, C, D):
    return 2 * T * T * D
""",
    ),
    wrong(
        "self_attention_macs",
        "flops",
        """
# FLOPs
def self_attention_macs(T, C, D):
    return 2 * (3 * T * C * D + 2 * T * T * D)
""",
    ),
    wrong(
        "self_attention_macs",
        "python int",
        """
# a tensor
def self_attention_macs(T, C, D):
    return torch.tensor(3 * T * C * D + 2 * T * T * D)
""",
    ),
    wrong(
        "self_attention_macs",
        "python int",
        """
# a float
def self_attention_macs(T, C, D):
    return 3.0 * T * C * D + 2.0 * T * T * D
""",
    ),
    wrong(
        "self_attention_macs",
        "c where & d",
        """
# C where D belongs
def self_attention_macs(T, C, D):
    return 3 * T * C * C + 2 * T * T * C
""",
    ),
    wrong(
        "self_attention_macs",
        "t x t products & d",
        """
# T x T products without the width
def self_attention_macs(T, C, D):
    return 3 * T * C * D + 2 * T * T
""",
    ),
    wrong(
        "self_attention_macs",
        "w_o",
        """
# an output projection counted
def self_attention_macs(T, C, D):
    return 3 * T * C * D + D * T * C + 2 * T * T * D
""",
    ),
    wrong(
        "self_attention_macs",
        "t x t products & c",
        """
# products over C
def self_attention_macs(T, C, D):
    return 3 * T * C * D + 2 * T * T * C
""",
    ),
]

CORRECT = [
    right(
        "softmax",
        """
# nan_to_num after the stable softmax
def softmax(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return torch.nan_to_num(e / e.sum(dim=dim, keepdim=True), nan=0.0)
""",
    ),
    right(
        "softmax",
        """
# computes in float64, returns the input dtype
def softmax(x, dim=-1):
    y = x.double()
    m = y.amax(dim=dim, keepdim=True)
    m = torch.where(m == float("-inf"), torch.zeros_like(m), m)
    e = (y - m).exp()
    s = e.sum(dim=dim, keepdim=True)
    return (e / s.clamp_min(1e-300)).to(x.dtype)
""",
    ),
    right(
        "softmax",
        """
# moves dim last, loops over rows
def softmax(x, dim=-1):
    y = x.movedim(dim, -1)
    rows = y.reshape(-1, y.shape[-1])
    out = []
    for r in rows:
        m = r.max()
        if torch.isinf(m) and m < 0:
            out.append(torch.zeros_like(r))
            continue
        e = torch.exp(r - m)
        out.append(e / e.sum())
    return torch.stack(out).reshape(y.shape).movedim(-1, dim)
""",
    ),
    right(
        "scaled_dot_product_attention",
        """
# einsum and torch.where
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = torch.einsum("...td,...sd->...ts", q, k) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf")))
    w = softmax(scores)
    return torch.einsum("...ts,...sd->...td", w, v), w
""",
    ),
    right(
        "scaled_dot_product_attention",
        """
# torch.softmax: NaN on a fully masked row is allowed here
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(k.size(-1)))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return torch.matmul(w, v), w
""",
    ),
    right(
        "scaled_dot_product_attention",
        """
# scales q first, masks in place on a new tensor, returns a list
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = (q / math.sqrt(q.shape[-1])) @ k.transpose(-2, -1)
    if mask is not None:
        scores.masked_fill_(~mask, float("-inf"))
    w = softmax(scores, -1)
    return [w @ v, w]
""",
    ),
    right(
        "self_attention",
        """
# einsum, float64-safe
def self_attention(x, w_q, w_k, w_v):
    q = torch.einsum("...tc,cd->...td", x, w_q)
    k = torch.einsum("...tc,cd->...td", x, w_k)
    v = torch.einsum("...tc,cd->...td", x, w_v)
    return scaled_dot_product_attention(q, k, v)
""",
    ),
    right(
        "self_attention",
        """
# matmul
def self_attention(x, w_q, w_k, w_v):
    q, k, v = torch.matmul(x, w_q), torch.matmul(x, w_k), torch.matmul(x, w_v)
    w = softmax(q @ k.transpose(-2, -1) / math.sqrt(w_k.shape[1]))
    return w @ v, w
""",
    ),
    right(
        "self_attention_macs",
        """
# factored
def self_attention_macs(T, C, D):
    return T * D * (3 * C + 2 * T)
""",
    ),
    right(
        "self_attention_macs",
        """
# int() of a product of Python numbers
def self_attention_macs(T, C, D):
    projections = 3 * T * C * D
    scores = T * T * D
    mixing = T * T * D
    return int(projections + scores + mixing)
""",
    ),
]
