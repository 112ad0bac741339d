"""How far vectors lie from the span of other vectors: the numbers behind "attention stays in
the span of the values, the MLP leaves it" (notebook 05).

    distance_from_span  (N, C) rows, (K, C) basis -> (N,) distance of each row from span(basis)

Attention's output for one query is a weighted average of the value rows (weights >= 0, summing
to one), so it lies in their span and its distance is zero up to rounding. A position-wise MLP
applies a non-linearity feature by feature, which generally leaves that subspace.
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_lab._validate import check_tensor

__all__ = ["distance_from_span"]


def distance_from_span(rows: Tensor, basis: Tensor) -> Tensor:
    """Euclidean distance of each row of ``rows`` from the span of the rows of ``basis``.

    Args:
        rows: (N, C) vectors to test.
        basis: (K, C) vectors spanning the subspace (they need not be independent).
    Returns:
        (N,) float64 distances: 0 for a row inside the span.
    """
    check_tensor("rows", rows, dims=2)
    check_tensor("basis", basis, dims=2, last_dim=rows.shape[-1], last_dim_name="rows' width")
    rows64, basis64 = rows.double(), basis.double()
    projection = rows64 @ torch.linalg.pinv(basis64) @ basis64  # (N, C): closest point in the span
    return (rows64 - projection).norm(dim=-1)
