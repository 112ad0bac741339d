"""What the ViT explorers share: the digits split, the trained ViT, a student's call and verdict.

Torch only: no widgets are imported here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

__all__ = ["digits", "try_call", "compare_tensor", "load_vit"]


def digits():
    """The 8x8 digits, normalised, in the split every notebook uses."""
    from transformer_lab.data import load_digits_data

    return load_digits_data(seed=0, normalize=True)  # the split every notebook uses


def try_call(fn: Callable[..., Any], *args: Any) -> tuple[Any, str | None]:
    """Call a student's function; return (result, None) or (None, one-line error)."""
    try:
        return fn(*args), None
    except Exception as err:  # a student's bug is shown in the widget, never as a traceback
        text = str(err).strip().splitlines()[0] if str(err).strip() else ""
        return None, f"{type(err).__name__}: {text}"[:200]


def compare_tensor(student: Any, expected: Tensor) -> tuple[np.ndarray | None, str]:
    """(where the student's tensor differs, a readout) for a result that may be anything."""
    if not isinstance(student, Tensor):
        return None, f"your function returned {type(student).__name__}, not a tensor"
    if tuple(student.shape) != tuple(expected.shape):
        return None, f"your shape {tuple(student.shape)} vs expected {tuple(expected.shape)}"
    diff = (student.detach().double() - expected.double()).abs()
    diff = torch.nan_to_num(diff, nan=float("inf"))
    worst = float(diff.max()) if diff.numel() else 0.0
    verdict = "matches the reference" if worst <= 1e-5 else f"differs: max |difference| {worst:.3g}"
    return (diff > 1e-5).numpy(), verdict


def load_vit(model: nn.Module | None) -> nn.Module:
    """``model`` in eval mode, or the shipped ``vit_digits`` checkpoint when None."""
    if model is None:
        from transformer_lab.checkpoints import load_pretrained

        model, _ = load_pretrained("vit_digits")
    return model.eval()
