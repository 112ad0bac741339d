"""Validation shared by the model configs and the models' entry points.

Every message is one sentence naming the field (or argument), what was expected and what was
received, so a wrong config fails when it is built rather than deep inside a forward pass.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor

from transformer_lab import blocks
from transformer_lab._validate import check_tensor

ACTIVATIONS = tuple(blocks.ACTIVATIONS)  # names FeedForward accepts


def _name(config: Any, field: str) -> str:
    return f"{type(config).__name__}.{field}"


def check_positive(config: Any, *fields: str) -> None:
    """Each named field must be a positive int."""
    for field in fields:
        value = getattr(config, field)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(
                f"{_name(config, field)} must be a positive integer, but received {field}={value!r}."
            )


def check_probability(config: Any, *fields: str) -> None:
    """Each named field must be a dropout probability in [0, 1)."""
    for field in fields:
        value = getattr(config, field)
        if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
            raise ValueError(
                f"{_name(config, field)} must be a probability in [0, 1), but received {field}={value!r}."
            )


def check_eps(config: Any, field: str = "eps") -> None:
    value = getattr(config, field)
    if not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(
            f"{_name(config, field)} must be a small positive number, but received {field}={value!r}."
        )


def check_choice(config: Any, field: str, options: Iterable[Any]) -> None:
    value = getattr(config, field)
    options = tuple(options)
    if value not in options:
        raise ValueError(
            f"{_name(config, field)} must be one of {list(options)}, but received {field}={value!r}."
        )


def check_heads(config: Any, width: str = "d_model", heads: str = "n_head") -> None:
    """The model width must split evenly into heads."""
    c, h = getattr(config, width), getattr(config, heads)
    if c % h != 0:
        raise ValueError(
            f"{_name(config, width)} must be divisible by {heads} so every head gets {width} / {heads} "
            f"features, but received {width}={c} and {heads}={h}."
        )


def check_token_ids(name: str, ids: object, vocab_size: int, max_len: int | None = None) -> None:
    """``ids`` must be a (B, T) integer tensor with 0 <= id < vocab_size and T <= max_len."""
    check_tensor(name, ids, dims=2)
    assert isinstance(ids, Tensor)
    if ids.dtype.is_floating_point or ids.dtype == torch.bool or ids.is_complex():
        raise TypeError(
            f"{name} must hold integer token ids (torch.long), but received dtype {ids.dtype}."
        )
    if ids.shape[1] == 0:
        raise ValueError(
            f"{name} must hold at least one token per sequence, but received shape {tuple(ids.shape)}."
        )
    if max_len is not None and ids.shape[1] > max_len:
        raise ValueError(
            f"{name} has {ids.shape[1]} tokens per sequence, but the position table holds only "
            f"{max_len} positions; crop the input to the last {max_len} tokens."
        )
    if ids.numel():
        low, high = int(ids.min()), int(ids.max())
        if low < 0 or high >= vocab_size:
            bad = low if low < 0 else high
            raise ValueError(
                f"{name} must lie in 0..{vocab_size - 1} (vocab_size={vocab_size}), but received token id {bad}."
            )
