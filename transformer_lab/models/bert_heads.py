"""BERT's task heads and its pre-training corruption.

BertForMaskedLM                 dense -> GELU -> norm -> tied decoder: a token at every position
BertForSequenceClassification   a linear classifier on the pooled [CLS] output
apply_bert_masking              choose 15% of tokens; 80% [MASK], 10% random, 10% unchanged
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab._validate import check_tensor
from transformer_lab.blocks import ACTIVATIONS, LayerNorm
from transformer_lab.models._weights import load_weights
from transformer_lab.models.bert import BERT, _check_same_shape, _init_weights
from transformer_lab.models.bert_config import BertConfig
from transformer_lab.models.bert_weights import bert_weights, config_from_huggingface
from transformer_lab.models.outputs import MaskedLMOutput, SequenceClassifierOutput

__all__ = ["BertForMaskedLM", "BertForSequenceClassification", "apply_bert_masking"]


class BertForMaskedLM(nn.Module):
    """BERT with the masked-language-model head: predict the original token at every position.

    The head is dense -> activation (GELU) -> layer norm -> the token embedding transposed (tied) + a bias.
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.bert = BERT(config)
        self.mlm_dense = nn.Linear(config.d_model, config.d_model)
        self._act = ACTIVATIONS[config.activation]
        self.mlm_norm = LayerNorm(config.d_model, config.eps, fused=config.fused)
        self.mlm_decoder = nn.Linear(config.d_model, config.vocab_size)  # (C -> V)
        self.mlm_decoder.weight = (
            self.bert.tok_emb.weight
        )  # tied: the same E reads and writes tokens
        _init_weights(self.mlm_dense)
        nn.init.zeros_(self.mlm_decoder.bias)

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        labels: Tensor | None = None,
        output_attentions: bool = False,
    ) -> MaskedLMOutput:
        """Logits (B, T, V) at every position; with ``labels`` (B, T), the loss where labels != -100."""
        out = self.bert(input_ids, attention_mask, token_type_ids, output_attentions)
        logits = self.head(out.last_hidden_state)  # (B, T, V)
        loss = None
        if labels is not None:
            _check_same_shape("labels", labels, input_ids)
            loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten())  # (B*T, V) vs (B*T,)
        return MaskedLMOutput(logits, loss, out.attentions)

    def head(self, hidden: Tensor) -> Tensor:
        """The MLM head alone: (..., C) encoder outputs -> (..., V) token logits."""
        return self.mlm_decoder(self.mlm_norm(self._act(self.mlm_dense(hidden))))

    def masked_lm_loss(
        self,
        input_ids: Tensor,
        labels: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
    ) -> Tensor:
        """The loss of ``forward(..., labels=labels)``, with the head run on labelled positions only.

        Only the ~15% of tokens chosen for masking carry a label, so skipping the (C -> V)
        decoder everywhere else gives the same value for a fraction of the cost in training.
        """
        _check_same_shape("labels", labels, input_ids)
        hidden = self.bert(input_ids, attention_mask, token_type_ids).last_hidden_state  # (B, T, C)
        chosen = labels != -100  # (B, T)
        return F.cross_entropy(
            self.head(hidden[chosen]), labels[chosen]
        )  # (M, V) vs (M,), M labelled

    @classmethod
    def from_huggingface(cls, model: nn.Module) -> BertForMaskedLM:
        """Build from a Hugging Face ``BertForMaskedLM``; returns our model in eval mode."""
        config = config_from_huggingface(model.config)
        if not getattr(model.config, "tie_word_embeddings", True):
            raise ValueError(
                "BertForMaskedLM ties its decoder to the token embedding, but the model has tie_word_embeddings=False."
            )
        sd = model.state_dict()
        w = {
            f"bert.{k}": v for k, v in bert_weights(sd, "bert.", strict=False, pooler=False).items()
        }
        p = "cls.predictions."
        w.update(
            {
                "mlm_dense.weight": sd[p + "transform.dense.weight"],
                "mlm_dense.bias": sd[p + "transform.dense.bias"],
                "mlm_norm.weight": sd[p + "transform.LayerNorm.weight"],
                "mlm_norm.bias": sd[p + "transform.LayerNorm.bias"],
                "mlm_decoder.bias": sd.get(p + "decoder.bias", sd.get(p + "bias")),
            }
        )
        ours = cls(config)
        # BertForMaskedLM has no pooler, so ours keeps its initial one.
        load_weights(
            ours,
            w,
            source="the Hugging Face BERT weights",
            allow_missing=("bert.pooler.weight", "bert.pooler.bias"),
        )
        return ours.eval()


class BertForSequenceClassification(nn.Module):
    """BERT with a linear classifier on the pooled [CLS] output (dropout in between)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.bert = BERT(config)
        self.drop = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(config.d_model, config.n_labels)  # (C -> n_labels)
        _init_weights(self.classifier)

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        labels: Tensor | None = None,
        output_attentions: bool = False,
    ) -> SequenceClassifierOutput:
        """Logits (B, n_labels); with ``labels`` (B,), the cross-entropy loss."""
        out = self.bert(input_ids, attention_mask, token_type_ids, output_attentions)
        logits = self.classifier(self.drop(out.pooler_output))  # (B, n_labels)
        loss = None if labels is None else F.cross_entropy(logits, labels)
        return SequenceClassifierOutput(logits, loss, out.attentions)

    @classmethod
    def from_huggingface(cls, model: nn.Module) -> BertForSequenceClassification:
        """Build from a Hugging Face ``BertForSequenceClassification``; returns ours in eval mode."""
        config = config_from_huggingface(model.config, n_labels=model.config.num_labels)
        sd = model.state_dict()
        w = {f"bert.{k}": v for k, v in bert_weights(sd, "bert.", strict=False).items()}
        w["classifier.weight"], w["classifier.bias"] = (
            sd["classifier.weight"],
            sd["classifier.bias"],
        )
        ours = cls(config)
        load_weights(ours, w, source="the Hugging Face BERT weights")
        return ours.eval()


def apply_bert_masking(
    input_ids: Tensor,
    mask_token_id: int,
    vocab_size: int,
    mlm_probability: float = 0.15,
    special_token_ids: Iterable[int] = (),
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """BERT's corruption for masked-language-model training.

    Each token (other than the special ones) is chosen with probability ``mlm_probability``.
    A chosen token becomes [MASK] 80% of the time, a uniformly random token 10% of the time,
    and stays unchanged 10% of the time, so the model cannot rely on seeing [MASK] and must
    keep a good representation of every token.

    Args:
        input_ids: (B, T) token ids.
        mask_token_id: id of [MASK].
        vocab_size: random replacements are drawn from 0..vocab_size-1.
        mlm_probability: fraction of tokens to predict (0.15 in BERT).
        special_token_ids: ids never chosen ([CLS], [SEP], [PAD], ...).
        generator: a seeded ``torch.Generator`` for reproducible masks.
    Returns:
        ``(inputs, labels)``, both (B, T): the corrupted ids, and the original id at chosen
        positions with -100 (ignored by the loss) elsewhere.
    """
    check_tensor("input_ids", input_ids, dims=2)
    if not 0.0 < mlm_probability < 1.0:
        raise ValueError(f"mlm_probability must lie in (0, 1), but received {mlm_probability!r}.")
    if not 0 <= mask_token_id < vocab_size:
        raise ValueError(
            f"mask_token_id must lie in 0..{vocab_size - 1} (vocab_size={vocab_size}), but received {mask_token_id}."
        )
    u = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)  # who is chosen
    r = torch.rand(
        input_ids.shape, generator=generator, device=input_ids.device
    )  # what they become
    chosen = u < mlm_probability
    for special in special_token_ids:
        chosen &= input_ids != special
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    random_ids = torch.randint(
        vocab_size, input_ids.shape, generator=generator, device=input_ids.device
    )
    inputs = torch.where(chosen & (r < 0.8), torch.full_like(input_ids, mask_token_id), input_ids)
    inputs = torch.where(chosen & (r >= 0.8) & (r < 0.9), random_ids, inputs)
    return inputs, labels
