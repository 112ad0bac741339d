"""What the models return: small dataclasses with named fields instead of bare tuples.

Fields a caller did not ask for stay ``None``: ``loss`` appears only when targets or labels
are given, ``attentions`` only with ``output_attentions=True``. Attention maps are a tuple
with one (B, H, T, S) tensor per layer.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

__all__ = [
    "ModelOutput",
    "CausalLMOutput",
    "BertOutput",
    "MaskedLMOutput",
    "SequenceClassifierOutput",
    "ViTOutput",
    "Seq2SeqOutput",
]


@dataclass
class ModelOutput:
    """Base class of every model output (so ``isinstance(out, ModelOutput)`` works)."""


@dataclass
class CausalLMOutput(ModelOutput):
    """GPT's output.

    Attributes:
        logits: (B, T, V) next-token scores at every position.
        loss: mean cross-entropy against the targets, or ``None``.
        attentions: per-layer (B, H, T, T) causal attention weights, or ``None``.
    """

    logits: Tensor
    loss: Tensor | None = None
    attentions: tuple[Tensor, ...] | None = None


@dataclass
class BertOutput(ModelOutput):
    """BERT's encoder output (the names of Hugging Face's ``BertModel``).

    Attributes:
        last_hidden_state: (B, T, C) the top layer's token representations.
        pooler_output: (B, C) tanh(W h_[CLS] + b), the sentence summary used for classification.
        attentions: per-layer (B, H, T, T) weights, or ``None``.
    """

    last_hidden_state: Tensor
    pooler_output: Tensor | None = None
    attentions: tuple[Tensor, ...] | None = None


@dataclass
class MaskedLMOutput(ModelOutput):
    """Masked-language-model output: (B, T, V) ``logits`` and the loss over masked positions."""

    logits: Tensor
    loss: Tensor | None = None
    attentions: tuple[Tensor, ...] | None = None


@dataclass
class SequenceClassifierOutput(ModelOutput):
    """One prediction per sequence: (B, n_labels) ``logits`` and, given labels, the loss."""

    logits: Tensor
    loss: Tensor | None = None
    attentions: tuple[Tensor, ...] | None = None


@dataclass
class ViTOutput(ModelOutput):
    """ViT's output.

    Attributes:
        logits: (B, n_classes) class scores from the [CLS] token.
        last_hidden_state: (B, N + 1, C) after the final layer norm; row 0 is [CLS].
        loss: cross-entropy against the labels, or ``None``.
        attentions: per-layer (B, H, N + 1, N + 1) weights, or ``None``.
    """

    logits: Tensor
    last_hidden_state: Tensor
    loss: Tensor | None = None
    attentions: tuple[Tensor, ...] | None = None


@dataclass
class Seq2SeqOutput(ModelOutput):
    """Encoder-decoder output.

    Attributes:
        logits: (B, T, V_tgt) next-token scores for every decoder position.
        loss: cross-entropy against the targets (``-100`` ignored), or ``None``.
        encoder_output: (B, S, C) the memory the decoder attended to.
        attentions: ``{"encoder": per-layer (B, H, S, S), "decoder_self": (B, H, T, T),
            "cross": (B, H, T, S)}``, or ``None``.
    """

    logits: Tensor
    loss: Tensor | None = None
    encoder_output: Tensor | None = None
    attentions: dict[str, tuple[Tensor, ...]] | None = None
