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

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab._validate import check_tensor
from transformer_lab.heads import KVCache, MultiHeadAttention, one_row_linear

__all__ = ["ACTIVATIONS", "layer_norm", "LayerNorm", "FeedForward", "Block", "BlockWeights"]

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
        return self.normalise(x)

    def normalise(self, x: Tensor) -> Tensor:
        """The forward pass without the input check (for callers that checked already)."""
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
        h = ACTIVATIONS[self.activation](one_row_linear(self.fc1, x))  # (..., d_ff)
        return one_row_linear(self.fc2, self.dropout(h))


class BlockWeights(NamedTuple):
    """Attention weights of one :class:`Block`, returned when ``need_weights=True``."""

    self_attn: Tensor  # (B, H, T, S) self-attention weights (S = T, plus any cached positions)
    cross_attn: Tensor | None  # (B, H, T, S_mem) cross-attention weights; None without it


class Block(nn.Module):
    """One transformer block: self-attention, optional cross-attention, then the MLP.

    Each sublayer sits in a residual connection with its own layer norm, placed before the
    sublayer (pre-norm) or after the residual sum (post-norm). Every model of the package
    stacks this one class: GPT (pre-norm, causal), BERT (post-norm), ViT (pre-norm), and the
    encoder (no cross-attention) and decoder (with it) of the seq2seq model.

    Args:
        d_model: width C.
        n_heads: number of heads H.
        d_ff: MLP hidden width; ``None`` means 4 * d_model.
        dropout: dropout on attention weights and on each sublayer's output.
        activation: MLP activation (see :class:`FeedForward`).
        norm_first: ``True`` for pre-norm, ``False`` for post-norm.
        cross_attention: add cross-attention to an encoder's output (a decoder block).
        bias: biases in the linear layers and norms.
        eps: layer-norm epsilon.
        fused: use PyTorch's fused attention and layer-norm kernels (same numbers, faster);
            the explicit path still runs whenever attention weights are requested.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int | None = None,
        dropout: float = 0.0,
        activation: str = "gelu",
        norm_first: bool = True,
        cross_attention: bool = False,
        bias: bool = True,
        eps: float = 1e-5,
        *,
        fused: bool = False,
    ) -> None:
        super().__init__()
        d_ff = 4 * d_model if d_ff is None else d_ff
        self.norm_first = norm_first

        def attention() -> MultiHeadAttention:
            return MultiHeadAttention(d_model, n_heads, bias=bias, dropout=dropout, fused=fused)

        self.self_attn_norm = LayerNorm(d_model, eps, bias, fused)
        self.self_attn = attention()
        self.cross_attn_norm = LayerNorm(d_model, eps, bias, fused) if cross_attention else None
        self.cross_attn = attention() if cross_attention else None
        self.mlp_norm = LayerNorm(d_model, eps, bias, fused)
        self.mlp = FeedForward(d_model, d_ff, activation, dropout, bias)
        self.dropout = nn.Dropout(dropout)  # on each sublayer's output

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        is_causal: bool = False,
        memory: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: KVCache | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, BlockWeights | None]:
        """Run the block.

        Args:
            x: (B, T, C) tokens.
            mask: self-attention mask, broadcastable to (B, H, T, S); ``True`` = may attend.
            is_causal: also apply the causal mask in self-attention (see
                :class:`~transformer_lab.heads.MultiHeadAttention`).
            memory: (B, S_mem, C) encoder output; required iff the block has cross-attention.
            memory_mask: cross-attention mask, broadcastable to (B, H, T, S_mem).
            cache: key/value cache for the self-attention (incremental decoding).
            need_weights: also return the attention weights.
        Returns:
            ``(x, weights)``: x (B, T, C); weights a :class:`BlockWeights`, or ``None`` unless
            ``need_weights``.
        """
        if (self.cross_attn is None) != (memory is None):
            expected = (
                "no memory (it has no cross-attention)"
                if self.cross_attn is None
                else "an encoder memory (it has cross-attention)"
            )
            got = None if memory is None else tuple(memory.shape)
            raise ValueError(f"this Block expects {expected}, but received memory={got}.")
        self_w = cross_w = None

        def self_block(h: Tensor) -> Tensor:
            nonlocal self_w
            a, self_w = self.self_attn(
                h, mask=mask, is_causal=is_causal, cache=cache, need_weights=need_weights
            )
            return self.dropout(a)

        def cross_block(h: Tensor) -> Tensor:
            nonlocal cross_w
            a, cross_w = self.cross_attn(h, memory, mask=memory_mask, need_weights=need_weights)
            return self.dropout(a)

        sublayers = [(self.self_attn_norm, self_block)]
        if self.cross_attn is not None:
            sublayers.append((self.cross_attn_norm, cross_block))
        sublayers.append((self.mlp_norm, lambda h: self.dropout(self.mlp(h))))
        for norm, sublayer in sublayers:
            x = x + sublayer(norm(x)) if self.norm_first else norm(x + sublayer(x))
        return x, (BlockWeights(self_w, cross_w) if need_weights else None)

    def decode_step(self, x: Tensor, cache: KVCache) -> Tensor:
        """One new token per sequence through a pre-norm block without cross-attention.

        The same numbers as ``self(x, is_causal=True, cache=cache)[0]``, without its checks,
        closures and module dispatch, which cost a fifth of GPT-2 small's time per generated
        token on a CPU. For generation in eval mode with gradients off; hooks are not called.

        Args:
            x: (B, 1, C) the newest token.
            cache: this block's :class:`~transformer_lab.heads.KVCache`.
        Returns:
            (B, 1, C).
        """
        x = x + self.self_attn.decode_step(self.self_attn_norm.normalise(x), cache)
        return x + self.mlp.forward(self.mlp_norm.normalise(x))  # (B, 1, C)

    def plain(self) -> bool:
        """Whether :meth:`decode_step` computes what calling the block would: a pre-norm block
        of this package's own modules, none with hooks or a replaced forward."""
        parts = (self, self.self_attn_norm, self.self_attn, self.mlp_norm, self.mlp)
        kinds = (Block, LayerNorm, MultiHeadAttention, LayerNorm, FeedForward)
        return (
            self.norm_first
            and self.cross_attn is None
            and all(type(m) is kind for m, kind in zip(parts, kinds))
            and not any(_hooked(m) for m in self.modules())
        )


def _hooked(module: nn.Module) -> bool:
    """Whether calling ``module`` runs more than its class's forward (hooks, a patched forward)."""
    return bool(module._forward_hooks or module._forward_pre_hooks or "forward" in module.__dict__)
