"""Batching helpers shared by the datasets: padding, random batches and ordered mini-batches."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from torch import Tensor

__all__ = ["IGNORE_INDEX", "pad_sequences", "sample_batch", "iterate_batches"]

IGNORE_INDEX = -100
"""Target value that ``torch.nn.functional.cross_entropy`` skips by default (padding, unmasked)."""


def pad_sequences(
    sequences: Sequence[Sequence[int]], pad_id: int, length: int | None = None
) -> Tensor:
    """Right-pad variable-length id sequences into one tensor.

    Args:
        sequences: B lists of ids.
        pad_id: the id written after each sequence's end.
        length: padded length L (default: the longest sequence); longer sequences raise.
    Returns:
        (B, L) long.
    """
    if len(sequences) == 0:
        raise ValueError("pad_sequences expects at least one sequence, but received none.")
    longest = max(len(s) for s in sequences)
    length = longest if length is None else length
    if longest > length:
        raise ValueError(
            f"pad_sequences expects sequences of at most length={length} ids, "
            f"but received one of {longest} ids."
        )
    out = torch.full((len(sequences), length), pad_id, dtype=torch.long)  # (B, L)
    for row, seq in enumerate(sequences):
        if len(seq):
            out[row, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
    return out


def _check_same_length(tensors: Sequence[Tensor]) -> int:
    if not tensors:
        raise ValueError("expected at least one tensor to batch, but received none.")
    n = len(tensors[0])
    lengths = [len(t) for t in tensors]
    if any(m != n for m in lengths):
        raise ValueError(
            f"all tensors must have the same first dimension (one row per example), "
            f"but received first dimensions {lengths}."
        )
    return n


def sample_batch(
    *tensors: Tensor,
    batch_size: int,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> tuple[Tensor, ...]:
    """Draw ``batch_size`` random rows (with replacement across calls) from aligned tensors.

    Example: ``x, y = sample_batch(images, labels, batch_size=64)``.

    Returns:
        the same rows of every tensor, each (batch_size, ...).
    """
    n = _check_same_length(tensors)
    if batch_size < 1 or batch_size > n:
        raise ValueError(
            f"batch_size must lie in 1..{n} (the number of examples), but received {batch_size}."
        )
    # randperm would shuffle all n rows; randint samples only what we need.
    idx = torch.randint(n, (batch_size,), generator=generator)  # (B,)
    out = tuple(t[idx.to(t.device)] for t in tensors)
    if device is not None:
        out = tuple(t.to(device) for t in out)
    return out


def iterate_batches(
    *tensors: Tensor,
    batch_size: int,
    shuffle: bool = False,
    generator: torch.Generator | None = None,
    drop_last: bool = False,
) -> Iterator[tuple[Tensor, ...]]:
    """One pass over aligned tensors in mini-batches (ordered unless ``shuffle``).

    Yields:
        tuples of (batch_size, ...) slices; the last one may be smaller unless ``drop_last``.
    """
    n = _check_same_length(tensors)
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, but received {batch_size}.")
    order = torch.randperm(n, generator=generator) if shuffle else torch.arange(n)  # (n,)
    stop = n - n % batch_size if drop_last else n
    for start in range(0, stop, batch_size):
        idx = order[start : start + batch_size]
        yield tuple(t[idx.to(t.device)] for t in tensors)
