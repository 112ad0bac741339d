"""The sublayers notebook 05's block exercises are given (``checks.Sublayers``, ``checks.sublayers_of``):
those of a ``torch.nn.TransformerEncoderLayer`` / ``TransformerDecoderLayer`` as plain functions,
so the expected output of a student's block is PyTorch's own layer with the same weights. Used by
residual.py (the encoder block) and decoder.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

__all__ = ["Sublayers", "sublayers_of"]


@dataclass(frozen=True)
class Sublayers:
    """The parts of one block, as functions of tensors (names as in ``transformer_lab.blocks.Block``).

    ``self_attn(query, key_value=None, mask=None)`` and ``cross_attn(query, key_value, mask=None)``:
    multi-head attention with its own projections, (B, T, C) and (B, S, C) -> (B, T, C); the
    mask is boolean, True = may attend, broadcastable to (B, H, T, S). ``mlp(x)``: the
    position-wise MLP. ``self_attn_norm``, ``cross_attn_norm``, ``mlp_norm``: layer norms.
    """

    self_attn: Callable[..., Tensor]
    self_attn_norm: Callable[[Tensor], Tensor]
    mlp: Callable[[Tensor], Tensor]
    mlp_norm: Callable[[Tensor], Tensor]
    cross_attn: Callable[..., Tensor] | None = None
    cross_attn_norm: Callable[[Tensor], Tensor] | None = None


def _attention_fn(mha: nn.MultiheadAttention) -> Callable[..., Tensor]:
    return _Attend(mha)


class _Attend:
    """``attend(query, key_value=None, mask=None)`` with a torch MultiheadAttention's weights
    (a class, not a closure: the grader pickles it into the graded kernel)."""

    def __init__(self, mha: nn.MultiheadAttention) -> None:
        self.mha = mha

    def __call__(
        self, query: Tensor, key_value: Tensor | None = None, mask: Tensor | None = None
    ) -> Tensor:
        mha = self.mha
        if key_value is None:  # self-attention, as in MultiHeadAttention.forward
            key_value = query
        if torch.is_tensor(key_value) and key_value.dtype == torch.bool:
            raise ValueError(
                "the attention's second input is the (B, S, C) sequence to attend to, but it "
                "received a boolean tensor: call it as (query, key_value, mask) or pass mask=..."
            )
        B, T, S, H = query.shape[0], query.shape[1], key_value.shape[1], mha.num_heads
        blocked = None
        if mask is not None:
            if mask.dtype != torch.bool:
                raise ValueError(
                    f"the mask must be boolean (True = may attend), but it has dtype {mask.dtype}."
                )
            allowed = torch.broadcast_to(mask, (B, H, T, S)).reshape(B * H, T, S)
            blocked = ~allowed  # torch's convention: True = may NOT attend
        return mha(query, key_value, key_value, attn_mask=blocked, need_weights=False)[0]


class _MLP:
    """The position-wise MLP of a torch Transformer layer (picklable, like :class:`_Attend`)."""

    def __init__(self, layer: nn.Module) -> None:
        self.layer = layer

    def __call__(self, x: Tensor) -> Tensor:
        layer = self.layer
        return layer.linear2(layer.activation(layer.linear1(x)))


def sublayers_of(layer: nn.Module) -> Sublayers:
    """View a ``torch.nn.TransformerEncoderLayer`` or ``TransformerDecoderLayer`` (``batch_first``)
    as :class:`Sublayers` sharing its weights."""
    if not isinstance(layer, (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)):
        raise TypeError(
            f"sublayers_of expects a torch.nn.TransformerEncoderLayer or TransformerDecoderLayer, "
            f"but received {type(layer).__name__}."
        )
    if not layer.self_attn.batch_first:
        raise ValueError("sublayers_of expects a layer built with batch_first=True.")

    mlp = _MLP(layer)
    if isinstance(layer, nn.TransformerDecoderLayer):
        return Sublayers(
            _attention_fn(layer.self_attn),
            layer.norm1,
            mlp,
            layer.norm3,
            _attention_fn(layer.multihead_attn),
            layer.norm2,
        )
    return Sublayers(_attention_fn(layer.self_attn), layer.norm1, mlp, layer.norm2)


def _torch_layer(
    C: int, H: int, d_ff: int, norm_first: bool, decoder: bool, g: torch.Generator
) -> nn.Module:
    """A seeded PyTorch layer (GELU, no dropout); the notebook's global RNG is left alone."""
    kind = nn.TransformerDecoderLayer if decoder else nn.TransformerEncoderLayer
    with torch.random.fork_rng(devices=[]):
        layer = kind(
            C, H, d_ff, dropout=0.0, activation="gelu", batch_first=True, norm_first=norm_first
        )
    with torch.no_grad():
        for name, p in layer.named_parameters():
            if name.startswith("norm"):
                p.copy_(
                    (1.0 if name.endswith("weight") else 0.0)
                    + 0.3 * torch.randn(p.shape, generator=g)
                )
            elif name.endswith("bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[-1]))
    return layer.eval()
