"""Reading an encoder's output for a task: one prediction per token (tagging), or one per
sequence from [CLS] or from the last real token (notebook 06).

    last_token_states   (B, T, C) hidden, (B, T) mask -> (B, C): each sequence's last real token
    token_tagging_loss  cross-entropy over the real tokens only, padding excluded
    ReadoutClassifier   a BERT encoder with a linear classifier on [CLS] or on the last token
    TokenTagger         a BERT encoder with a linear classifier on every token
    same_as_previous_batch  a toy tagging task: is token t equal to token t - 1? (needs context)

A causal model (GPT) must classify from its last token: it is the only one that has seen the
whole input. In a bidirectional encoder every token sees every other, so [CLS] and the last
token can both serve once fine-tuned. With padding at the end, "last" means the last *real*
token, not position T - 1.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab._validate import check_tensor
from transformer_lab.models import BERT, BertConfig

__all__ = [
    "last_token_states",
    "token_tagging_loss",
    "ReadoutClassifier",
    "TokenTagger",
    "same_as_previous_batch",
]

READS = ("cls", "last")


def last_token_states(hidden: Tensor, attention_mask: Tensor | None = None) -> Tensor:
    """(B, T, C) hidden states -> (B, C): the state of each sequence's last real token.

    Args:
        hidden: (B, T, C) encoder output.
        attention_mask: (B, T), True (or 1) at real tokens, padding at the end; None = no padding.
    """
    check_tensor("hidden", hidden, dims=3)
    B, T, _ = hidden.shape
    if attention_mask is None:
        return hidden[:, -1]
    if attention_mask.shape != (B, T):
        raise ValueError(
            f"attention_mask must have shape {(B, T)} to match hidden, "
            f"but received {tuple(attention_mask.shape)}."
        )
    lengths = attention_mask.long().sum(dim=1)  # (B,)
    if (lengths == 0).any():
        raise ValueError("every sequence needs at least one real token, but one has none.")
    return hidden[torch.arange(B), lengths - 1]  # (B, C)


def token_tagging_loss(logits: Tensor, tags: Tensor, attention_mask: Tensor) -> Tensor:
    """Mean cross-entropy of (B, T, n_tags) logits against (B, T) tags over the real tokens."""
    check_tensor("logits", logits, dims=3)
    if tags.shape != logits.shape[:2] or attention_mask.shape != logits.shape[:2]:
        raise ValueError(
            f"tags and attention_mask must have shape {tuple(logits.shape[:2])}, but received "
            f"{tuple(tags.shape)} and {tuple(attention_mask.shape)}."
        )
    real = attention_mask.bool()  # (B, T)
    return F.cross_entropy(logits[real], tags[real])


class ReadoutClassifier(nn.Module):
    """BERT encoder + linear classifier on the [CLS] state (``read="cls"``) or on the last real
    token's state (``read="last"``); no pooler, so the two differ only in where they read."""

    def __init__(self, config: BertConfig, read: str = "cls") -> None:
        super().__init__()
        if read not in READS:
            raise ValueError(f"read must be one of {READS}, but received {read!r}.")
        self.read = read
        self.bert = BERT(config)
        self.classifier = nn.Linear(config.d_model, config.n_labels)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """(B, T) ids -> (B, n_labels) logits."""
        hidden = self.bert(input_ids, attention_mask).last_hidden_state  # (B, T, C)
        if self.read == "cls":
            return self.classifier(hidden[:, 0])
        return self.classifier(last_token_states(hidden, attention_mask))


class TokenTagger(nn.Module):
    """BERT encoder + one linear classifier applied to every token's state."""

    def __init__(self, config: BertConfig, n_tags: int) -> None:
        super().__init__()
        self.bert = BERT(config)
        self.tagger = nn.Linear(config.d_model, n_tags)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """(B, T) ids -> (B, T, n_tags) logits, one row per token."""
        return self.tagger(self.bert(input_ids, attention_mask).last_hidden_state)


def same_as_previous_batch(
    batch_size: int, T: int, vocab_size: int, generator: torch.Generator | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """Random sentences of tokens 1..vocab_size-1 (id 0 = padding, lengths T/2..T) and their
    tags: 1 where a token equals the token before it, else 0.

    Returns:
        ids (B, T) long, attention_mask (B, T) bool, tags (B, T) long (0 at padding).
    """
    ids = torch.randint(1, vocab_size, (batch_size, T), generator=generator)  # (B, T)
    lengths = torch.randint(T // 2, T + 1, (batch_size,), generator=generator)  # (B,)
    mask = torch.arange(T)[None] < lengths[:, None]  # (B, T)
    ids = ids.masked_fill(~mask, 0)
    tags = torch.zeros_like(ids)
    tags[:, 1:] = ((ids[:, 1:] == ids[:, :-1]) & mask[:, 1:]).long()
    return ids, mask, tags
