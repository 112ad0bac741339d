"""Associative recall: find a value by its key, where position alone cannot help (notebook 00).

The first-token recall of :mod:`transformer_lab.data.long_range` always asks for position 0, so
a model can solve it by position alone (attention's query learns to look at position 0). Here
the answer's position changes from sequence to sequence and only content finds it: a sequence
holds ``n_pairs`` key-value pairs with distinct keys, in random order, then a query key; the
label is the value stored with that key (associative recall, as in Ba et al., 2016, "Using Fast
Weights to Attend to the Recent Past", and the H3 and Hyena papers' synthetic tasks).

Each pair is **one token** (id ``key * n_values + value``) so that a single attention layer
can match the query against keys and read the value from the same position; queries are the
ids after the pairs (``n_keys * n_values + key``). Guessing scores 1 / n_values.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

__all__ = ["vocab_size", "associative_batch", "train_task"]


def vocab_size(n_keys: int = 8, n_values: int = 8) -> int:
    """Symbols of the task: every (key, value) pair, then every query key."""
    return n_keys * n_values + n_keys


def associative_batch(
    batch_size: int,
    n_pairs: int,
    n_keys: int = 8,
    n_values: int = 8,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of the task.

    Args:
        batch_size: B sequences.
        n_pairs: key-value pairs per sequence (1 <= n_pairs <= n_keys; keys are distinct).
        n_keys, n_values: sizes of the two alphabets (>= 2 each).
        generator: a seeded ``torch.Generator``.
    Returns:
        (x, y): x (B, n_pairs + 1) long, the pairs then the query; y (B,) long values.
    """
    if n_keys < 2 or n_values < 2:
        raise ValueError(f"n_keys and n_values must be >= 2, but received {n_keys} and {n_values}.")
    if not 1 <= n_pairs <= n_keys:
        raise ValueError(f"n_pairs must lie in [1, n_keys={n_keys}], but received {n_pairs}.")
    keys = torch.rand(batch_size, n_keys, generator=generator).argsort(dim=1)[:, :n_pairs]  # (B, P)
    values = torch.randint(n_values, (batch_size, n_pairs), generator=generator)  # (B, P)
    asked = torch.randint(n_pairs, (batch_size,), generator=generator)  # (B,) which pair
    rows = torch.arange(batch_size)
    query = n_keys * n_values + keys[rows, asked]  # (B,)
    x = torch.cat([keys * n_values + values, query[:, None]], dim=1)  # (B, P + 1)
    return x, values[rows, asked]


def train_task(
    model: nn.Module,
    make_batch: Callable[[int, torch.Generator], tuple[torch.Tensor, torch.Tensor]],
    steps: int = 300,
    batch_size: int = 64,
    lr: float = 3e-3,
    seed: int = 0,
    eval_size: int = 512,
) -> float:
    """Train ``model`` on ``make_batch(batch_size, generator)`` with Adam; held-out accuracy."""
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        x, y = make_batch(batch_size, g)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    model.eval()
    x, y = make_batch(eval_size, torch.Generator().manual_seed(seed + 1))
    with torch.no_grad():
        return (model(x).argmax(-1) == y).float().mean().item()
