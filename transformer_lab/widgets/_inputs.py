"""Input checks and seeded toy inputs for the explorers (torch only, no widgets)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from transformer_lab._validate import check_tensor

DEFAULT_SENTENCE = ("the", "cat", "sat", "on", "the", "mat")


def check_tokens(tokens: str | Sequence[str] | None, *, max_len: int = 16) -> list[str]:
    """Accept a whitespace-separated string or a list of strings; return the list."""
    if tokens is None:
        return list(DEFAULT_SENTENCE)
    if isinstance(tokens, str):
        tokens = tokens.split()
    if not isinstance(tokens, Sequence) or not all(isinstance(t, str) for t in tokens):
        raise TypeError(f"tokens must be a string or a list of strings, but received {tokens!r}.")
    if not 1 <= len(tokens) <= max_len:
        raise ValueError(f"tokens must hold 1 to {max_len} tokens, but received {len(tokens)}.")
    return list(tokens)


def as_float_tensor(name: str, values: object) -> Tensor:
    """A float32 copy of a tensor or a list of numbers."""
    if isinstance(values, Tensor):
        return values.detach().float()
    try:
        return torch.as_tensor(values, dtype=torch.float32)
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(
            f"{name} must be a tensor or a list of numbers, but received {values!r}."
        ) from None


def check_positive(name: str, value: object) -> None:
    """Raise unless ``value`` is a positive integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, but received {name}={value!r}.")


def seeded_embeddings(tokens: list[str], d_model: int, seed: int) -> Tensor:
    """One random unit-variance vector per distinct word, so repeated words share a row.

    Returns:
        (T, C) float32.
    """
    vocab = sorted(set(tokens))
    gen = torch.Generator().manual_seed(seed)
    table = torch.randn(len(vocab), d_model, generator=gen)  # (V, C)
    return table[torch.tensor([vocab.index(t) for t in tokens])]  # (T, C)


def check_embeddings(embeddings: object, tokens: list[str]) -> Tensor:
    """Accept a (T, C) tensor with one row per token."""
    check_tensor("embeddings", embeddings, dims=2)
    assert isinstance(embeddings, Tensor)
    if embeddings.shape[0] != len(tokens):
        raise ValueError(
            f"embeddings must have one row per token, but received {embeddings.shape[0]} rows "
            f"for {len(tokens)} tokens."
        )
    return embeddings.detach().float()
