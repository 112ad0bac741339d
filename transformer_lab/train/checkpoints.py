"""Save and load a model (with its optimizer state, config and extras) in one file.

Configs are stored as plain dicts, so loading never unpickles code (``weights_only=True``).
Files saved before the names were frozen load too: :func:`load_checkpoint` renames their config
fields and block weights (see :mod:`transformer_lab._renames`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from transformer_lab._renames import upgrade_checkpoint

__all__ = ["save_checkpoint", "load_checkpoint"]


def save_checkpoint(
    path: str | os.PathLike,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    config: Any = None,
    step: int | None = None,
    **extra: Any,
) -> Path:
    """Save the model's weights (and optimizer state, config, step, extras) to one file.

    Args:
        config: a dataclass or dict of plain values; defaults to ``model.config`` if the model
            has one. Stored as a dict so :func:`load_checkpoint` never needs to unpickle code.
        extra: more plain values to store (e.g. ``vocab=tokenizer.chars``).
    Returns:
        the path written.
    """
    path = Path(path)
    if config is None:
        config = getattr(model, "config", None)
    config_class = None
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        config_class = f"{type(config).__module__}.{type(config).__qualname__}"
        config = dataclasses.asdict(config)
    if config is not None and not isinstance(config, Mapping):
        raise TypeError(
            f"config must be a dataclass instance or a dict, but received {type(config).__name__}."
        )
    payload = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "config": dict(config) if config is not None else None,
        "config_class": config_class,
        "step": step,
        "extra": extra,
        "torch_version": str(torch.__version__),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(payload, tmp)
    os.replace(tmp, path)  # atomic: an interrupted save never leaves half a checkpoint
    return path


def load_checkpoint(
    path: str | os.PathLike,
    model: nn.Module | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    map_location: torch.device | str = "cpu",
    strict: bool = True,
) -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint`, restoring weights into ``model``
    (and state into ``optimizer``) if given.

    Returns:
        the checkpoint dict: ``model`` (state dict), ``optimizer``, ``config`` (dict, rebuild
        with e.g. ``GPTConfig(**ckpt["config"])``), ``config_class``, ``step``, ``extra``.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"expected a checkpoint file at {str(path)!r}, but there is no such file."
        )
    ckpt = torch.load(path, map_location=map_location, weights_only=True)
    if not isinstance(ckpt, dict) or "model" not in ckpt:
        raise ValueError(f"{str(path)!r} is not a transformer_lab checkpoint (no 'model' entry).")
    ckpt = upgrade_checkpoint(ckpt)  # files saved before the names were frozen load too
    if model is not None:
        model.load_state_dict(ckpt["model"], strict=strict)
    if optimizer is not None:
        if ckpt.get("optimizer") is None:
            raise ValueError(f"an optimizer was given, but {str(path)!r} holds no optimizer state.")
        optimizer.load_state_dict(ckpt["optimizer"])
    return ckpt
