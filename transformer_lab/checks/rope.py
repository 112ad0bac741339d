"""Check for notebook 3, exercise 4: rotary position embedding (RoPE).

apply_rope(x, base=10000.0) -> x's shape and dtype (..., T, D): the pair (2i, 2i+1) of the
    row at position t rotated by t theta_i, theta_i = base^(-2i/D); ValueError naming D if odd
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_lab import positional as _ref
from transformer_lab.checks._core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks._integrity import Forbidden
from transformer_lab.checks.softmax import signature_hint as _signature_hint

__all__ = ["check_apply_rope"]


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


def check_apply_rope(apply_rope, hidden: bool = False) -> None:
    """Check ``apply_rope(x, base=10000.0)`` on (B, H, T, D) inputs against the package's
    RotaryEmbedding (x's dtype kept), and the ValueError for an odd D."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    forbidden = [
        Forbidden("transformer_lab's RotaryEmbedding", function=_ref.RotaryEmbedding.forward),
        Forbidden("transformer_lab's apply_rotary", function=_ref.apply_rotary),
    ]
    run = Runner(
        "check_apply_rope",
        apply_rope,
        forbidden,
        hidden,
        lambda e, c: _signature_hint(e, "apply_rope(x, base=10000.0)"),
    )
    g = generator(11 if hidden else 0)
    specs = [(2, 3, 9, 8, 10000.0), (1, 1, 6, 4, 10000.0), (1, 2, 12, 16, 100.0)]
    if hidden:
        specs = [(3, 2, 7, 32, 10000.0), (1, 1, 20, 2, 10000.0), (2, 4, 5, 12, 1000.0)]
    for B, H, T, D, base in specs:
        x = torch.randn(B, H, T, D, generator=g)
        with torch.no_grad():
            want = _ref.RotaryEmbedding(D, base)(x)  # computed before the student's code runs
        case = Case(
            f"B={B}, H={H}, T={T}, D={D}, base={base}", (x, base), {}, describe_args(x=x, base=base)
        )
        case.data.update(expected=want, axes=("batch element", "head", "position", "channel"))
        got = run.expect_tensor(run.call(case), case, x.shape, x.dtype, expected=want)
        if run.close(got, want, atol=1e-5, rtol=1e-5):
            continue
        run.explain(got, want, case, _rope_mistakes(x, base), 1e-5, 1e-5)
    for shape in [(1, 1, 3, 5)] + ([(2, 4, 7)] if hidden else []):
        x = torch.randn(*shape, generator=g)
        case = Case(f"odd D={shape[-1]}", (x,), {}, describe_args(x=x))
        run.expect_raises(case, ValueError, f"an odd D={shape[-1]}", (str(shape[-1]),))
    run.passed()
