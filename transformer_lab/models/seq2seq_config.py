"""The shape and options of the encoder-decoder: :class:`Seq2SeqConfig` (its own module, like
:mod:`.gpt_config` and :mod:`.vit_config`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from transformer_lab import _validate
from transformer_lab.blocks import ACTIVATIONS

__all__ = ["Seq2SeqConfig"]


@dataclass(frozen=True)
class Seq2SeqConfig:
    """Shape and options of a :class:`Seq2SeqTransformer` (defaults: the paper's base model)."""

    src_vocab_size: int = 37000  # source vocabulary (the paper shared ~37k BPE tokens for EN-DE)
    tgt_vocab_size: int = 37000  # target vocabulary
    d_model: int = 512  # width C
    n_heads: int = 8  # attention heads H
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    d_ff: int = 2048  # MLP hidden width
    dropout: float = 0.1  # on embeddings, attention weights and sublayer outputs (training only)
    activation: str = "relu"  # the paper's MLP uses ReLU
    norm_first: bool = False  # False: post-norm as in the paper; True: pre-norm
    eps: float = 1e-5  # layer-norm epsilon (torch.nn.Transformer's default)
    max_len: int = 512  # longest source or target sequence (rows of the sinusoidal table)
    scale_embeddings: bool = True  # multiply embeddings by sqrt(C) before adding positions
    pad_id: int = 0  # padding id in both vocabularies; masked out on both sides
    fused: bool = True  # PyTorch's fused attention and layer-norm kernels (explicit path when weights are requested)

    def __post_init__(self) -> None:
        _validate.check_positive(
            self,
            "src_vocab_size",
            "tgt_vocab_size",
            "d_model",
            "n_heads",
            "n_encoder_layers",
            "n_decoder_layers",
            "d_ff",
            "max_len",
        )
        _validate.check_heads(self)
        _validate.check_probability(self, "dropout")
        _validate.check_eps(self)
        _validate.check_choice(self, "activation", ACTIVATIONS)
        if self.d_model % 2:
            raise ValueError(
                "Seq2SeqConfig.d_model must be even for sinusoidal positions (sin/cos pairs), but "
                f"received d_model={self.d_model}."
            )
        if not 0 <= self.pad_id < min(self.src_vocab_size, self.tgt_vocab_size):
            raise ValueError(
                f"Seq2SeqConfig.pad_id must be a valid id in both vocabularies, but received pad_id={self.pad_id}."
            )

    @classmethod
    def base(cls, **overrides: Any) -> Seq2SeqConfig:
        """The paper's base model: 6 + 6 layers, width 512, 8 heads, MLP 2048."""
        return dataclasses.replace(cls(), **overrides)

    @classmethod
    def tiny(cls, **overrides: Any) -> Seq2SeqConfig:
        """2 + 2 layers, width 64, 4 heads: learns a toy translation task on a CPU in a minute or two."""
        base = cls(
            src_vocab_size=32,
            tgt_vocab_size=64,
            d_model=64,
            n_heads=4,
            n_encoder_layers=2,
            n_decoder_layers=2,
            d_ff=128,
            dropout=0.1,
            max_len=64,
        )
        return dataclasses.replace(base, **overrides)
