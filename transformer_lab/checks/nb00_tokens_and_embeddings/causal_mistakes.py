"""The mistakes of causal_average replayed on a case's input (the check is in causal_average.py):
the weights built wrong (the triangle, the divisor, a softmax of unmasked zeros), the right
weights on the wrong axis or the batch, and the mean one position off (the position itself left
out, or one future position let in).

    mistakes(x, got, want) -> [Mistake, ...]
"""

from __future__ import annotations

import torch

from transformer_lab.checks.engine.core import Mistake
from transformer_lab.lessons import why_attention as _ref

__all__ = ["mistakes"]

_FUTURE = "future positions leak in"


def _when(applies: bool, compute):
    """A mistake that only shows on some shapes: raising skips it (see Mistake)."""
    if not applies:
        raise ValueError("this mistake does not apply to this input")
    return compute()


def _counts(n: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.arange(1, n + 1, dtype=dtype)[:, None]  # (n, 1): 1, 2, ..., n


def _weight_mistakes(x: torch.Tensor) -> list[Mistake]:
    """The weights built wrong: the triangle, the divisor, the division."""
    T = x.shape[-2]
    ones = torch.ones(T, T, dtype=torch.float64)
    low = ones.tril()  # (T, T)
    rows = low.sum(dim=1, keepdim=True)  # (T, 1): t + 1
    a = (low / rows).to(x.dtype)

    def normalised(keep: torch.Tensor) -> torch.Tensor:
        return (keep / keep.sum(dim=1, keepdim=True)).to(x.dtype)  # 0/0 rows give NaN

    return [
        Mistake(
            f"{_FUTURE}: your weights are upper-triangular, so position t averages positions "
            f"t..T-1 (the future); keep the lower triangle, torch.tril",
            lambda: normalised(ones.triu()) @ x,
        ),
        Mistake(
            f"{_FUTURE}: you use the weight matrix transposed (upper-triangular), so position t "
            f"takes the positions after it; row t of A holds 1/(t + 1) in columns 0..t, out = A @ x",
            lambda: a.T @ x,
        ),
        Mistake(
            f"{_FUTURE}: position t also takes position t + 1 (tril(diagonal=1)); the mean is "
            f"over positions 0..t, torch.tril(...) with diagonal=0",
            lambda: normalised(ones.tril(1)) @ x,
        ),
        Mistake(
            f"{_FUTURE}: the softmax gives the future positions weight too, because they hold "
            f"0 (exp(0) = 1), not -inf; fill the entries above the diagonal with -inf before "
            f"the softmax",
            lambda: ones.tril().softmax(dim=-1).to(x.dtype) @ x,
        ),
        Mistake(
            f"{_FUTURE}: every position averages all T positions (nothing is masked, or the "
            f"future was filled with 0 instead of -inf before the softmax); position t may only "
            f"average positions 0..t",
            lambda: torch.full((T, T), 1.0 / T, dtype=x.dtype) @ x,
        ),
        Mistake(
            "you divide every row by T: row t sums t + 1 positions, so divide it by t + 1 "
            "(the row's count of ones, .sum(dim=1, keepdim=True))",
            lambda: (low / T).to(x.dtype) @ x,
        ),
        Mistake(
            "off by one: you divide row t by t, but it sums t + 1 positions (0..t)",
            lambda: (low / (rows - 1)).to(x.dtype) @ x,
        ),
        Mistake(
            "off by one: you divide row t by t + 2, but it sums t + 1 positions (0..t)",
            lambda: (low / (rows + 1)).to(x.dtype) @ x,
        ),
        Mistake(
            "the position itself is left out (tril(diagonal=-1), or x[:t] instead of x[:t + 1]): "
            "the mean is over positions 0..t, including t",
            lambda: normalised(ones.tril(-1)) @ x,
        ),
        Mistake(
            "the position itself is left out of the sum (x.cumsum() - x, or tril(diagonal=-1)), "
            "though you divide by t + 1: the mean is over positions 0..t, including t",
            lambda: (ones.tril(-1) / rows).to(x.dtype) @ x,
        ),
        Mistake(
            "you divide each column, not each row: w / w.sum(dim=1) lines the row sums up with "
            "the columns; keep the dimension, w / w.sum(dim=1, keepdim=True)",
            lambda: (low / low.sum(dim=1)).to(x.dtype) @ x,
        ),
        Mistake(
            "you divide each column by its own count (w.sum(dim=0), or a softmax over dim 0): "
            "row t must be divided by its count t + 1, w / w.sum(dim=1, keepdim=True)",
            lambda: (low / low.sum(dim=0)).to(x.dtype) @ x,
        ),
        Mistake(
            "integer division: 1 // (t + 1) is 0 for every t > 0; divide with /, in x's dtype",
            lambda: torch.div(low, rows, rounding_mode="floor").to(x.dtype) @ x,
        ),
        Mistake(
            "you return the running sums, not the means: divide row t by t + 1",
            lambda: low.to(x.dtype) @ x,
        ),
    ]


def _layout_mistakes(x: torch.Tensor) -> list[Mistake]:
    """The right weights on the wrong axis, the batch or the wrong thing returned."""
    T, C = x.shape[-2], x.shape[-1]
    a = _ref.causal_average_matrix(T).to(x.dtype)  # (T, T)
    a_c = _ref.causal_average_matrix(C).to(x.dtype)  # (C, C): the same average over channels
    return [
        Mistake(
            "you average across the channels (the last dimension), not along the positions: "
            "multiply from the left, A @ x with A (T, T), or average over dim -2",
            lambda: x @ a_c.T,
        ),
        Mistake(
            "you average across the channels (the last dimension), not along the positions: "
            "multiply from the left, A @ x with A (T, T), or average over dim -2",
            lambda: x @ a_c,
        ),
        Mistake(
            "you average across the channels: x @ A mixes the columns of x; the positions are "
            "its rows, so A @ x",
            lambda: _when(T == C, lambda: x @ a),
        ),
        Mistake(
            "you return the weight matrix A itself: return the averages, A @ x",
            lambda: _when((T, C) == tuple(x.shape), lambda: a),
        ),
        Mistake(
            "you average over dim 0, the batch, when x is (B, T, C): the positions are dim -2 "
            "for both shapes (dim 1 of (B, T, C), dim 0 of (T, C))",
            lambda: _when(
                x.dim() == 3, lambda: x.cumsum(0) / _counts(x.shape[0], x.dtype)[:, None]
            ),
        ),
        Mistake(
            "position 0 is left at zero (a loop from 1?): row 0 is the mean of row 0 alone, x[0]",
            lambda: torch.cat([torch.zeros_like(x[..., :1, :]), (a @ x)[..., 1:, :]], dim=-2),
        ),
    ]


def _shift_mistakes(x: torch.Tensor, got: torch.Tensor, want: torch.Tensor) -> list[Mistake]:
    """Rows holding the mean one position off, whatever the student put in the row left over:
    0..t-1 (the position itself left out) or 0..t+1 (one future position)."""
    T = x.shape[-2]
    if T < 2:
        return []
    past = torch.cat([got[..., :1, :], want[..., :-1, :]], dim=-2)
    ahead = torch.cat([want[..., 1:, :], got[..., -1:, :]], dim=-2)
    return [
        Mistake(
            "the current position itself is left out: row t averages positions 0..t-1 "
            "(tril(diagonal=-1), or x[:t] instead of x[:t + 1]); the mean is over 0..t, "
            "including t (the diagonal)",
            lambda: past,
        ),
        Mistake(
            f"{_FUTURE}: row t averages positions 0..t+1, one position ahead; the mean is over "
            f"positions 0..t (torch.tril with diagonal=0, x[:t + 1])",
            lambda: ahead,
        ),
    ]


def mistakes(x: torch.Tensor, got: torch.Tensor, want: torch.Tensor) -> list[Mistake]:
    """What the output looks like after each named mistake, on this input (``got``, the
    student's output, fills the row a shifted mean leaves over)."""
    return _weight_mistakes(x) + _layout_mistakes(x) + _shift_mistakes(x, got, want)
