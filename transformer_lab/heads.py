"""Multi-head attention: H attention patterns in parallel, each on a D = C / H slice.

    head_h = Attention(X_q W_q^h, X_kv W_k^h, X_kv W_v^h)
    MultiHead(X_q, X_kv) = concat(head_1, ..., head_H) W_o       (Vaswani et al., 2017, sec. 3.2.2)

Splitting one C-wide projection into H heads of width C / H keeps the cost and the number of
parameters the same as a single head of width C. With ``key_value=None`` the module is
self-attention; with a second sequence it is cross-attention (queries from one sequence,
keys and values from the other).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab._validate import check_divisible, check_mask, check_tensor
from transformer_lab.attention import attend
from transformer_lab.masks import causal_mask, combine_masks

__all__ = ["split_heads", "merge_heads", "KVCache", "MultiHeadAttention"]


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """(B, T, C) -> (B, H, T, D): give every head its own contiguous slice of the features."""
    check_tensor("x", x, dims=3)
    B, T, C = x.shape
    check_divisible(C, n_heads)
    # The transpose matters: a bare reshape to (B, H, T, D) would mix positions across heads.
    return x.view(B, T, n_heads, C // n_heads).transpose(1, 2)  # (B, T, H, D) -> (B, H, T, D)


def merge_heads(x: Tensor) -> Tensor:
    """(B, H, T, D) -> (B, T, C): concatenate the heads' outputs feature-wise (inverse of split_heads)."""
    check_tensor("x", x, dims=4)
    B, H, T, D = x.shape
    return x.transpose(1, 2).reshape(B, T, H * D)  # (B, T, H, D) -> (B, T, C)


@dataclass
class KVCache:
    """Keys and values of the tokens seen so far, so generation need not recompute them.

    ``k`` and ``v`` are (B, H, S, D), growing by one position per generated token.
    """

    k: Tensor | None = None
    v: Tensor | None = None

    @property
    def length(self) -> int:
        """Number of cached positions S."""
        return 0 if self.k is None else self.k.shape[-2]

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Add new (B, H, T, D) keys and values; return the full (B, H, S, D) tensors."""
        if self.k is None:
            self.k, self.v = k, v
        else:
            self.k = torch.cat([self.k, k], dim=-2)  # (B, H, S + T, D)
            self.v = torch.cat([self.v, v], dim=-2)  # (B, H, S + T, D)
        return self.k, self.v


class MultiHeadAttention(nn.Module):
    """Multi-head self- or cross-attention with projections W_q, W_k, W_v and W_o.

    Args:
        d_model: width C of the queries' sequence (and of the output).
        n_heads: number of heads H; must divide ``d_model``.
        bias: whether the four projections have biases.
        dropout: dropout on the attention weights during training.
        kv_dim: width of the key/value sequence for cross-attention (defaults to ``d_model``).
        fused: use PyTorch's fused kernel (``F.scaled_dot_product_attention``) when the weights
            are not requested, and one (C -> 3C) product for self-attention's three projections;
            same numbers, faster. The explicit path is the teaching path.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        bias: bool = True,
        dropout: float = 0.0,
        kv_dim: int | None = None,
        fused: bool = False,
    ) -> None:
        super().__init__()
        check_divisible(d_model, n_heads)
        kv_dim = d_model if kv_dim is None else kv_dim
        self.d_model, self.n_heads, self.kv_dim = d_model, n_heads, kv_dim
        self.d_head = d_model // n_heads
        self.dropout, self.fused = dropout, fused
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)  # W_q: (C, C), all heads at once
        self.k_proj = nn.Linear(kv_dim, d_model, bias=bias)  # W_k
        self.v_proj = nn.Linear(kv_dim, d_model, bias=bias)  # W_v
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)  # W_o mixes the heads

    def forward(
        self,
        query: Tensor,
        key_value: Tensor | None = None,
        mask: Tensor | None = None,
        is_causal: bool = False,
        cache: KVCache | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to ``key_value`` (or to itself).

        Args:
            query: (B, T, C).
            key_value: (B, S, kv_dim) for cross-attention; ``None`` for self-attention.
            mask: boolean, broadcastable to (B, H, T, S); ``True`` = may attend.
            is_causal: also apply the causal mask: query t sees keys up to its own position
                (the last T of the S positions when a cache holds earlier ones). Combined with
                ``mask`` if both are given; the fused kernel builds it internally when it can.
            cache: a :class:`KVCache` for incremental self-attention; the new keys and values
                are appended and the queries attend to everything cached.
            need_weights: also return the attention weights.
        Returns:
            ``(out, weights)``: out (B, T, C); weights (B, H, T, S) or ``None``.
        """
        check_tensor("query", query, dims=3, last_dim=self.d_model, last_dim_name="d_model")
        if key_value is not None:
            check_tensor(
                "key_value", key_value, dims=3, last_dim=self.kv_dim, last_dim_name="kv_dim"
            )
            if key_value.shape[0] != query.shape[0]:
                raise ValueError(
                    f"query and key_value must have the same batch size, but received "
                    f"{query.shape[0]} and {key_value.shape[0]}."
                )
        q, k, v = self._project(query, key_value)  # (B, H, T, D), (B, H, S, D), (B, H, S, D)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, H, S_cached + S, D)
        T, S = q.shape[2], k.shape[2]
        if mask is not None:
            check_mask(mask, (q.shape[0], self.n_heads, T, S))  # the one check of this call
        p = self.dropout if self.training else 0.0
        if self.fused and not need_weights and is_causal and mask is None and T == S:
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
            return self.out_proj(merge_heads(out)), None  # (B, T, C)
        if is_causal and T > 1:  # a single query is the newest token: it may see every key
            mask = combine_masks(causal_mask(T, S, device=q.device), mask)  # (..., T, S)
        if self.fused and not need_weights:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
            if mask is not None:
                # Fully masked rows: some kernels give NaN there; ours gives zeros, so force them.
                out = out.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)  # (B, H, T, D)
            weights = None
        else:
            out, weights = attend(q, k, v, mask, dropout_p=p)  # (B, H, T, D), (B, H, T, S)
        out = self.out_proj(merge_heads(out))  # (B, T, C)
        return out, (weights if need_weights else None)

    def _project(self, query: Tensor, key_value: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        """Queries from ``query``, keys and values from ``key_value`` (or ``query``), split into heads."""
        if self.fused and key_value is None:
            return tuple(split_heads(t, self.n_heads) for t in self._project_qkv(query))
        source = query if key_value is None else key_value
        q = split_heads(self.q_proj(query), self.n_heads)  # (B, H, T, D)
        k = split_heads(self.k_proj(source), self.n_heads)  # (B, H, S, D)
        v = split_heads(self.v_proj(source), self.n_heads)  # (B, H, S, D)
        return q, k, v

    def _project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Self-attention's three projections as one (C -> 3C) matrix product: the same numbers
        as calling q_proj, k_proj and v_proj, with one large multiply instead of three small ones."""
        weight = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])  # (3C, C)
        bias = None
        if self.q_proj.bias is not None:
            bias = torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])  # (3C,)
        return F.linear(x, weight, bias).split(self.d_model, dim=-1)  # (B, T, C) each
