"""Scaled dot-product attention, the core every other module builds on.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(D)) V            (Vaswani et al., 2017, eq. 1)

Row-vector convention: a sequence is a (T, C) matrix with one token per row, so the
projections are ``Q = X W_q`` and the scores ``Q K^T`` have one row per query.

Masks follow one rule across the package (see :mod:`transformer_lab.masks`): a boolean
tensor, ``True`` where the query *may* attend to the key, broadcastable to (B, H, T, S).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from transformer_lab._validate import check_mask, check_tensor

__all__ = ["softmax", "scaled_dot_product_attention", "attend", "SelfAttention"]


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    """Numerically stable softmax along ``dim``.

    Subtracting the row maximum changes nothing mathematically (it cancels in the
    ratio) but keeps ``exp`` from overflowing. Rows that are entirely ``-inf`` (a query
    with nothing to attend to) give all zeros instead of NaN.

    Args:
        x: any shape.
        dim: the dimension that sums to one.
    Returns:
        A tensor of ``x``'s shape whose slices along ``dim`` sum to 1 (or are all 0).
    """
    check_tensor("softmax input", x)
    row_max = x.amax(dim=dim, keepdim=True)
    # A row of -inf has max -inf; (-inf) - (-inf) is NaN, so shift such rows by 0 instead.
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    exps = torch.exp(x - row_max.detach())
    total = exps.sum(dim=dim, keepdim=True)
    return exps / torch.where(total > 0, total, torch.ones_like(total))


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
) -> tuple[Tensor, Tensor]:
    """Attend from every query to every key and mix the values.

    Args:
        q: queries, (..., T, D).
        k: keys, (..., S, D).
        v: values, (..., S, Dv).
        mask: optional boolean tensor broadcastable to (..., T, S); ``True`` = may attend.
        dropout_p: dropout on the attention weights (training only; 0 in every test).
    Returns:
        ``(out, weights)``: out (..., T, Dv) and the attention weights (..., T, S).
        A query whose keys are all masked gets zero weights and a zero output.
    """
    check_tensor("q", q, min_dims=2)
    check_tensor("k", k, min_dims=2)
    check_tensor("v", v, min_dims=2)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"queries and keys must have the same last dimension D to take dot products, "
            f"but q has D={q.shape[-1]} and k has D={k.shape[-1]}."
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"keys and values must have the same number of positions S, "
            f"but k has S={k.shape[-2]} and v has S={v.shape[-2]}."
        )
    if mask is not None:
        try:
            batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
        except RuntimeError:
            raise ValueError(
                f"q and k must have broadcastable leading dimensions, but received shapes "
                f"{tuple(q.shape)} and {tuple(k.shape)}."
            ) from None
        check_mask(mask, (*batch, q.shape[-2], k.shape[-2]))  # the scores' shape (..., T, S)
    return attend(q, k, v, mask, dropout_p)


def attend(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, dropout_p: float = 0.0
) -> tuple[Tensor, Tensor]:
    """:func:`scaled_dot_product_attention` without the input checks, for callers that have
    already validated their tensors and mask (so a mask is checked once per call)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = softmax(scores, dim=-1)  # (..., T, S), each row sums to 1 (or is all 0)
    if dropout_p > 0.0:
        weights = torch.nn.functional.dropout(weights, p=dropout_p)
    return weights @ v, weights  # (..., T, Dv), (..., T, S)


class SelfAttention(nn.Module):
    """Single-head self-attention with learnable projections W_q, W_k, W_v.

    Args:
        d_model: width C of the input tokens.
        d_head: width D of queries, keys and values (defaults to ``d_model``).
        bias: whether the projections have a bias.
    """

    def __init__(self, d_model: int, d_head: int | None = None, bias: bool = False) -> None:
        super().__init__()
        d_head = d_model if d_head is None else d_head
        if d_model <= 0 or d_head <= 0:
            raise ValueError(
                f"d_model and d_head must be positive, got d_model={d_model}, d_head={d_head}."
            )
        self.d_model, self.d_head = d_model, d_head
        self.q_proj = nn.Linear(d_model, d_head, bias=bias)  # W_q: (C, D)
        self.k_proj = nn.Linear(d_model, d_head, bias=bias)  # W_k: (C, D)
        self.v_proj = nn.Linear(d_model, d_head, bias=bias)  # W_v: (C, D)

    def forward(
        self, x: Tensor, mask: Tensor | None = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """x: (B, T, C) or (T, C). Returns ``(out, weights)``: (B, T, D), (B, T, T) or None."""
        check_tensor("x", x, min_dims=2, last_dim=self.d_model, last_dim_name="d_model")
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)  # each (B, T, D)
        out, weights = scaled_dot_product_attention(q, k, v, mask)
        return out, (weights if need_weights else None)
