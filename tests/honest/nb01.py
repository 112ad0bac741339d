"""Honest alternatives for notebook 01 (self-attention)."""

from __future__ import annotations

from . import Alternative as A

ALTERNATIVES = {
    "softmax_impl": [
        A(
            "max via .max(...).values, -inf slices zeroed with nan_to_num after the division",
            """\
def softmax(x, dim=-1):
    m = x.max(dim=dim, keepdim=True).values
    m = torch.where(m == float("-inf"), torch.zeros_like(m), m)
    e = torch.exp(x - m)
    return torch.nan_to_num(e / e.sum(dim=dim, keepdim=True), nan=0.0)
""",
        ),
        A(
            "float64 inside, cast back to the input's dtype",
            """\
def softmax(x, dim=-1):
    z = x.double()
    m = z.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = (z - m).exp()
    total = e.sum(dim=dim, keepdim=True)
    return (e / total.clamp_min(1e-300)).to(x.dtype)
""",
        ),
        A(
            "moves dim to the end, works on the last axis, moves it back",
            """\
def softmax(x, dim=-1):
    z = x.movedim(dim, -1)
    m = z.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = torch.exp(z - m)
    s = e.sum(dim=-1, keepdim=True)
    out = torch.where(s > 0, e / torch.where(s > 0, s, torch.ones_like(s)), torch.zeros_like(e))
    return out.movedim(-1, dim)
""",
        ),
    ],
    "sdpa_impl": [
        A(
            "einsum for both products, mask with torch.where",
            """\
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = torch.einsum("...td,...sd->...ts", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf")))
    weights = softmax(scores, dim=-1)
    return torch.einsum("...ts,...sv->...tv", weights, v), weights
""",
        ),
        A(
            "queries scaled before the product, mask added as 0 / -inf, k.mT",
            """\
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = (q / q.shape[-1] ** 0.5) @ k.mT
    if mask is not None:
        scores = scores + torch.zeros(mask.shape).masked_fill(~mask, float("-inf"))
    weights = softmax(scores)
    out = weights @ v
    return out, weights
""",
        ),
        A(
            "torch.matmul and an explicit transpose(-1, -2), mask applied in place on a fresh tensor",
            """\
def scaled_dot_product_attention(q, k, v, mask=None):
    D = q.size(-1)
    scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(D))
    if mask is not None:
        scores = scores.clone()
        scores.masked_fill_(mask.logical_not().expand_as(scores), -math.inf)
    weights = softmax(scores, dim=-1)
    return torch.matmul(weights, v), weights
""",
        ),
    ],
    "self_attention_impl": [
        A(
            "einsum projections",
            """\
def self_attention(x, w_q, w_k, w_v):
    q = torch.einsum("...tc,cd->...td", x, w_q)
    k = torch.einsum("...tc,cd->...td", x, w_k)
    v = torch.einsum("...tc,cd->...td", x, w_v)
    return scaled_dot_product_attention(q, k, v)
""",
        ),
        A(
            "one fused projection with the three matrices side by side, then split",
            """\
def self_attention(x, w_q, w_k, w_v):
    w = torch.cat([w_q, w_k, w_v], dim=1)  # (C, 2D + Dv)
    q, k, v = (x @ w).split([w_q.shape[1], w_k.shape[1], w_v.shape[1]], dim=-1)
    return scaled_dot_product_attention(q, k, v)
""",
        ),
        A(
            "written out inline with the notebook's own softmax, no helper call",
            """\
def self_attention(x, w_q, w_k, w_v):
    q, k, v = torch.matmul(x, w_q), torch.matmul(x, w_k), torch.matmul(x, w_v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(w_q.shape[1])
    weights = softmax(scores, dim=-1)
    return weights @ v, weights
""",
        ),
    ],
    "macs_impl": [
        A(
            "factored: T D (3 C + 2 T)",
            """\
def self_attention_macs(T, C, D):
    return T * D * (3 * C + 2 * T)
""",
        ),
        A(
            "term by term, named",
            """\
def self_attention_macs(T, C, D):
    projections = 3 * (T * C * D)  # X W_q, X W_k, X W_v
    scores = T * T * D  # Q K^T
    mixing = T * T * D  # A V
    return projections + scores + mixing
""",
        ),
        A(
            "a loop over the five matrix products (m, n, k)",
            """\
def self_attention_macs(T, C, D):
    products = [(T, D, C)] * 3 + [(T, T, D), (T, D, T)]
    return sum(m * n * k for m, n, k in products)
""",
        ),
    ],
}
