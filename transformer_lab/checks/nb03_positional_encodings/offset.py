"""Check for notebook 03, exercise 3: the dot product of two positions depends on their offset only.

offset_dot_product(k, d_model, base=10000.0) -> float32 of k's shape, p_t . p_(t+k)
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from transformer_lab import positional as _ref
from transformer_lab.checks.engine.core import Case, Mistake, Runner, describe_args
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint
from transformer_lab.checks.nb03_positional_encodings.shift import _theta
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_offset_dot_product"]


# ---------------------------------------------------------------------------------------------
# p_t . p_(t+k) depends on the offset k only
def _offset(k, C, base, *, expo=2.0, reduce="sum", terms="cos", freq=True, factor=1.0):
    theta = base ** (-expo * torch.arange(C // 2, dtype=torch.float64) / C)  # (C/2,)
    angle = k.double()[..., None] * (theta if freq else torch.ones_like(theta))  # (..., C/2)
    val = {
        "cos": lambda: torch.cos(angle),
        "cos+sin": lambda: torch.cos(angle) + torch.sin(angle),
        "sin": lambda: torch.sin(angle),
        "cos^2": lambda: torch.cos(angle) ** 2,
    }[terms]()
    return (factor * (val.mean(-1) if reduce == "mean" else val.sum(-1))).float()


def _offset_mistakes(k, C, base) -> list[Mistake]:
    return [
        Mistake(
            "your value is twice the dot product: there are C/2 frequencies (one per pair), "
            "not C; sum cos(k theta_i) over i = 0 .. C/2 - 1",
            lambda: _offset(k, C, base, factor=2.0),
        ),
        Mistake(
            "you added sin terms: sin(t a) sin(s a) + cos(t a) cos(s a) = cos((t - s) a), so "
            "p_t . p_(t+k) = sum_i cos(k theta_i) has no sin",
            lambda: _offset(k, C, base, terms="cos+sin"),
        ),
        Mistake(
            "a mean where a sum belongs: the dot product sums cos(k theta_i) over the C/2 pairs",
            lambda: _offset(k, C, base, reduce="mean"),
        ),
        Mistake(
            "the exponent of theta_i = base^(-2i/C) uses i/C (i the pair index) instead of 2i/C",
            lambda: _offset(k, C, base, expo=1.0),
        ),
        Mistake(
            "the `base` argument is ignored (you always use 10000)", lambda: _offset(k, C, 1e4)
        ),
        Mistake(
            "the frequencies are missing: pair i turns at theta_i = base^(-2i/C), so the terms "
            "are cos(k theta_i), not cos(k)",
            lambda: _offset(k, C, base, freq=False),
        ),
        Mistake(
            "the terms are sin(k theta_i); the dot product of two pairs is sin sin + cos cos = "
            "cos(k theta_i), so sum cos(k theta_i)",
            lambda: _offset(k, C, base, terms="sin"),
        ),
        Mistake(
            "the angle is k * theta_i (theta_i = base^(-2i/C), a negative exponent); you divide "
            "k by theta_i (a positive exponent)",
            lambda: _offset(k, C, base, expo=-2.0),
        ),
        Mistake(
            "you squared the cosines: the dot product of two pairs is sin(a) sin(b) + cos(a) "
            "cos(b) = cos(a - b), so each pair adds cos(k theta_i), not cos^2",
            lambda: _offset(k, C, base, terms="cos^2"),
        ),
    ]


def _offset_error_hint(exc: BaseException, case: Case) -> str:
    if "must match the size" in str(exc):
        return "add a trailing dimension to k for the C/2 frequencies: k[..., None] * theta"
    return _signature_hint(exc, "offset_dot_product(k, d_model, base=10000.0)")


def _offset_shape_hint(got, k: Tensor, C: int, base: float) -> str:
    """Name the axis summed from the values: the C/2 frequency terms (last axis) must be
    summed, k's axes kept."""
    tail = "one value per offset, a tensor of the shape of k"
    if not TRUSTED.is_tensor(got) or not torch.isfinite(got).all():
        return f"return {tail}"
    got, half = got.detach().double(), C // 2
    terms = torch.cos(k.double()[..., None] * _theta(C, base).double())  # (*k.shape, C/2)
    same = lambda ref: got.shape == ref.shape and torch.allclose(got, ref, atol=1e-4)  # noqa: E731
    if same(terms.sum(-1).flatten()):
        return f"the values are right but k's shape is lost (flattened): return {tail}"
    if same(terms):
        return (
            f"the last dimension holds the C/2 = {half} terms cos(k theta_i) of each offset: sum "
            f"them over the last dimension (dim=-1) to return {tail}"
        )
    if k.dim() and (same(terms.sum(0)) or same(terms.reshape(-1, half).sum(0))):
        return (
            f"yours keeps the C/2 = {half} frequencies and sums over the offsets, the wrong axis: "
            f"sum over the frequency dimension (dim=-1, after k[..., None] * theta) to return "
            f"{tail}"
        )
    return f"return {tail}"


def check_offset_dot_product(offset_dot_product, hidden: bool = False) -> None:
    """Check ``offset_dot_product(k, d_model, base=10000.0)`` against p_t . p_(t+k) measured on the
    package's encodings (float32, k's shape)."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    forbidden = [
        Forbidden(
            "transformer_lab's sinusoidal_encoding (use the formula, do not build encodings)",
            function=_ref.sinusoidal_encoding,
        )
    ]
    run = Runner(
        "check_offset_dot_product", offset_dot_product, forbidden, hidden, _offset_error_hint
    )
    specs = [
        (torch.arange(-20, 21), 16, 10000.0),
        (torch.arange(-20, 21), 64, 10000.0),
        (torch.arange(-20, 21), 10, 100.0),
        (torch.tensor([[0, 1], [2, 3]]), 8, 10000.0),
    ]
    if hidden:
        specs = [
            (torch.arange(-20, 21), 8, 10000.0),
            (torch.arange(-20, 21), 128, 10000.0),
            (torch.arange(-20, 21), 32, 50.0),
            (torch.tensor([[0, -7], [5, 3]]), 12, 10000.0),
        ]
    n = 60  # positions of the reference encoding
    for k, C, base in specs:
        pe = _ref.sinusoidal_encoding(n, C, base).double()  # (n, C)
        measured = []
        for offset in k.flatten().tolist():
            lo = max(0, -offset)
            measured.append((pe[lo] * pe[lo + offset]).sum())  # p_t . p_(t+k) (the same for all t)
        expected = torch.stack(measured).reshape(k.shape).float()
        case = Case(
            f"C={C}, base={base}, k {tuple(k.shape)}",
            (k, C, base),
            {},
            describe_args(k=k, d_model=C, base=base),
        )
        case.data["expected"] = expected
        out = run.call(case)
        got = run.expect_tensor(
            out,
            case,
            k.shape,
            torch.float32,
            shape_hint=lambda shape: _offset_shape_hint(out, k, C, base),
        )
        if not TRUSTED.allclose(got, expected, atol=1e-4, rtol=1e-5):
            case.data["dims"] = {"C": C}
            known = run.diagnose(got, _offset_mistakes(k, C, base), 1e-4, 1e-5, expected=expected)
            if known is not None:
                run.fail(known, case)
            zero = k == 0
            if zero.any() and torch.isfinite(got[zero]).all():
                at0 = got[zero].double()
                if not torch.allclose(at0, torch.full_like(at0, C / 2), atol=1e-4):
                    run.fail(
                        f"at offset 0 your value is {at0[0].item():.4g}, but p_t . p_t = C/2 = "
                        f"{C // 2}: each pair (sin, cos) has length 1 and adds cos(0) = 1, one "
                        f"term per pair (C/2 of them)",
                        case,
                    )
            flat = got.detach().double().flatten()
            if len(flat) > 1 and torch.isfinite(flat).all() and torch.allclose(flat, flat[:1]):
                run.fail(
                    f"your value is {flat[0].item():.4g} for every offset k, a constant: a pair's "
                    f"sin^2 + cos^2 = 1 is its length; the dot product multiplies position t's "
                    f"pair by position t + k's, giving sum_i cos(k theta_i), which depends on k",
                    case,
                )
            single = _single_cos_evidence(got, k, C)
            if single is not None:
                run.fail(single, case)
            found = _offset_evidence(got, expected, k, C, base)
            if found is not None:
                run.fail(found, case, named=False)
            run.explain(got, expected, case, (), 1e-4, 1e-5)
    run.passed()


def _single_cos_evidence(got: Tensor, k: Tensor, C: int) -> str | None:
    """got = (C/2) cos(k a) for one angle a: one frequency where each pair has its own."""
    g, kk, half = got.double().flatten(), k.double().flatten(), C // 2
    one = (kk == 1).nonzero()
    if len(one) == 0 or not torch.isfinite(g).all() or (g.abs() > half + 1e-4).any():
        return None
    a = math.acos(max(-1.0, min(1.0, float(g[one[0, 0]]) / half)))
    if not torch.allclose(g, half * torch.cos(kk * a), atol=1e-3):
        return None
    return (
        f"your values are (C/2) cos(k a) with a single angle a = {a:.4g} for every pair: each "
        f"pair turns at its own frequency, so add the terms one by one, sum_i cos(k theta_i), "
        f"not one cos of a combined angle"
    )


def _offset_evidence(got: Tensor, expected: Tensor, k: Tensor, C: int, base: float) -> str | None:
    """Observations that point at one cause: right only for k >= 0, or the value of another
    offset (the angles scaled by a factor)."""
    a = got.detach().double()
    if a.shape != expected.shape or not torch.isfinite(a).all():
        return None
    ok = (a - expected.double()).abs() <= 1e-4 + 1e-5 * expected.double().abs()
    neg = k < 0
    if neg.any() and ok[~neg].all() and not ok[neg].all():
        return (
            "right for the offsets k >= 0 but not for the negative ones: p_t . p_(t+k) = "
            "sum_i cos(k theta_i) holds for every k (cos is even); compute it from k with the "
            "formula (a negative index into a table counts from its end)"
        )
    for m in (2.0, 0.5, 4.0):
        if torch.allclose(a, _offset(k * m, C, base).double(), atol=1e-4) and not ok.all():
            return (
                f"your value at offset k is the true value at offset {m:g} k: your angles are "
                f"{m:g} times k theta_i; each term is cos(k theta_i) with theta_i = base^(-2i/C)"
            )
    return None


def offset_dot_product_reference(k, d_model, base=10000.0):
    """sum_i cos(k theta_i), float32 of k's shape."""
    return torch.cos(torch.as_tensor(k).double()[..., None] * _theta(d_model, base)).sum(-1).float()


register(
    Exercise(
        "offset_dot_product",
        "03_positional_encodings",
        "offset_dot_product(k, d_model, base=10000.0) -> p_t . p_(t+k), k's shape",
        cells=(Cell("offset_tests", "offset_dot_product", 2),),
        check=check_offset_dot_product,
        reference=offset_dot_product_reference,
        against="transformer_lab.positional.sinusoidal_encoding",
    )
)
