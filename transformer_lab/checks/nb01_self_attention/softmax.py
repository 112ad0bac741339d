"""Check for notebook 1, exercise 1: a numerically stable softmax.

softmax(x, dim=-1) -> tensor of x's shape and dtype; an all -inf slice gives zeros

About 300 lines, kept whole: the check and its evidence (a factor on the scores, overflow on large
scores, the wrong slices) are one concept, the course's first exercise.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab import attention as _ref
from transformer_lab.checks.engine.core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.messages import signature_hint
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_softmax"]

ATOL, RTOL = 1e-5, 1e-4


def softmax_forbidden() -> list[Forbidden]:
    return [
        Forbidden("transformer_lab's reference softmax", function=_ref.softmax),
        Forbidden(
            "PyTorch's built-in softmax (torch.softmax, F.softmax, Tensor.softmax, nn.Softmax)",
            codes={F.softmax.__code__, F.log_softmax.__code__, nn.Softmax.forward.__code__},
            builtin_names=("softmax", "_softmax", "log_softmax", "_log_softmax", "special_softmax"),
        ),
    ]


def _cases(hidden: bool) -> list[Case]:
    g = generator(9101 if hidden else 101)

    def r(*shape: int, scale: float = 1.0) -> Tensor:
        return torch.randn(*shape, generator=g) * scale

    rows_apart = torch.stack([r(5), r(5) - 3000.0])  # one max per row matters
    with_inf = r(3, 5)
    with_inf[0, 1] = with_inf[2, 0] = with_inf[2, 4] = float("-inf")  # masked scores
    empty_row = r(3, 5)
    empty_row[1] = float("-inf")  # a query that may attend to nothing
    cases = [
        Case("a vector, default dim", (r(5),), {}),
        Case("rows of a matrix", (r(4, 6),), {"dim": -1}),
        Case("square matrix", (r(5, 5),), {"dim": -1}),
        Case("3-D input, dim=1", (r(2, 5, 3),), {"dim": 1}),
        Case("columns, dim=0", (r(6, 4),), {"dim": 0}),
        Case("large scores (about +-3000)", (r(3, 5, scale=1000.0),), {"dim": -1}),
        Case("rows on very different scales", (rows_apart,), {"dim": -1}),
        Case("-inf entries (masked scores)", (with_inf,), {"dim": -1}),
        Case("float64 input", (r(3, 4).double(),), {"dim": -1}),
        Case("an all -inf row (nothing to attend to)", (empty_row,), {"dim": -1}),
        Case("a matrix, default dim", (r(3, 4),), {}),  # the default must be the last dim
    ]
    if hidden:
        all_inf_col = r(4, 3)
        all_inf_col[:, 2] = float("-inf")
        cases += [
            Case("4-D scores (B, H, T, S)", (r(2, 3, 4, 5),), {"dim": -1}),
            Case("negative dim=-2", (r(3, 4, 5),), {"dim": -2}),
            Case("large negative scores (about -1000)", (r(2, 6) - 1000.0,), {"dim": -1}),
            Case("a single element", (r(1),), {"dim": 0}),
            Case("large scores along dim=0", (r(7, 3, scale=500.0),), {"dim": 0}),
            Case("an all -inf column, dim=0", (all_inf_col,), {"dim": 0}),
        ]
    for case in cases:
        x = case.args[0]
        dim = case.kwargs.get("dim", -1)
        case.describe = describe_args(x=x, dim=dim)
        case.data.update(x=x, dim=dim, expected=_ref.softmax(x, dim=dim))
        case.data["sums_to_one"] = dim
        case.data["variations"] = [("dim", {"dim": -1 if dim % x.dim() != x.dim() - 1 else 0})]
    return cases


def _mistakes(x: Tensor, dim: int, default: bool = False) -> list[Mistake]:
    ndim, d = x.dim(), dim % max(x.dim(), 1)
    safe_max = lambda t: torch.where(torch.isfinite(t), t, torch.zeros_like(t))  # noqa: E731
    m = safe_max(x.amax(dim, keepdim=True))
    e = torch.exp(x - m)
    out = []
    for other in range(ndim):
        if other == d:
            continue
        if default:
            msg = (
                f"called without `dim`, your softmax normalises dimension {other}: the default "
                f"must be dim=-1 (the last dimension), as in `def softmax(x, dim=-1)`"
            )
        elif other == ndim - 1:
            msg = (
                f"your softmax ignores the `dim` argument and always normalises the last "
                f"dimension; the slices along dim={dim} must sum to 1 (use `dim` in max, exp-sum "
                f"and keepdim)"
            )
        else:
            msg = (
                f"softmax taken over dimension {other} instead of dim={dim}: the slices along "
                f"`dim` must sum to 1"
            )
        out.append(Mistake(msg, lambda o=other: torch.softmax(x, dim=o)))
    out += [
        Mistake(
            "overflow: exp() of large scores is inf, and inf/inf is NaN. Subtract the maximum "
            "along `dim` first (x - x.amax(dim, keepdim=True)); it cancels in the ratio",
            lambda: torch.exp(x) / torch.exp(x).sum(dim=dim, keepdim=True),
        ),
        Mistake(
            "you subtract the maximum of the whole tensor; subtract the maximum of each slice "
            "along `dim` (x.amax(dim, keepdim=True)), otherwise slices far below the global "
            "maximum underflow to 0/0",
            lambda: torch.exp(x - x.max()) / torch.exp(x - x.max()).sum(dim=dim, keepdim=True),
        ),
        Mistake(
            "the sum is taken without keepdim=True, so it broadcasts along the wrong dimension; "
            "use .sum(dim=dim, keepdim=True)",
            lambda: e / e.sum(dim=dim),
        ),
        Mistake(
            "your output is the log-softmax (x - max - log(sum exp)); the softmax is "
            "exp(x - max) / sum(exp(x - max))",
            lambda: x - m - torch.log(e.sum(dim=dim, keepdim=True)),
        ),
        Mistake(
            "you divide by the maximum of exp(...) along `dim`; divide by their sum, so each "
            "slice sums to 1",
            lambda: e / e.amax(dim=dim, keepdim=True),
        ),
        Mistake(
            "you divide by the sum of the raw inputs x; divide by the sum of the exponentials "
            "you computed, e.sum(dim=dim, keepdim=True), so each slice sums to 1",
            lambda: e / x.sum(dim=dim, keepdim=True),
        ),
        Mistake(
            "the sum is over the whole tensor; sum along `dim` only (keepdim=True), so every "
            "slice sums to 1",
            lambda: e / e.sum(),
        ),
        Mistake(
            "the sign inside exp() is flipped: it is exp(x - max), not exp(max - x)",
            lambda: torch.exp(m - x) / torch.exp(m - x).sum(dim=dim, keepdim=True),
        ),
    ]
    for other in range(ndim):  # the maximum of the wrong slices (it no longer cancels)
        if other != d:
            out.append(
                Mistake(
                    f"you subtract the maximum along dimension {other}, not along `dim`={dim}: "
                    f"use x.amax(dim=dim, keepdim=True), the maximum of the slices you normalise",
                    lambda o=other: _shifted_by(x, safe_max(x.amax(o, keepdim=True)), dim),
                )
            )
    return out


def _shifted_by(x: Tensor, m: Tensor, dim: int) -> Tensor:
    e = torch.exp(x - m)
    return e / e.sum(dim=dim, keepdim=True)


def _slice_evidence(out: Tensor, x: Tensor, expected: Tensor, dim: int) -> str | None:
    """Name two classes from the output alone: each slice is the reference times its own
    factor (numerator and denominator normalised differently), or a softmax of x scaled by a
    factor instead of shifted (log(out) is linear in x with a slope other than 1)."""
    a, e, xd = out.double(), expected.double(), x.double()
    if not torch.isfinite(a).all():
        return None
    d = dim % x.dim()
    for other in range(x.dim()):  # normalised along another dimension, or over everything
        if other != d and torch.allclose(a.sum(other), torch.ones(()).double(), atol=1e-4):
            return (
                f"your slices along dimension {other} sum to 1, not those along `dim`={dim}: "
                f"normalise along `dim` (the sum over exp(...) with dim=dim, keepdim=True)"
            )
    if abs(a.sum().item() - 1) < 1e-4 and x.shape[d] < x.numel():
        return (
            "your whole output sums to 1: the sum is over the whole tensor; sum along `dim` "
            "only (keepdim=True), so every slice sums to 1"
        )
    ok = (e > 1e-12) & torch.isfinite(xd) & torch.isfinite(a)
    if not ok.any() or not (a[~ok] == 0).all() or (a[ok] <= 0).any():
        return None
    ratio = torch.where(ok, a / torch.where(ok, e, torch.ones_like(e)), torch.nan)
    lo = ratio.nan_to_num(float("inf")).amin(dim, keepdim=True)
    hi = ratio.nan_to_num(float("-inf")).amax(dim, keepdim=True)
    flat = (hi - lo).abs() <= 1e-4 * hi.abs().clamp(min=1e-12)
    if bool(flat.all()) and not torch.allclose(hi, torch.ones_like(hi), atol=1e-4):
        sums = a.sum(dim)
        return (
            f"each slice along `dim` is the right softmax times its own factor (your slices sum "
            f"to between {sums.min().item():.3g} and {sums.max().item():.3g}): the numerator "
            f"and the denominator must use the same exp(x - max): divide exp(x - m) by its own "
            f"sum along `dim`"
        )
    # log(out) = slope * x + const per slice?
    la = torch.where(ok, a.log(), torch.zeros_like(a))
    xs = torch.where(ok, xd, torch.zeros_like(xd))
    n = ok.double().sum(dim, keepdim=True)
    if (n < 2).any():
        return None
    mx, ml = xs.sum(dim, keepdim=True) / n, la.sum(dim, keepdim=True) / n
    cx = torch.where(ok, xs - mx, torch.zeros_like(xs))
    cl = torch.where(ok, la - ml, torch.zeros_like(la))
    var = (cx * cx).sum(dim, keepdim=True)
    if (var < 1e-12).any():
        return None
    slope = (cx * cl).sum(dim, keepdim=True) / var
    if not torch.allclose(cl, slope * cx, atol=1e-4, rtol=1e-4) or torch.allclose(
        slope, torch.ones_like(slope), atol=1e-4
    ):
        return None
    return (
        f"your output is the softmax of x multiplied by a factor ({slope.min().item():.3g} to "
        f"{slope.max().item():.3g}), not of x itself: only subtracting the maximum leaves the "
        f"softmax unchanged; dividing or multiplying x changes it"
    )


def _large_score_evidence(out: Tensor, x: Tensor, expected: Tensor, dim: int) -> str | None:
    """Wrong only on the slices holding scores large enough for exp() to overflow (|x| > 80):
    the stabilisation is not the per-slice maximum (another shift, a clamp)."""
    if out.shape != x.shape:
        return None
    a, e = out.double(), expected.double()
    bad = ~((a - e).abs() <= ATOL + RTOL * e.abs())  # NaN counts as bad
    if not bad.any():
        return None
    finite_x = torch.where(torch.isfinite(x), x.abs(), torch.zeros_like(x)).double()
    large = (finite_x.amax(dim, keepdim=True) > 80).expand_as(a)
    if (bad & ~large).any():
        return None
    state = "NaN or inf" if not torch.isfinite(a[bad]).all() else "wrong values"
    return (
        f"right on ordinary scores, but {state} on the slices with scores above 80, where exp() "
        f"overflows: shift each slice by its maximum, x - x.amax(dim, keepdim=True) (it cancels "
        f"exactly); another shift or a clamp of the scores changes the result or still overflows"
    )


def _error_hint(exc: BaseException, case: Case) -> str:
    text = str(exc)
    if "must match the size" in text or "broadcast" in text:
        return "the reductions need keepdim=True so they broadcast back over `dim`"
    return signature_hint(exc, "softmax(x, dim=-1)")


def check_softmax(softmax, hidden: bool = False) -> None:
    """Check ``softmax(x, dim=-1)`` against the package's stable softmax.

    Covers the default dim, other dims, large and very negative inputs (stability), -inf
    entries, an all -inf slice (zeros, as the text asks) and float64.
    """
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    run = Runner(
        "check_softmax", softmax, softmax_forbidden(), hidden, _error_hint, reference=_ref.softmax
    )
    for case in _cases(hidden):
        x, dim, expected = case.data["x"], case.data["dim"], case.data["expected"]

        def shape_hint(got: tuple, x=x, dim=dim) -> str | None:
            reduced = tuple(s for i, s in enumerate(x.shape) if i != dim % x.dim())
            if got == reduced:
                return (
                    "that is the shape of a sum over `dim`; return exp(...) divided by the sum, "
                    "same shape as x"
                )
            return None

        out = run.expect_tensor(
            run.call(case), case, x.shape, x.dtype, shape_hint=shape_hint, expected=expected
        )
        if run.close(out, expected, ATOL, RTOL):
            continue
        empty = (x == float("-inf")).all(dim=dim, keepdim=True).expand_as(x)
        if empty.any() and run.close(out[~empty], expected[~empty], ATOL, RTOL):
            state = "NaN" if torch.isnan(out[empty]).any() else "non-zero"
            run.fail(
                f"right, except on the slice that is entirely -inf (a query with nothing to "
                f"attend to), where yours is {state}: it must give zeros, as the text asks. Its "
                f"maximum is -inf and -inf - (-inf) is NaN: shift such slices by 0 "
                f"(torch.where(torch.isfinite(m), m, 0)) and avoid dividing 0 by 0",
                case,
            )
        mistakes = _mistakes(x, dim, default="dim" not in case.kwargs and x.dim() > 1)
        known = run.diagnose(out, mistakes, ATOL, RTOL, expected=expected)
        if known is not None:
            run.fail(known, case)
        found = _large_score_evidence(out.detach(), x, expected, dim)
        if found is not None:
            run.fail(found, case)
        if out.shape == x.shape and x.numel() > 1:
            try:
                found = _slice_evidence(out.detach(), x, expected, dim)
            except Exception:  # evidence that cannot be computed on this input is no evidence
                found = None
        if found is not None:
            run.fail(found, case)
        run.explain(out, expected, case, (), ATOL, RTOL)
    run.passed()


register(
    Exercise(
        "softmax",
        "01_self_attention",
        "softmax(x, dim=-1) -> x's shape",
        cells=(Cell("softmax_tests", "softmax", 2),),
        check=check_softmax,
        reference=_ref.softmax,
    )
)
