"""Tiled attention with an online softmax: the idea behind FlashAttention (Dao et al., 2022).

Plain attention builds the (T, S) score matrix, which is what makes long contexts expensive
in memory. Tiled attention visits the keys in blocks of ``block_size`` and keeps, per query,
three running quantities:

    m   the largest score seen so far                       (..., T, 1)
    l   sum of exp(score - m) over the keys seen so far      (..., T, 1)
    o   sum of exp(score - m) * value over those keys        (..., T, Dv)

A new block with its own statistics (m_b, l_b, o_b) is merged by moving both to the larger
maximum m' = max(m, m_b):

    l' = exp(m - m') l + exp(m_b - m') l_b,    o' = exp(m - m') o + exp(m_b - m') o_b

and the output is o / l at the very end. Only (T, block_size) scores exist at any time, so the
extra memory is O(T * block_size) instead of O(T * S), and the result equals the softmax
formula exactly (up to rounding). Fully masked rows keep m = -inf and l = 0 and give zeros.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from transformer_lab._validate import check_mask, check_tensor

__all__ = ["merge_softmax_stats", "tiled_attention"]


def _safe(m: Tensor) -> Tensor:
    """-inf (nothing seen yet, or everything masked) shifts by 0 instead, so exp never sees NaN."""
    return torch.where(torch.isfinite(m), m, torch.zeros_like(m))


def merge_softmax_stats(
    m1: Tensor, l1: Tensor, o1: Tensor, m2: Tensor, l2: Tensor, o2: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """Combine the online-softmax statistics of two disjoint sets of keys.

    Args:
        m1, m2: (..., T, 1) running maxima (``-inf`` where no key was visible).
        l1, l2: (..., T, 1) sums of exp(score - m).
        o1, o2: (..., T, Dv) sums of exp(score - m) * value.
    Returns:
        ``(m, l, o)`` of the union, with the same shapes.
    """
    m = torch.maximum(m1, m2)  # (..., T, 1)
    a1 = torch.exp(m1 - _safe(m))  # exp(-inf) = 0 where set 1 saw nothing
    a2 = torch.exp(m2 - _safe(m))
    return m, a1 * l1 + a2 * l2, a1 * o1 + a2 * o2


def tiled_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    is_causal: bool = False,
    block_size: int = 128,
) -> Tensor:
    """Scaled dot-product attention computed over key blocks, never forming the (T, S) scores.

    Args:
        q: (..., T, D); k: (..., S, D); v: (..., S, Dv).
        mask: optional boolean, broadcastable to (..., T, S); True = may attend.
        is_causal: also apply the causal mask (query t sees keys up to t + S - T).
        block_size: keys per block.
    Returns:
        (..., T, Dv), equal to ``scaled_dot_product_attention(q, k, v, mask)[0]``; a query with
        no visible key gets zeros.
    """
    check_tensor("q", q, min_dims=2)
    check_tensor("k", k, min_dims=2, last_dim=q.shape[-1], last_dim_name="D (the queries' width)")
    check_tensor("v", v, min_dims=2)
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be a positive int, but received {block_size!r}.")
    T, S = q.shape[-2], k.shape[-2]
    if v.shape[-2] != S:
        raise ValueError(
            f"k and v must have the same length S, but received {S} and {v.shape[-2]}."
        )
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    if mask is not None:
        check_mask(mask, (*batch, T, S))
    scale = 1.0 / math.sqrt(q.shape[-1])
    stats_shape = (*batch, T, 1)
    m = torch.full(stats_shape, float("-inf"), dtype=q.dtype, device=q.device)
    l = torch.zeros(stats_shape, dtype=q.dtype, device=q.device)  # noqa: E741
    o = torch.zeros((*batch, T, v.shape[-1]), dtype=q.dtype, device=q.device)
    query_pos = torch.arange(T, device=q.device)[:, None] + (S - T)  # (T, 1)
    for start in range(0, S, block_size):
        stop = min(start + block_size, S)
        scores = (q @ k[..., start:stop, :].transpose(-2, -1)) * scale  # (..., T, b)
        if mask is not None:
            scores = scores.masked_fill(~mask[..., start:stop], float("-inf"))
        if is_causal:
            key_pos = torch.arange(start, stop, device=q.device)[None, :]  # (1, b)
            scores = scores.masked_fill(key_pos > query_pos, float("-inf"))
        m_b = scores.amax(dim=-1, keepdim=True)  # (..., T, 1)
        p = torch.exp(scores - _safe(m_b))  # (..., T, b); masked scores give exactly 0
        m, l, o = merge_softmax_stats(  # noqa: E741 (l: the paper's running sum)
            m, l, o, m_b, p.sum(-1, keepdim=True), p @ v[..., start:stop, :]
        )
    return o / torch.where(l > 0, l, torch.ones_like(l))  # (..., T, Dv); empty rows stay 0
