"""Batching by length: group sequences of similar length so that a batch needs little padding
(the original Transformer's recipe; notebook 05).

    random_batches      indices in a random order, cut into batches
    batches_by_length   indices sorted by length, cut into batches, the batches in a random order
    padding_tokens      how many padding tokens a list of batches needs

A batch is padded to its longest member, so a short sequence next to a long one costs the
difference in padding: computed, attended over (then masked) and thrown away.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["random_batches", "batches_by_length", "padding_tokens"]


def _as_lengths(lengths: Sequence[int] | Tensor) -> Tensor:
    lengths = torch.as_tensor(lengths)
    if lengths.dim() != 1 or lengths.is_floating_point() or (lengths < 0).any():
        raise ValueError(
            f"lengths must be a 1-D sequence of non-negative integers, but received {lengths!r}."
        )
    return lengths


def _check_batch_size(batch_size: int) -> None:
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, but received {batch_size!r}.")


def random_batches(
    n: int, batch_size: int, generator: torch.Generator | None = None
) -> list[Tensor]:
    """Indices 0..n-1 in a random order, cut into batches of ``batch_size`` (the last may be
    smaller)."""
    _check_batch_size(batch_size)
    return list(torch.randperm(n, generator=generator).split(batch_size))


def batches_by_length(
    lengths: Sequence[int] | Tensor, batch_size: int, generator: torch.Generator | None = None
) -> list[Tensor]:
    """Indices sorted by length (ties in a random order), cut into batches of ``batch_size``, the
    batches then shuffled so that training does not see the lengths in order."""
    lengths = _as_lengths(lengths)
    _check_batch_size(batch_size)
    shuffled = torch.randperm(len(lengths), generator=generator)  # random order among ties
    by_length = shuffled[torch.sort(lengths[shuffled], stable=True).indices]  # (N,)
    batches = list(by_length.split(batch_size))
    order = torch.randperm(len(batches), generator=generator).tolist()
    return [batches[i] for i in order]


def padding_tokens(lengths: Sequence[int] | Tensor, batches: Sequence[Tensor]) -> int:
    """Padding tokens needed when each batch is padded to its own longest sequence."""
    lengths = _as_lengths(lengths)
    total = 0
    for batch in batches:
        batch_lengths = lengths[batch]
        total += int(batch_lengths.max()) * len(batch) - int(batch_lengths.sum())
    return total
