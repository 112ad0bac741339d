"""Check for notebook 3, exercise 4: rotary position embedding (RoPE).

apply_rope(x, base=10000.0) -> x's shape and dtype (..., T, D): the pair (2i, 2i+1) of the
    row at position t rotated by t theta_i, theta_i = base^(-2i/D); ValueError naming D if odd
"""

from __future__ import annotations

import re

import torch
from torch import Tensor

from transformer_lab import positional as _ref
from transformer_lab.checks.engine.core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks.engine.diagnose import DEFAULT
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint
from transformer_lab.checks.registry import Cell, Exercise, register

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


def _error_hint(exc: BaseException, case: Case) -> str:
    text = str(exc)
    if "values to unpack" in text or "not enough values" in text:
        return (
            "x may have any number of leading dimensions, (..., T, D): read T and D with "
            "x.shape[-2] and x.shape[-1]"
        )
    sizes = re.search(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)", text)
    x = case.args[0] if case.args else None
    if sizes and isinstance(x, Tensor) and x.dim() >= 2:
        T, half = x.shape[-2], x.shape[-1] // 2
        if {int(sizes.group(1)), int(sizes.group(2))} == {T, half} and T != half:
            return (
                f"a (T, D/2) = ({T}, {half}) table meets one laid out ({half}, {T}): build the "
                f"angles as (T, D/2), positions down the rows and pairs across, "
                f"t[:, None] * theta[None, :], so they broadcast with x[..., 0::2]"
            )
    return _signature_hint(exc, "apply_rope(x, base=10000.0)")


def _leading_dims_hint(run: Runner, exc: BaseException, case: Case) -> str:
    """Evidence that the crash comes from the leading dims: the same rows as one (T, D) runs."""
    x = case.args[0] if case.args else None
    if not isinstance(x, Tensor) or x.dim() < 3 or not isinstance(exc, (RuntimeError, IndexError)):
        return ""
    flat = x.reshape(-1, *x.shape[-2:])[0].clone()  # (T, D): the first sequence alone
    _, error, calls = run.attempt((flat, *case.args[1:]), dict(case.kwargs))
    if error is not None or calls:
        return ""
    return (
        f"your function runs on one (T, D) sequence but fails on x of shape {tuple(x.shape)}: "
        f"read T and D from the last two axes, x.shape[-2] and x.shape[-1] (x.shape[0] is a "
        f"batch axis here), so the (T, D/2) angles broadcast over the leading dims"
    )


def check_apply_rope(apply_rope, hidden: bool = False) -> None:
    """Check ``apply_rope(x, base=10000.0)`` on (B, H, T, D) inputs against the package's
    RotaryEmbedding (x's dtype kept), and the ValueError for an odd D."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    forbidden = [
        Forbidden("transformer_lab's RotaryEmbedding", function=_ref.RotaryEmbedding.forward),
        Forbidden("transformer_lab's apply_rotary", function=_ref.apply_rotary),
    ]

    def reference(x: Tensor, base: float = 10000.0) -> Tensor:
        with torch.no_grad():
            return _ref.RotaryEmbedding(x.shape[-1], base)(x)

    run = Runner(
        "check_apply_rope",
        apply_rope,
        forbidden,
        hidden,
        lambda e, c: (
            _error_hint(e, c)
            if "unpack" in str(e)
            else (_leading_dims_hint(run, e, c) or _error_hint(e, c))
        ),
        reference=reference,
    )
    g = generator(11 if hidden else 0)
    specs = [(2, 3, 9, 8, 10000.0), (1, 1, 6, 4, 10000.0), (1, 2, 12, 16, 100.0)]
    if hidden:
        specs = [(3, 2, 7, 32, 10000.0), (1, 1, 20, 2, 10000.0), (2, 4, 5, 12, 1000.0)]
    specs += [(3, None, 5, 8, 10000.0), (None, None, 7, 6, 10000.0)]  # (B, T, D) and (T, D)
    for B, H, T, D, base in specs:
        shape = tuple(n for n in (B, H, T, D) if n is not None)
        x = torch.randn(*shape, generator=g)
        want = reference(x, base)  # computed before the student's code runs
        name = ", ".join(f"{k}={v}" for k, v in zip("BHTD", (B, H, T, D)) if v is not None)
        case = Case(f"{name}, base={base}", (x,), {"base": base}, describe_args(x=x, base=base))
        axes = ("batch element", "head", "position", "channel")[-x.dim() :]
        case.data.update(expected=want, axes=axes)
        if base != 10000.0:
            case.data["variations"] = [("base", {"base": DEFAULT})]
        got = run.expect_tensor(run.call(case), case, x.shape, x.dtype, expected=want)
        if run.close(got, want, atol=1e-5, rtol=1e-5):
            continue
        known = run.diagnose(got, _rope_mistakes(x, base), 1e-5, 1e-5, expected=want)
        if known is not None:
            run.fail(known, case)
        if not run.close(got, reference(x), atol=1e-5, rtol=1e-5):  # base: the generic reruns
            try:
                found = _rotation_evidence(x, got, base)
            except Exception:  # evidence that cannot be computed here is no evidence
                found = None
            if found is not None:
                run.fail(found, case)
        run.explain(got, want, case, (), 1e-5, 1e-5)
    for shape in [(1, 1, 3, 5)] + ([(2, 4, 7)] if hidden else []):
        x = torch.randn(*shape, generator=g)
        case = Case(f"odd D={shape[-1]}", (x,), {}, describe_args(x=x))
        run.expect_raises(case, ValueError, f"an odd D={shape[-1]}", (str(shape[-1]),))
    run.passed()


def _rope_reference(x, base=10000.0):
    """The answer with the student's signature (for ``checks.diagnose``)."""
    return _ref.RotaryEmbedding(x.shape[-1], base)(x)


register(
    Exercise(
        "apply_rope",
        "03_positional_encodings",
        "apply_rope(x, base=10000.0) -> (..., T, D) rotated pairs (2i, 2i+1)",
        cells=(Cell("rope_tests", "apply_rope", 3),),
        check=check_apply_rope,
        reference=_rope_reference,
        against="transformer_lab.positional.RotaryEmbedding",
    )
)
