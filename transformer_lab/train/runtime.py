"""Reproducibility and placement: seed every random generator, pick the fastest device."""

from __future__ import annotations

import random

import numpy as np
import torch
from torch import nn

__all__ = ["seed_everything", "pick_device", "model_device"]


def seed_everything(seed: int) -> int:
    """Seed Python's ``random``, NumPy and PyTorch (CPU, CUDA and MPS) so a run repeats exactly.

    Returns:
        the seed, for logging.
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, but received {seed!r}.")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA and MPS device
    return seed


def pick_device() -> torch.device:
    """The fastest available device: a CUDA GPU, else Apple's MPS, else the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def model_device(model: nn.Module) -> torch.device:
    """The device of the model's first parameter (the CPU for a model without parameters)."""
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")
