"""The unigram baseline: the loss of predicting every token from its overall frequency.

A masked-language model that ignores the context can do no better than this, so it is the
figure an MLM's loss has to beat (:meth:`transformer_lab.data.WordOrderTask.unigram_baseline`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["unigram_entropy", "unigram_cross_entropy"]


def _token_counts(ids: Tensor, vocab_size: int, ignore_ids: Sequence[int]) -> Tensor:
    flat = torch.as_tensor(ids).reshape(-1).long()  # (L,)
    if flat.numel() and (flat.min() < 0 or flat.max() >= vocab_size):
        raise ValueError(
            f"token ids must lie in 0..{vocab_size - 1}, but received ids from {int(flat.min())} to {int(flat.max())}."
        )
    counts = torch.bincount(flat, minlength=vocab_size).double()  # (V,)
    counts[list(ignore_ids)] = 0.0
    return counts


def unigram_entropy(
    ids: Tensor, vocab_size: int | None = None, ignore_ids: Sequence[int] = ()
) -> float:
    """Entropy (nats) of the token frequencies in ``ids``: the best loss any context-free predictor
    can reach on this same data.

    Args:
        ids: token ids of any shape.
        vocab_size: V (default: max id + 1).
        ignore_ids: ids left out of both the counts and the average (e.g. padding).
    """
    ids = torch.as_tensor(ids)
    vocab_size = int(ids.max()) + 1 if vocab_size is None else vocab_size
    counts = _token_counts(ids, vocab_size, ignore_ids)
    total = counts.sum()
    if total == 0:
        raise ValueError(
            "unigram_entropy needs at least one token that is not ignored, but received none."
        )
    p = counts[counts > 0] / total
    return float(-(p * p.log()).sum())


def unigram_cross_entropy(
    train_ids: Tensor,
    eval_ids: Tensor,
    vocab_size: int,
    ignore_ids: Sequence[int] = (),
    alpha: float = 1.0,
) -> float:
    """Mean cross-entropy (nats) of ``eval_ids`` under the unigram frequencies of ``train_ids``.

    Frequencies use add-``alpha`` smoothing over the non-ignored vocabulary, so a token never
    seen in training gets a small, finite probability.
    """
    if alpha <= 0:
        raise ValueError(
            f"alpha must be positive so unseen tokens get a finite loss, but received {alpha}."
        )
    counts = _token_counts(train_ids, vocab_size, ignore_ids)
    keep = torch.ones(vocab_size, dtype=torch.bool)
    keep[list(ignore_ids)] = False
    smoothed = torch.where(keep, counts + alpha, torch.zeros_like(counts))  # (V,)
    log_p = (smoothed / smoothed.sum()).log()  # (V,), -inf at ignored ids
    eval_counts = _token_counts(eval_ids, vocab_size, ignore_ids)
    if eval_counts.sum() == 0:
        raise ValueError(
            "unigram_cross_entropy needs at least one evaluation token that is not ignored."
        )
    return float(-(eval_counts[keep] * log_p[keep]).sum() / eval_counts.sum())
