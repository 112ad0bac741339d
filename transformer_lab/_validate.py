"""Input validation for the whole package: tensors, masks, model configs and token ids.

Each check raises one sentence naming what was expected and what was received (for configs,
the field), so a beginner never has to read a traceback from deep inside torch, and a wrong
config fails when it is built rather than deep inside a forward pass. (Student-facing feedback
on exercises lives in :mod:`transformer_lab.checks`, not here.)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor


def check_tensor(
    name: str,
    x: object,
    *,
    min_dims: int = 0,
    dims: int | tuple[int, ...] | None = None,
    last_dim: int | None = None,
    last_dim_name: str = "width",
) -> None:
    """Raise TypeError/ValueError unless ``x`` is a tensor of the expected rank and width."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, but received {type(x).__name__}.")
    if x.dim() < min_dims:
        raise ValueError(
            f"{name} must have at least {min_dims} dimensions, but received shape {tuple(x.shape)}."
        )
    if dims is not None:
        allowed = (dims,) if isinstance(dims, int) else dims
        if x.dim() not in allowed:
            expected = " or ".join(str(d) for d in allowed)
            raise ValueError(
                f"{name} must have {expected} dimensions, but received shape {tuple(x.shape)}."
            )
    if last_dim is not None and x.shape[-1] != last_dim:
        raise ValueError(
            f"{name} must have last dimension {last_dim_name}={last_dim}, "
            f"but received shape {tuple(x.shape)}."
        )


def check_mask(mask: object, scores_shape: torch.Size | tuple[int, ...]) -> None:
    """Raise unless ``mask`` is boolean and broadcasts to the attention scores' shape."""
    if not isinstance(mask, Tensor):
        raise TypeError(f"mask must be a boolean torch.Tensor, but received {type(mask).__name__}.")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask must have dtype torch.bool (True = may attend), but received dtype {mask.dtype}; "
            f"convert it with `mask.bool()` if 1 means 'may attend'."
        )
    shape = tuple(scores_shape)
    try:
        broadcast = torch.broadcast_shapes(mask.shape, shape)
    except RuntimeError:
        broadcast = None
    if broadcast != shape:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the attention scores of shape "
            f"{shape} (queries T={shape[-2]}, keys S={shape[-1]})."
        )


def check_divisible(d_model: int, n_heads: int) -> None:
    """Raise unless the model width splits evenly into heads."""
    if n_heads <= 0 or d_model <= 0:
        raise ValueError(
            f"d_model and n_heads must be positive, but received d_model={d_model}, n_heads={n_heads}."
        )
    if d_model % n_heads != 0:
        raise ValueError(
            f"d_model must be divisible by n_heads so every head gets d_model / n_heads features, "
            f"but received d_model={d_model} and n_heads={n_heads}."
        )


# --- model configs and token ids ------------------------------------------------------------


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


def check_heads(config: Any, width: str = "d_model", heads: str = "n_heads") -> None:
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
