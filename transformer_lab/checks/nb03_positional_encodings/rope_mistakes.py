"""The known mistakes of notebook 03's rotary position embedding, each computed on the case's
input: no rotation, rotated the wrong way, positions from 1, the exponent i/D, pairs as halves
(i, i + D/2) or read as halves and written as pairs, positions along the head axis, one frequency
for every pair, the odd channels left as they are. The check is in rope.py.
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_lab.checks.engine.core import Mistake

__all__ = []


def _rotate_pairs(x: Tensor, angles: Tensor) -> Tensor:
    """Rotate pairs (2i, 2i+1) by the given (T, D/2) angles (used to name mistakes)."""
    cos, sin = angles.cos().float(), angles.sin().float()
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., T, D/2) each
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(
        -2
    )  # (..., T, D)


def _rotate_halves(x: Tensor, angles: Tensor) -> Tensor:
    """The other common layout: pair channel i with channel i + D/2."""
    cos, sin = angles.cos().float(), angles.sin().float()
    first, second = x.chunk(2, dim=-1)  # (..., T, D/2) each
    return torch.cat(
        [first * cos - second * sin, first * sin + second * cos], dim=-1
    )  # (..., T, D)


def _rope_mistakes(x: Tensor, base: float) -> list[Mistake]:
    T, D = x.shape[-2:]
    t = torch.arange(T, dtype=torch.float64)[:, None]  # (T, 1)
    i2 = torch.arange(0, D, 2, dtype=torch.float64)  # even channel indices 2i
    theta = base ** (-i2 / D)  # (D/2,)

    def by_head_index() -> Tensor:  # positions taken along dim -3 (the heads)
        P = x.shape[-3]
        angles = torch.arange(P, dtype=torch.float64)[:, None, None] * theta  # (P, 1, D/2)
        cos, sin = angles.cos().float(), angles.sin().float()
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack([even * cos - odd * sin, even * sin + odd * cos], -1).flatten(-2)

    def even_only() -> Tensor:
        out = x.clone()
        cos, sin = (t * theta).cos().float(), (t * theta).sin().float()
        out[..., 0::2] = x[..., 0::2] * cos - x[..., 1::2] * sin
        return out

    def halves_read_pairs_written() -> Tensor:
        cos, sin = (t * theta).cos().float(), (t * theta).sin().float()
        first, second = x.chunk(2, dim=-1)
        return torch.stack([first * cos - second * sin, first * sin + second * cos], -1).flatten(-2)

    return [
        Mistake(
            "your output equals the input: the pairs are not rotated (pair i of the row at "
            "position t turns by t theta_i)",
            lambda: x.clone(),
        ),
        Mistake(
            "rotated the wrong way (the minus sign belongs to the first formula: "
            "x_even cos - x_odd sin)",
            lambda: _rotate_pairs(x, -t * theta),
        ),
        Mistake(
            "positions start at 1; the first row (t = 0) must not be rotated",
            lambda: _rotate_pairs(x, (t + 1) * theta),
        ),
        Mistake(
            "the exponent is 2i/D over the even channel index, not i/D",
            lambda: _rotate_pairs(x, t * base ** (-i2 / 2 / D)),
        ),
        Mistake(
            "pairs are channels (2i, 2i+1), side by side, not (i, i + D/2)",
            lambda: _rotate_halves(x, t * theta),
        ),
        Mistake(
            "you read the pairs as halves (channel i with i + D/2) but wrote them back "
            "interleaved: a pair is two adjacent channels (2i, 2i+1), x[..., 0::2] and "
            "x[..., 1::2], in both places",
            halves_read_pairs_written,
        ),
        Mistake(
            "the positions are taken along the wrong axis: position t is the index along the "
            "second-last dim (T) of x (..., T, D), not the head axis",
            by_head_index,
        ),
        Mistake(
            "every pair turns at the same frequency: pair i needs theta_i = base^(-2i/D); the "
            "angle is t * theta_i, not t",
            lambda: _rotate_pairs(x, t * torch.ones_like(theta)),
        ),
        Mistake(
            "the odd channels are not updated: x'_(2i+1) = x_(2i) sin + x_(2i+1) cos",
            even_only,
        ),
    ]
