"""Check for notebook 3, exercise 4: rotary position embedding (RoPE).

apply_rope(x, base=10000.0) -> x's shape and dtype (..., T, D): the pair (2i, 2i+1) of the
    row at position t rotated by t theta_i, theta_i = base^(-2i/D); ValueError naming D if odd

The mistakes it names are computed in rope_mistakes.py; the evidence it reads from a wrong output
when none matches (channels out of order, the angles of each pair) is in rope_evidence.py.
"""

from __future__ import annotations

import re

import torch
from torch import Tensor

from transformer_lab import positional as _ref
from transformer_lab.checks.engine.core import Case, Runner, describe_args, generator
from transformer_lab.checks.engine.diagnose import DEFAULT
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint
from transformer_lab.checks.nb03_positional_encodings.rope_evidence import (
    _channel_order_evidence,
    _rotation_evidence,
)
from transformer_lab.checks.nb03_positional_encodings.rope_mistakes import _rope_mistakes
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_apply_rope"]


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
    specs = [(*spec, torch.float32) for spec in specs]
    specs += [(3, None, 5, 8, 10000.0, torch.float32), (None, None, 7, 6, 10000.0, torch.float32)]
    specs += [(2, 2, 6, 8, 10000.0, torch.float64)]  # x's dtype is kept (no float32 cast)
    for B, H, T, D, base, dtype in specs:
        shape = tuple(n for n in (B, H, T, D) if n is not None)
        x = torch.randn(*shape, generator=g).to(dtype)
        want = reference(x, base)  # computed before the student's code runs
        name = ", ".join(f"{k}={v}" for k, v in zip("BHTD", (B, H, T, D)) if v is not None)
        name += ", float64" if dtype == torch.float64 else ""
        case = Case(f"{name}, base={base}", (x,), {"base": base}, describe_args(x=x, base=base))
        axes = ("batch element", "head", "position", "channel")[-x.dim() :]
        case.data.update(expected=want, axes=axes)
        if base != 10000.0:
            case.data["variations"] = [("base", {"base": DEFAULT})]
        out = run.call(case)
        if TRUSTED.is_tensor(out) and out.shape == x.shape and out.dtype != x.dtype:
            run.fail(
                f"x is {x.dtype} but your output is {out.dtype}: RoPE keeps x's dtype; compute "
                f"in it (no .float() cast of x, no torch.empty/zeros(shape) without "
                f"dtype=x.dtype; build the angles and cast cos/sin .to(x.dtype))",
                case,
            )
        got = run.expect_tensor(out, case, x.shape, x.dtype, expected=want)
        if run.close(got, want, atol=1e-5, rtol=1e-5):
            continue
        known = run.diagnose(got, _rope_mistakes(x, base), 1e-5, 1e-5, expected=want)
        if known is not None:
            run.fail(known, case)
        order = _channel_order_evidence(got, want)
        if order is not None:
            run.fail(order, case)
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
