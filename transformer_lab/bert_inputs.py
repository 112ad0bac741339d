"""What goes into BERT and what comes out of it for its two losses (Devlin et al., 2019).

    pair_inputs     [CLS] a [SEP] b [SEP], padded: input_ids, token_type_ids, attention_mask
    mlm_corrupt     masked-language-model corruption: 15% of the non-special tokens chosen;
                    of those 80% [MASK], 10% a random non-special token, 10% kept; labels -100
                    elsewhere
    masked_lm_loss  cross-entropy on the chosen positions only, the MLM head run on them only
    cls_logits      the sentence classifier: tanh pooler on the [CLS] vector, then a linear layer

These are the references notebook 6 checks the student's versions against (and later notebooks
import). :func:`mlm_corrupt` differs from :func:`transformer_lab.models.apply_bert_masking` in one
detail: its random replacements are never special tokens (``apply_bert_masking`` draws them from
the whole vocabulary, as Hugging Face's collator does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["IGNORE_INDEX", "pair_inputs", "mlm_corrupt", "masked_lm_loss", "cls_logits"]

IGNORE_INDEX = -100  # label of positions the loss skips (cross_entropy's default ignore_index)


def pair_inputs(
    pairs: Sequence[tuple[Sequence[int], Sequence[int]]], cls_id: int, sep_id: int, pad_id: int
) -> tuple[Tensor, Tensor, Tensor]:
    """Assemble a batch of sentence pairs as ``[CLS] a [SEP] b [SEP]``, right-padded.

    Args:
        pairs: B pairs ``(a, b)`` of token-id lists (without specials).
        cls_id, sep_id, pad_id: ids of [CLS], [SEP] and [PAD].
    Returns:
        ``(input_ids, token_type_ids, attention_mask)``, each (B, L) long with L the longest
        assembled pair: segment 0 on ``[CLS] a [SEP]`` (and on padding), 1 on ``b [SEP]``;
        attention_mask 1 at real tokens, 0 at padding.
    """
    rows = []
    for a, b in pairs:
        ids = [cls_id, *a, sep_id, *b, sep_id]
        segments = [0] * (len(a) + 2) + [1] * (len(b) + 1)
        rows.append((ids, segments))
    L = max(len(ids) for ids, _ in rows)
    input_ids = torch.full((len(rows), L), pad_id, dtype=torch.long)  # (B, L)
    token_type_ids = torch.zeros(len(rows), L, dtype=torch.long)
    attention_mask = torch.zeros(len(rows), L, dtype=torch.long)
    for i, (ids, segments) in enumerate(rows):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        token_type_ids[i, : len(ids)] = torch.tensor(segments)
        attention_mask[i, : len(ids)] = 1
    return input_ids, token_type_ids, attention_mask


def mlm_corrupt(
    input_ids: Tensor,
    mask_id: int,
    vocab_size: int,
    special_ids: Iterable[int],
    p: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """BERT's masked-language-model corruption.

    Every non-special token is chosen with probability ``p``. A chosen token becomes [MASK] with
    probability 0.8, a uniformly random non-special token with probability 0.1, and stays as it
    is with probability 0.1 (one uniform number decides, so the three cases never overlap).

    Args:
        input_ids: (B, T) token ids.
        mask_id: id of [MASK].
        vocab_size: V; random replacements are drawn from the non-special ids in 0..V-1.
        special_ids: ids that are never chosen and never drawn ([PAD], [CLS], [SEP], [MASK], ...).
        p: probability that a non-special token is chosen.
        generator: a seeded ``torch.Generator`` (reproducible corruption).
    Returns:
        ``(inputs, labels)``, both (B, T) long: the corrupted ids, and the original id at the
        chosen positions with -100 everywhere else.
    """
    special = torch.tensor(sorted(set(special_ids)), dtype=torch.long)
    is_special = torch.isin(input_ids, special)  # (B, T)
    chosen = (torch.rand(input_ids.shape, generator=generator) < p) & ~is_special
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    ordinary = torch.ones(vocab_size, dtype=torch.bool)
    ordinary[special[(special >= 0) & (special < vocab_size)]] = False
    pool = ordinary.nonzero().squeeze(1)  # (V',) the ids a random replacement may take
    draw = pool[torch.randint(len(pool), input_ids.shape, generator=generator)]  # (B, T)
    u = torch.rand(input_ids.shape, generator=generator)  # one number decides the case
    inputs = torch.where(chosen & (u < 0.8), torch.full_like(input_ids, mask_id), input_ids)
    inputs = torch.where(chosen & (u >= 0.8) & (u < 0.9), draw, inputs)
    return inputs, labels


def masked_lm_loss(hidden: Tensor, labels: Tensor, head: Callable[[Tensor], Tensor]) -> Tensor:
    """Mean cross-entropy over the labelled positions, with the MLM head run on those only.

    Args:
        hidden: (B, T, C) encoder outputs.
        labels: (B, T) original ids at the chosen positions, -100 elsewhere.
        head: maps (M, C) vectors to (M, V) logits.
    Returns:
        a 0-dim tensor.
    """
    chosen = labels != IGNORE_INDEX  # (B, T)
    return F.cross_entropy(head(hidden[chosen]), labels[chosen])  # (M, V) vs (M,)


def cls_logits(
    hidden: Tensor, pooler: Callable[[Tensor], Tensor], classifier: Callable[[Tensor], Tensor]
) -> Tensor:
    """BERT's sentence classifier: ``classifier(tanh(pooler(h_[CLS])))``.

    Args:
        hidden: (B, T, C) encoder outputs; position 0 holds [CLS].
        pooler: a (C -> C) linear layer; classifier: a (C -> n_classes) linear layer.
    Returns:
        (B, n_classes) logits.
    """
    return classifier(torch.tanh(pooler(hidden[:, 0])))  # (B, C) -> (B, n_classes)
