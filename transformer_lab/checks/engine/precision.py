"""float64 in, float64 accuracy out: an output with the right dtype but only float32's accuracy
means something inside the student's function computed in float32 and was cast back."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["float32_inside"]


def float32_inside(out: Tensor, expected: Tensor) -> str | None:
    """The verdict when a float64 output is right only to float32's accuracy, else None."""
    if expected.dtype != torch.float64 or out.dtype != torch.float64 or out.shape != expected.shape:
        return None
    err = (out.detach() - expected).abs().nan_to_num(nan=float("inf")).max().item()
    if not 1e-10 + 1e-9 * expected.abs().max().item() < err < 1e-4:
        return None
    return (
        f"the inputs are float64 and so is your output's dtype, but it is only float32-accurate "
        f"(off by {err:.1e}): something inside computes in float32 (a .float(), or a tensor made "
        f"without dtype=) and is cast back; keep the inputs' dtype, float64, throughout"
    )
