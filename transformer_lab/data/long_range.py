"""A long-range task: recall the first token of a sequence at its end (notebook 0).

Each sequence holds ``distance + 1`` symbols drawn uniformly from ``n_symbols``; the label is
the first one, and a model must output it at the last position, ``distance`` steps later.
Guessing scores ``1 / n_symbols``. Nothing else in the sequence helps, so accuracy measures
only whether information travels that far.
"""

from __future__ import annotations

import torch

__all__ = ["recall_batch"]


def recall_batch(
    batch_size: int,
    distance: int,
    n_symbols: int = 8,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of the recall task.

    Args:
        batch_size: B sequences.
        distance: steps between the token to recall and the last position (>= 1).
        n_symbols: size of the alphabet (>= 2).
        generator: a seeded ``torch.Generator`` for reproducible batches.
    Returns:
        (x, y): x (B, distance + 1) long symbols, y (B,) long, y = x[:, 0].
    """
    for name, value, least in (
        ("batch_size", batch_size, 1),
        ("distance", distance, 1),
        ("n_symbols", n_symbols, 2),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an int >= {least}, but received {value!r}.")
    x = torch.randint(n_symbols, (batch_size, distance + 1), generator=generator)  # (B, T)
    return x, x[:, 0].clone()
