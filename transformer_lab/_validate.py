"""Input checks shared by the public entry points.

Each raises one sentence naming what was expected and what was received, so a beginner
never has to read a traceback from deep inside torch.
"""

from __future__ import annotations

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
