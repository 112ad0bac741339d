"""Reading attention: where a token looks, one layer at a time and through the whole stack.

    cls_attention      what [CLS] attends to in one layer: (B, H, T, T) -> (B, H, N)
    attention_rollout  attention composed across layers (Abnar & Zuidema, 2020, "Quantifying
                       Attention Flow in Transformers")

Rollout: a residual connection passes every token on unchanged, so the share of token s that
reaches token t through one layer is modelled as

    A_l = 0.5 * mean_h(W_l) + 0.5 * I          (rows still sum to one)

and through layers 1..L as the product R = A_L A_(L-1) ... A_1. Row 0 of R says how much each
input patch contributes to the final [CLS] token.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from transformer_lab._validate import check_tensor

__all__ = ["cls_attention", "attention_rollout"]


def cls_attention(weights: Tensor) -> Tensor:
    """The [CLS] row of one layer's attention, without [CLS] itself.

    Args:
        weights: (B, H, T, T) attention weights, token 0 being [CLS].
    Returns:
        (B, H, T - 1): how much [CLS] attends to each patch in each head.
    """
    check_tensor("weights", weights, dims=4)
    return weights[:, :, 0, 1:]  # (B, H, N)


def attention_rollout(attentions: Sequence[Tensor], residual: float = 0.5) -> Tensor:
    """Compose attention across layers, counting the residual path.

    Args:
        attentions: one (B, H, T, T) tensor of attention weights per layer, first layer first.
        residual: the weight of the identity (the residual path) in each layer's mix.
    Returns:
        (B, T, T): entry (t, s) is the share of input token s in output token t.
    """
    if isinstance(attentions, Tensor) or len(attentions) == 0:
        raise ValueError(
            "attentions must be a non-empty list of (B, H, T, T) tensors, one per layer, but "
            f"received {type(attentions).__name__}"
            + ("" if isinstance(attentions, Tensor) else " of length 0")
            + "."
        )
    if not 0.0 <= residual <= 1.0:
        raise ValueError(f"residual must lie in [0, 1], but received residual={residual}.")
    rollout = None
    for layer, weights in enumerate(attentions):
        check_tensor(f"attentions[{layer}]", weights, dims=4)
        T = weights.shape[-1]
        eye = torch.eye(T, dtype=weights.dtype, device=weights.device)  # (T, T)
        mixed = (1.0 - residual) * weights.mean(dim=1) + residual * eye  # (B, T, T)
        mixed = mixed / mixed.sum(dim=-1, keepdim=True)  # exact attention rows already sum to 1
        rollout = mixed if rollout is None else mixed @ rollout  # later layers on the left
    assert rollout is not None
    return rollout
