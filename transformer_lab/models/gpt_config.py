"""The shape and options of a GPT: :class:`GPTConfig` (its own module, so the GPT-2 weight
mapping can build one without importing the model)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from transformer_lab import _validate
from transformer_lab.blocks import ACTIVATIONS

__all__ = ["GPTConfig"]


@dataclass(frozen=True)
class GPTConfig:
    """Shape and options of a :class:`GPT` (defaults: GPT-2 small, 124M parameters)."""

    vocab_size: int = 50257  # V: GPT-2's byte-pair vocabulary
    max_len: int = 1024  # context length: the learned position table has this many rows
    n_layers: int = 12  # number of blocks
    n_heads: int = 12  # attention heads H per block
    d_model: int = 768  # width C of the residual stream
    d_ff: int | None = None  # MLP hidden width; None means 4 * d_model
    dropout: float = 0.0  # on embeddings, attention weights and sublayer outputs (training only)
    bias: bool = True  # biases in linear layers and layer norms (GPT-2 has them)
    eps: float = 1e-5  # layer-norm epsilon (GPT-2: 1e-5)
    activation: str = "gelu_tanh"  # GPT-2 uses the tanh approximation of GELU
    fused: bool = True  # PyTorch's fused attention and layer-norm kernels (explicit path when weights are requested)
    tie_weights: bool = True  # the output head reuses E (GPT-2); False: a (V, C) matrix of its own

    def __post_init__(self) -> None:
        if self.d_ff is None:
            object.__setattr__(self, "d_ff", 4 * self.d_model)
        _validate.check_positive(
            self, "vocab_size", "max_len", "n_layers", "n_heads", "d_model", "d_ff"
        )
        _validate.check_heads(self)
        _validate.check_probability(self, "dropout")
        _validate.check_eps(self)
        _validate.check_choice(self, "activation", ACTIVATIONS)

    @classmethod
    def tiny(cls, **overrides: Any) -> GPTConfig:
        """4 layers, 4 heads, width 128, context 64, character vocabulary of 65 (tiny Shakespeare).

        About 0.8M parameters: 2,000 steps at batch 12 take one to two minutes on two CPU cores.
        Uses the exact GELU (as nanoGPT does): on a CPU it is cheaper than GPT-2's tanh form.
        """
        base = cls(
            vocab_size=65,
            max_len=64,
            n_layers=4,
            n_heads=4,
            d_model=128,
            dropout=0.0,
            activation="gelu",
        )
        return dataclasses.replace(base, **overrides)

    @classmethod
    def gpt2(cls, **overrides: Any) -> GPTConfig:
        """GPT-2 small's shape: 12 layers, 12 heads, width 768, context 1024, 50257 tokens."""
        return dataclasses.replace(cls(), **overrides)
