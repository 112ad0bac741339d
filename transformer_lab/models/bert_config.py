"""The shape and options of a BERT, with presets (BERT-base, all-MiniLM-L6-v2, a tiny one)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from transformer_lab import _validate
from transformer_lab.blocks import ACTIVATIONS

__all__ = ["BertConfig"]


@dataclass(frozen=True)
class BertConfig:
    """Shape and options of a :class:`BERT` (defaults: BERT-base, 110M parameters)."""

    vocab_size: int = 30522  # V: BERT's uncased WordPiece vocabulary
    max_len: int = 512  # rows of the learned position table (the longest input)
    positions: bool = (
        True  # False drops the position table: the encoder can no longer see word order
    )
    type_vocab_size: int = 2  # segments: sentence A and sentence B
    n_layers: int = 12  # encoder blocks
    n_heads: int = 12  # attention heads H
    d_model: int = 768  # width C
    d_ff: int | None = None  # MLP hidden width; None means 4 * d_model
    dropout: float = 0.1  # on embeddings, attention weights, sublayer outputs (training only)
    eps: float = 1e-12  # layer-norm epsilon (BERT: 1e-12)
    activation: str = "gelu"  # exact erf GELU
    pad_token_id: int = 0  # [PAD] in BERT's vocabulary
    n_labels: int = 2  # classes of BertForSequenceClassification
    fused: bool = True  # PyTorch's fused attention and layer-norm kernels (explicit path when weights are requested)

    def __post_init__(self) -> None:
        if self.d_ff is None:
            object.__setattr__(self, "d_ff", 4 * self.d_model)
        _validate.check_positive(
            self,
            "vocab_size",
            "max_len",
            "type_vocab_size",
            "n_layers",
            "n_heads",
            "d_model",
            "d_ff",
            "n_labels",
        )
        _validate.check_heads(self)
        _validate.check_probability(self, "dropout")
        _validate.check_eps(self)
        _validate.check_choice(self, "activation", ACTIVATIONS)
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(
                f"BertConfig.pad_token_id must lie in 0..vocab_size-1={self.vocab_size - 1}, "
                f"but received pad_token_id={self.pad_token_id}."
            )

    @classmethod
    def base(cls, **overrides: Any) -> BertConfig:
        """BERT-base: 12 layers, 12 heads, width 768."""
        return dataclasses.replace(cls(), **overrides)

    @classmethod
    def minilm(cls, **overrides: Any) -> BertConfig:
        """all-MiniLM-L6-v2's shape: 6 layers, 12 heads, width 384, MLP 1536."""
        return dataclasses.replace(cls(n_layers=6, n_heads=12, d_model=384, d_ff=1536), **overrides)

    @classmethod
    def tiny(cls, **overrides: Any) -> BertConfig:
        """2 layers, 4 heads, width 128, 128 positions: trains on a CPU in minutes (pass vocab_size)."""
        return dataclasses.replace(
            cls(max_len=128, n_layers=2, n_heads=4, d_model=128, dropout=0.1), **overrides
        )
