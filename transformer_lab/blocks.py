"""The transformer block: attention and a position-wise MLP, each wrapped in a residual
connection and a layer norm.

Where the norm goes is the one design choice that differs between famous models:

- **post-norm** (the original Transformer, BERT): ``x = norm(x + sublayer(x))``. The residual
  stream is renormalised after every sublayer; deep stacks need learning-rate warm-up.
- **pre-norm** (GPT-2 onwards, ViT): ``x = x + sublayer(norm(x))``. The residual path is an
  untouched sum, which keeps gradients well-scaled, so deep stacks train more easily; such
  models add one final norm after the last block.

``norm_first=True`` selects pre-norm, matching ``torch.nn.TransformerEncoderLayer``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab._validate import check_tensor
from transformer_lab.heads import KVCache, MultiHeadAttention

__all__ = ["ACTIVATIONS", "layer_norm", "LayerNorm", "FeedForward", "EncoderBlock", "DecoderBlock"]

# The activation names every block and model config accepts.
ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,  # exact, erf-based (BERT, ViT)
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),  # GPT-2's approximation
}


def layer_norm(x: Tensor, weight: Tensor | None, bias: Tensor | None, eps: float = 1e-5) -> Tensor:
    """Normalise each token's features to mean 0 and variance 1, then scale and shift.

    Statistics are over the last dimension (the C features of one token), with the biased
    variance (divide by C, not C - 1), as in Ba et al. (2016) and ``torch.nn.LayerNorm``.

    Args:
        x: (..., C).
        weight, bias: (C,) or ``None``.
    Returns:
        (..., C).
    """
    mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1), biased
    y = (x - mean) / torch.sqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


class LayerNorm(nn.Module):
    """Layer normalisation with a learnable gain (``weight``) and optional ``bias``.

    Args:
        d_model: width C.
        eps: added to the variance before the square root.
        bias: whether to learn a shift.
        fused: call PyTorch's one-kernel ``F.layer_norm`` (same numbers, faster backward)
            instead of the written-out :func:`layer_norm`. The models turn it on for speed.
    """

    def __init__(
        self, d_model: int, eps: float = 1e-5, bias: bool = True, fused: bool = False
    ) -> None:
        super().__init__()
        self.d_model, self.eps, self.fused = d_model, eps, fused
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model)) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        check_tensor("x", x, min_dims=1, last_dim=self.d_model, last_dim_name="d_model")
        if self.fused:
            return F.layer_norm(x, (self.d_model,), self.weight, self.bias, self.eps)
        return layer_norm(x, self.weight, self.bias, self.eps)


class FeedForward(nn.Module):
    """Position-wise MLP: the same two-layer network applied to every token separately.

    Args:
        d_model: width C.
        d_ff: hidden width (4 C in most models).
        activation: ``"relu"``, ``"gelu"`` (exact) or ``"gelu_tanh"``.
        dropout: dropout after the activation.
        bias: whether both linear layers have biases.
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        activation: str = "gelu",
        dropout: float = 0.0,
        bias: bool = True,
    ) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(ACTIVATIONS)}, but received {activation!r}."
            )
        self.activation = activation
        self.fc1 = nn.Linear(d_model, d_ff, bias=bias)  # (C -> d_ff)
        self.fc2 = nn.Linear(d_ff, d_model, bias=bias)  # (d_ff -> C)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        """x: (..., C) -> (..., C)."""
        return self.fc2(self.dropout(ACTIVATIONS[self.activation](self.fc1(x))))


class EncoderBlock(nn.Module):
    """Self-attention then MLP, each with a residual connection; pre-norm or post-norm.

    Args:
        d_model: width C.
        n_heads: number of heads H.
        d_ff: MLP hidden width.
        dropout: dropout on attention weights and on each sublayer's output.
        activation: MLP activation (see :class:`FeedForward`).
        norm_first: ``True`` for pre-norm, ``False`` for post-norm.
        eps: layer-norm epsilon.
        bias: biases in the linear layers and norms.
        fused: use PyTorch's fused attention and layer-norm kernels (same numbers, faster);
            the explicit path still runs whenever attention weights are requested.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = True,
        eps: float = 1e-5,
        bias: bool = True,
        fused: bool = False,
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(
            d_model, n_heads, bias=bias, dropout=dropout, fused=fused
        )
        self.ffn = FeedForward(d_model, d_ff, activation, dropout, bias)
        self.norm1 = LayerNorm(d_model, eps, bias, fused)
        self.norm2 = LayerNorm(d_model, eps, bias, fused)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(
        self, x: Tensor, mask: Tensor | None = None, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, Tensor]:
        """x: (B, T, C) -> (B, T, C); with ``need_weights`` also the (B, H, T, T) weights."""
        if self.norm_first:
            a, w = self.self_attn(self.norm1(x), mask=mask, need_weights=need_weights)
            x = x + self.dropout1(a)
            x = x + self.dropout2(self.ffn(self.norm2(x)))
        else:
            a, w = self.self_attn(x, mask=mask, need_weights=need_weights)
            x = self.norm1(x + self.dropout1(a))
            x = self.norm2(x + self.dropout2(self.ffn(x)))
        return (x, w) if need_weights else x


class DecoderBlock(nn.Module):
    """Masked self-attention, then (optionally) cross-attention to an encoder's output, then MLP.

    With ``cross_attention=False`` this is the GPT block: causal self-attention and an MLP.
    Arguments are those of :class:`EncoderBlock`, plus ``cross_attention``.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = True,
        eps: float = 1e-5,
        bias: bool = True,
        fused: bool = False,
        cross_attention: bool = True,
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(
            d_model, n_heads, bias=bias, dropout=dropout, fused=fused
        )
        self.norm1 = LayerNorm(d_model, eps, bias, fused)
        self.dropout1 = nn.Dropout(dropout)
        if cross_attention:
            self.cross_attn = MultiHeadAttention(
                d_model, n_heads, bias=bias, dropout=dropout, fused=fused
            )
            self.norm2 = LayerNorm(d_model, eps, bias, fused)
            self.dropout2 = nn.Dropout(dropout)
        else:
            self.cross_attn = None
        self.ffn = FeedForward(d_model, d_ff, activation, dropout, bias)
        self.norm3 = LayerNorm(d_model, eps, bias, fused)
        self.dropout3 = nn.Dropout(dropout)

    def forward(
        self,
        x: Tensor,
        memory: Tensor | None = None,
        self_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        need_weights: bool = False,
        cache: KVCache | None = None,
        is_causal: bool = False,
    ) -> Tensor | tuple[Tensor, dict[str, Tensor | None]]:
        """Run the block.

        Args:
            x: (B, T, C) decoder tokens.
            memory: (B, S, C) encoder output; required iff the block has cross-attention.
            self_mask: mask for self-attention, usually causal, broadcastable to (B, H, T, T).
            memory_mask: mask over the encoder positions, broadcastable to (B, H, T, S).
            need_weights: also return ``{"self": (B, H, T, T), "cross": (B, H, T, S) or None}``.
            cache: key/value cache for the self-attention (incremental decoding).
            is_causal: promise that ``self_mask`` is the plain causal mask, letting the fused
                kernel skip reading it (see :class:`MultiHeadAttention`).
        Returns:
            (B, T, C), or ``(x, weights)`` with ``need_weights``.
        """
        if (self.cross_attn is None) != (memory is None):
            expected = (
                "no memory (it has no cross-attention)"
                if self.cross_attn is None
                else "an encoder memory"
            )
            raise ValueError(
                f"this DecoderBlock expects {expected}, but received memory={None if memory is None else tuple(memory.shape)}."
            )
        weights: dict[str, Tensor | None] = {"self": None, "cross": None}

        def self_block(h: Tensor) -> Tensor:
            a, weights["self"] = self.self_attn(
                h, mask=self_mask, need_weights=need_weights, cache=cache, is_causal=is_causal
            )
            return self.dropout1(a)

        def cross_block(h: Tensor) -> Tensor:
            a, weights["cross"] = self.cross_attn(
                h, memory, mask=memory_mask, need_weights=need_weights
            )
            return self.dropout2(a)

        def ff_block(h: Tensor) -> Tensor:
            return self.dropout3(self.ffn(h))

        if self.norm_first:
            x = x + self_block(self.norm1(x))
            if self.cross_attn is not None:
                x = x + cross_block(self.norm2(x))
            x = x + ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self_block(x))
            if self.cross_attn is not None:
                x = self.norm2(x + cross_block(x))
            x = self.norm3(x + ff_block(x))
        return (x, weights) if need_weights else x
