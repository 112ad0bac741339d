"""Checks for notebook 3, exercises 2 and 3: moving by k positions is a fixed linear map.

shift_matrix(k, d_model, base=10000.0) -> (C, C) float32, p_(t+k) = p_t @ M_k for every t
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
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_shift_matrix", "check_offset_dot_product"]


# ---------------------------------------------------------------------------------------------
# the shift matrix M_k: p_t M_k = p_(t+k), checked on the reference encodings
def _shift(k, C, base, *, expo=2.0, layout="pairs", tr=-1.0, bl=1.0, divide=False):
    """M_k with one deliberate mistake (for diagnosis)."""
    theta = base ** (-expo * torch.arange(C // 2, dtype=torch.float64) / C)  # (C/2,)
    angle = k / theta if divide else k * theta
    c, s = torch.cos(angle), torch.sin(angle)
    top_right, bottom_left = tr * s, bl * s  # row form: [[cos, -sin], [sin, cos]]
    m = torch.zeros(C, C, dtype=torch.float64)
    if layout == "pairs":
        m[0::2, 0::2], m[0::2, 1::2] = torch.diag(c), torch.diag(top_right)
        m[1::2, 0::2], m[1::2, 1::2] = torch.diag(bottom_left), torch.diag(c)
    else:
        h = C // 2
        m[:h, :h], m[:h, h:], m[h:, :h], m[h:, h:] = (
            torch.diag(c),
            torch.diag(top_right),
            torch.diag(bottom_left),
            torch.diag(c),
        )
    return m.float()


def _shift_mistakes(k, C, base) -> list[Mistake]:
    return [
        Mistake(
            "your matrix is the transpose of M_k (it shifts by -k): with row vectors p_t M_k, "
            "the -sin goes top-right in each 2x2 block, [[cos, -sin], [sin, cos]]",
            lambda: _shift(k, C, base, tr=1.0, bl=-1.0),
        ),
        Mistake(
            "the exponent of theta_i = base^(-2i/C) uses i/C (i the pair index) instead of 2i/C",
            lambda: _shift(k, C, base, expo=1.0),
        ),
        Mistake(
            "the 2x2 blocks must act on the pairs (2i, 2i+1), the channels the encoding "
            "interleaves, not on channels (i, i + C/2)",
            lambda: _shift(k, C, base, layout="halves"),
        ),
        Mistake("the `base` argument is ignored (you always use 10000)", lambda: _shift(k, C, 1e4)),
        Mistake(
            "the angle is k * theta_i (theta_i = base^(-2i/C)); you divide k by theta_i",
            lambda: _shift(k, C, base, divide=True),
        ),
        Mistake(
            "the block is not a rotation: one sin needs a minus sign, [[cos, -sin], [sin, cos]]",
            lambda: _shift(k, C, base, tr=1.0, bl=1.0),
        ),
        Mistake(
            "you raised M_1 to the power k element by element (m ** k): the shift by k is the "
            "matrix power M_1 @ ... @ M_1 (torch.linalg.matrix_power), i.e. the rotation by "
            "the angles k * theta_i",
            lambda: _shift(1, C, base).double().pow(k).float(),
        ),
        Mistake(
            "your matrix is M_1 whatever `k` is: the function ignores `k` (the angles are "
            "k * theta_i)",
            lambda: _shift(1, C, base),
        ),
    ]


def _block_evidence(m, expected) -> str | None:
    """Name what is wrong with the 2x2 blocks of M_k from the matrix alone."""
    a, e = m.detach().double(), expected.double()
    C = a.shape[-1]
    pair = torch.arange(C) // 2
    inside = pair[:, None] == pair[None, :]  # the 2x2 blocks on the diagonal
    if (a[~inside].abs() > 1e-5).any():
        r, c = (a.abs() * ~inside).flatten().argmax().item() // C, None
        c = (a.abs() * ~inside)[r].argmax().item()
        return (
            f"M_k is block diagonal: one 2x2 block per pair (2i, 2i+1), zeros elsewhere; your "
            f"entry ({r}, {c}) links two different pairs"
        )
    tl, tr, bl, br = (
        a[0::2, 0::2].diag(),
        a[0::2, 1::2].diag(),
        a[1::2, 0::2].diag(),
        a[1::2, 1::2].diag(),
    )
    cos, sin = e[0::2, 0::2].diag(), e[1::2, 0::2].diag()
    close = lambda u, v: torch.allclose(u, v, atol=1e-5)  # noqa: E731
    if (
        close(tl, cos)
        and close(br, cos)
        and close(tr, 0 * cos)
        and close(bl, 0 * cos)
        and not close(sin, 0 * sin)
    ):
        return "the sin entries are missing: each 2x2 block is [[cos, -sin], [sin, cos]], not diag(cos)"
    if close(tl, sin) and close(br, sin) and not close(sin, cos):
        return "sin and cos are swapped: the diagonal of each block holds cos(k theta_i), the off-diagonal -sin and sin"
    if close(tl, cos) and close(br, cos) and close(tr, bl) and not close(sin, 0 * sin):
        return (
            "the two sin entries of each block have the same sign: the block is a rotation, "
            "[[cos, -sin], [sin, cos]] (one sign minus, one plus)"
        )
    return _angle_evidence(tl, tr, bl, br, cos, sin)  # fmt: skip


def _angle_evidence(tl, tr, bl, br, cos, sin) -> str | None:
    """Blocks that are rotations by the wrong angles: pairs left unrotated, or other angles."""
    close = lambda u, v: torch.allclose(u, v, atol=1e-5)  # noqa: E731
    if not (close(tl, br) and close(tr, -bl) and close(tl**2 + bl**2, torch.ones_like(tl))):
        return None  # not every block is a rotation: no angle to read
    right = ((tl - cos).abs() < 1e-5) & ((bl - sin).abs() < 1e-5)
    if right.all():
        return None
    identity = ((tl - 1).abs() < 1e-5) & (bl.abs() < 1e-5)
    wrong = (~right).nonzero().flatten().tolist()
    shown = ", ".join(str(i) for i in wrong[:6]) + (", ..." if len(wrong) > 6 else "")
    if right.any() and identity[~right].all():
        return (
            f"the pairs {shown} are not rotated (identity blocks) while the others are right: "
            f"every one of the C/2 pairs gets its own rotation by k theta_i (loop over all pairs)"
        )
    mine = torch.atan2(bl, tl)
    want = torch.atan2(sin, cos)
    return (
        f"each block is a rotation, but pairs {shown} turn by the wrong angle (pair {wrong[0]}: "
        f"{mine[wrong[0]].item():.4g} rad instead of k theta_{wrong[0]} = "
        f"{want[wrong[0]].item():.4g}, modulo 2 pi): check the frequencies theta_i = "
        f"base^(-2i/C), with i the pair index counted from 0"
    )


def check_shift_matrix(shift_matrix, hidden: bool = False) -> None:
    """Check ``shift_matrix(k, d_model, base=10000.0)``: a float32 (C, C) matrix with
    p_t @ M_k = p_(t+k) for every t."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    forbidden = [
        Forbidden(
            "transformer_lab's sinusoidal_shift_matrix", function=_ref.sinusoidal_shift_matrix
        )
    ]
    run = Runner(
        "check_shift_matrix",
        shift_matrix,
        forbidden,
        hidden,
        lambda e, c: _signature_hint(e, "shift_matrix(k, d_model, base=10000.0)"),
        reference=_ref.sinusoidal_shift_matrix,
    )
    specs = [(3, 16, 10000.0), (1, 8, 10000.0), (-2, 6, 100.0), (7, 32, 10000.0)]
    if hidden:
        specs = [(11, 12, 10000.0), (-5, 64, 10000.0), (2, 10, 500.0)]
    n = 40  # positions of the reference encoding
    for k, C, base in specs:
        pe = _ref.sinusoidal_encoding(n, C, base)  # (n, C), computed before the student's code runs
        expected = _ref.sinusoidal_shift_matrix(k, C, base).float()
        case = Case(
            f"k={k}, C={C}, base={base}", (k, C, base), {}, f"k={k}, d_model={C}, base={base}"
        )
        case.data["expected"] = expected
        m = run.expect_tensor(run.call(case), case, (C, C), torch.float32, expected=expected)
        lo, hi = max(0, -k), n - max(0, k)  # the t with both t and t + k inside the table
        if TRUSTED.allclose(pe[lo:hi] @ m, pe[lo + k : hi + k], atol=1e-4):
            continue
        mistakes = _shift_mistakes(k, C, base)
        known = run.diagnose(m, mistakes, 1e-5, 1e-4, expected=expected)
        if known is not None:
            run.fail(known, case)
        try:
            found = _block_evidence(m, expected)
        except Exception:  # evidence that cannot be computed here is no evidence
            found = None
        if found is not None:
            run.fail(found, case)
        run.explain(m, expected, case, (), 1e-5, 1e-4)
    run.passed()


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
        got = run.expect_tensor(
            run.call(case),
            case,
            k.shape,
            torch.float32,
            shape_hint=lambda shape: "return one value per offset, a tensor of the shape of k",
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


def _theta(d: int, base: float) -> torch.Tensor:
    return base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)


def offset_dot_product_reference(k, d_model, base=10000.0):
    """sum_i cos(k theta_i), float32 of k's shape."""
    return torch.cos(torch.as_tensor(k).double()[..., None] * _theta(d_model, base)).sum(-1).float()


register(
    Exercise(
        "shift_matrix",
        "03_positional_encodings",
        "shift_matrix(k, d_model, base=10000.0) -> (C, C), p_t M_k = p_(t+k)",
        cells=(Cell("shift_matrix_tests", "shift_matrix", 2),),
        check=check_shift_matrix,
        reference=_ref.sinusoidal_shift_matrix,
    )
)


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
