"""Evidence for notebook 03's rotary position embedding, read from the student's output when no
known mistake (rope_mistakes.py) matches it: the right values in the wrong channels (the rotated
evens concatenated before the odds, or another order), and each pair read as a rotation of x's
pair, whose angles reveal an addition instead of a rotation, pairs that change length, angles
that vary with the batch element or head, positions backwards, cos and sin swapped, a multiple
of t * theta_i or the wrong frequencies. The check is in rope.py.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = []


def _channel_order_evidence(got: Tensor, want: Tensor) -> str | None:
    """The right values in the wrong channels: each output channel equals another channel of
    the answer (a concatenation [evens | odds] instead of an interleaving, or another order)."""
    D = want.shape[-1]
    if got.shape != want.shape or D < 3 or not torch.isfinite(got).all():
        return None
    a, b = got.detach().double().reshape(-1, D), want.double().reshape(-1, D)
    close = torch.cdist(a.T, b.T, p=float("inf")) < 1e-4  # (D, D): got channel j == want channel c
    if not (close.sum(1) == 1).all():
        return None
    order = close.float().argmax(1).tolist()  # got channel j holds want channel order[j]
    if sorted(order) != list(range(D)) or order == list(range(D)):
        return None
    concat = list(range(0, D, 2)) + list(range(1, D, 2))
    shown = ", ".join(str(c) for c in order[:6]) + (", ..." if D > 6 else "")
    layout = (
        "the rotated evens are concatenated before the rotated odds ([all x'_2i | all x'_2i+1])"
        if order == concat
        else f"your channels 0, 1, 2, ... hold the answer's channels {shown}"
    )
    return (
        f"right values in the wrong channels, the wrong order: {layout}; write them back "
        f"interleaved, each into its own channel: out[..., 0::2] = x'_2i and out[..., 1::2] = "
        f"x'_2i+1 (or torch.stack([..., ...], dim=-1).flatten(-2))"
    )


def _rotation_evidence(x: Tensor, got: Tensor, base: float) -> str | None:
    """Read the student's output as a rotation of each pair (2i, 2i+1) of x and name what the
    angles reveal: not a rotation, an addition, angles that change along another axis, or
    angles that are a function of the position other than t * theta_i."""
    x, y = x.double(), got.detach().double()
    if x.dim() < 2 or not torch.isfinite(y).all():
        return None
    T, D = x.shape[-2:]
    diff = y - x  # an addition: the same table added to every batch element and head
    lead = diff.reshape(-1, T, D)
    if lead.shape[0] > 1 and torch.allclose(lead, lead[:1].expand_as(lead), atol=1e-5):
        if not torch.allclose(lead[0], torch.zeros_like(lead[0]), atol=1e-5):
            return (
                "your output is x plus a fixed table (the same for every input): RoPE does not "
                "add a position vector, it rotates each pair (x_2i, x_2i+1) by the angle "
                "t * theta_i"
            )
    e, o, e2, o2 = x[..., 0::2], x[..., 1::2], y[..., 0::2], y[..., 1::2]
    if not torch.allclose(e2 * e2 + o2 * o2, e * e + o * o, atol=1e-4, rtol=1e-4):
        return (
            "your pairs change length, so they are not rotated: compute both new values of a "
            "pair from the original x_2i and x_2i+1 with one angle, x'_2i = x_2i cos - x_2i+1 "
            "sin and x'_2i+1 = x_2i sin + x_2i+1 cos (keep the original values until both are "
            "computed)"
        )
    phi = torch.atan2(e * o2 - o * e2, e * e2 + o * o2)  # (..., T, D/2): the angle of each pair
    flat = phi.reshape(-1, T, D // 2)
    wrap = lambda a: torch.remainder(a + torch.pi, 2 * torch.pi) - torch.pi  # noqa: E731
    if flat.shape[0] > 1 and (wrap(flat - flat[:1]).abs() > 1e-4).any():
        return (
            "your angles change with the batch element or head, not only with the position: "
            "position t is the index along the second-last dim of x (..., T, D), the same for "
            "every leading index"
        )
    angle = flat[0]  # (T, D/2)
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    t = torch.arange(T, dtype=torch.float64)[:, None]
    fits = lambda ref: bool((wrap(angle - ref).abs() < 1e-4).all())  # noqa: E731
    if T > 2 and fits((T - 1 - t) * theta):
        return "your positions run backwards (T - 1 - t): the row at index t turns by t * theta_i"
    if fits(torch.pi / 2 - t * theta):
        return (
            "cos and sin are swapped: x'_2i = x_2i cos - x_2i+1 sin and x'_2i+1 = x_2i sin + "
            "x_2i+1 cos, with cos and sin of t * theta_i"
        )
    for m in (2.0, 0.5, 3.0):  # every angle the same multiple of t * theta_i
        if T > 2 and fits(m * t * theta):
            return (
                f"your angles are {m:g} times t * theta_i (every pair, every row): the row at "
                f"position t must turn each pair once, by t * theta_i; check the positions, the "
                f"frequencies and a rotation applied twice (the same output either way)"
            )
    if T > 2 and fits(t * angle[1:2]):  # each pair turns by its own fixed step
        mine = ", ".join(f"{v:.3g}" for v in angle[1, :4].tolist())
        want = ", ".join(f"{v:.3g}" for v in theta[:4].tolist())
        return (
            f"your pairs turn by {mine}, ... per row instead of theta_i = base^(-2i/D) = "
            f"{want}, ...: check the frequencies (the exponent -2i/D and the base) and that row "
            f"t turns by t * theta_i"
        )
    return None
