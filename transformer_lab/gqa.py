"""Grouped-query and multi-query attention, and what a key/value cache costs.

During generation the key/value cache, not the weights, fills the memory: per token it holds
a key and a value for every layer and key/value head,

    bytes per token = 2 * n_layers * n_kv_heads * D * bytes_per_value.

Grouped-query attention (Ainslie et al., 2023) keeps H query heads but only H_kv < H key/value
heads; query head h reads key/value head h // (H / H_kv). H_kv = 1 is multi-query attention
(Shazeer, 2019); H_kv = H is ordinary multi-head attention. The cache shrinks by H / H_kv.
"""

from __future__ import annotations

from torch import Tensor

from transformer_lab.attention import scaled_dot_product_attention
from transformer_lab.masks import causal_mask, combine_masks

__all__ = ["grouped_query_attention", "kv_cache_bytes"]


def grouped_query_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, is_causal: bool = False
) -> Tensor:
    """Attention with fewer key/value heads than query heads.

    Args:
        q: (B, H, T, D); k, v: (B, H_kv, S, D) with H a multiple of H_kv.
        mask: optional boolean broadcastable to (B, H, T, S); True = may attend.
        is_causal: also apply the causal mask.
    Returns:
        (B, H, T, D), equal to ``torch.nn.functional.scaled_dot_product_attention(...,
        enable_gqa=True)``.
    """
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, Tensor) or x.dim() != 4:
            shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ValueError(
                f"{name} must be a (B, heads, length, D) tensor, but received {shape}."
            )
    H, H_kv = q.shape[1], k.shape[1]
    if v.shape[1] != H_kv or H % H_kv != 0:
        raise ValueError(
            f"the query heads H={H} must be a multiple of the key/value heads, and k and v must "
            f"have the same number of heads, but received k with {H_kv} and v with {v.shape[1]}."
        )
    group = H // H_kv
    k = k.repeat_interleave(group, dim=1)  # (B, H, S, D): query head h reads kv head h // group
    v = v.repeat_interleave(group, dim=1)
    if is_causal:
        mask = combine_masks(causal_mask(q.shape[2], k.shape[2], device=q.device), mask)
    return scaled_dot_product_attention(q, k, v, mask)[0]


def kv_cache_bytes(
    n_layers: int,
    n_kv_heads: int,
    d_head: int,
    seq_len: int,
    batch: int = 1,
    bytes_per_value: int = 2,
) -> int:
    """Memory of a key/value cache: 2 (keys and values) x layers x kv heads x D x tokens x batch.

    ``bytes_per_value`` is 2 for float16/bfloat16 (the usual serving dtype), 4 for float32.
    """
    values = (n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_value)
    if any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in values):
        raise ValueError(f"every size must be a non-negative int, but received {values}.")
    return 2 * n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_value
