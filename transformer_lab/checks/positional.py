"""Checks for notebook 3: sinusoidal positional encodings, the shift matrix, the offset dot product.

Student-facing signature:

    sinusoidal_encoding(n_positions, d_model, base=10000.0) -> (n_positions, d_model) float32
        PE[t, 2i] = sin(t / base^(2i / C)),  PE[t, 2i + 1] = cos(t / base^(2i / C))
    shift_matrix(k, d_model, base=10000.0) -> (C, C), with p_(t+k) = p_t @ M_k for every t
    offset_dot_product(k, d_model, base=10000.0) -> k's shape, p_t . p_(t+k)
    sinusoidal_encoding raises ValueError naming d_model when it is odd; all results are float32
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_lab import positional as _ref
from transformer_lab.checks._core import Case, Mistake, Runner, describe_args
from transformer_lab.checks._diagnose import DEFAULT
from transformer_lab.checks._integrity import TRUSTED, Forbidden
from transformer_lab.checks.softmax import signature_hint as _signature_hint

__all__ = [
    "check_sinusoidal_encoding",
    "check_shift_matrix",
    "check_offset_dot_product",
]

ATOL, RTOL = 1e-4, 1e-4


def _pe(
    n: int,
    d: int,
    base: float,
    *,
    swap=False,
    layout="interleave",
    exponent=lambda j, d: 2 * (j // 2) / d,
    start=0,
    multiply=False,
) -> Tensor:
    """Sinusoidal encodings with one deliberate mistake; ``exponent(j, d)`` is column j's exponent."""
    t = torch.arange(start, start + n, dtype=torch.float64)[:, None]  # (T, 1)
    if layout == "interleave":
        j = torch.arange(d, dtype=torch.float64)  # (C,)
        expo = exponent(j, d)
        angles = t * base**expo if multiply else t / base**expo  # (T, C)
        is_sin = (torch.arange(d) % 2 == 0)[None, :]
        if swap:
            is_sin = ~is_sin
        pe = torch.where(is_sin, torch.sin(angles), torch.cos(angles))
    else:  # all sines first, then all cosines
        i = torch.arange(d // 2, dtype=torch.float64)
        angles = t / base ** (2 * i / d)  # (T, C/2)
        pe = torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)  # (T, C)
    return pe.float()


def _mistakes(n: int, d: int, base: float) -> list[Mistake]:
    return [
        # First: with base != 10000 some exponent mistakes coincide with ignoring the base.
        Mistake(
            "the `base` argument is ignored (you always use 10000)", lambda: _pe(n, d, 10000.0)
        ),
        Mistake(
            "sin and cos are swapped: even columns (0, 2, ...) hold sin, odd columns hold cos",
            lambda: _pe(n, d, base, swap=True),
        ),
        Mistake(
            "the interleaving is wrong: you put all sines first and all cosines second; the course interleaves "
            "them (column 2i = sin, column 2i + 1 = cos, both with frequency index i)",
            lambda: _pe(n, d, base, layout="halves"),
        ),
        Mistake(
            "the exponent is off by a factor of 2: for the pair i (columns 2i and 2i + 1) it is 2i / C; "
            "you used i / C",
            lambda: _pe(n, d, base, exponent=lambda j, d: (j // 2) / d),
        ),
        Mistake(
            "the exponent is off by a factor of 2: for the pair i (columns 2i and 2i + 1) it is 2i / C; "
            "you doubled the column index (2 * (2i) / C)",
            lambda: _pe(n, d, base, exponent=lambda j, d: 2 * (2 * (j // 2)) / d),
        ),
        Mistake(
            "the exponent uses the column index: columns 2i and 2i + 1 must share the frequency base^(2i / C), "
            "so column 2i + 1 must not use (2i + 1) / C",
            lambda: _pe(n, d, base, exponent=lambda j, d: j / d),
        ),
        Mistake(
            "the exponent is off by a factor of 2 and uses the column index: use 2i / C with i = column // 2",
            lambda: _pe(n, d, base, exponent=lambda j, d: 2 * j / d),
        ),
        Mistake(
            "the angle is t * base^(2i / C); it must be t / base^(2i / C) (a negative exponent)",
            lambda: _pe(n, d, base, multiply=True),
        ),
        Mistake(
            "the positions start at 1; they start at 0 (the first row is sin 0 = 0, cos 0 = 1)",
            lambda: _pe(n, d, base, start=1),
        ),
    ]


def check_sinusoidal_encoding(sinusoidal_encoding, hidden: bool = False) -> None:
    """Check ``sinusoidal_encoding(n_positions, d_model, base=10000.0)`` (interleaved sin/cos,
    float32) and the ValueError for an odd ``d_model``."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    forbidden = [
        Forbidden(
            "transformer_lab's reference sinusoidal_encoding", function=_ref.sinusoidal_encoding
        ),
        Forbidden("transformer_lab's sinusoidal_encoding_2d", function=_ref.sinusoidal_encoding_2d),
        Forbidden(
            "transformer_lab's SinusoidalPositionalEncoding",
            codes={_ref.SinusoidalPositionalEncoding.__init__.__code__},
        ),
    ]
    run = Runner(
        "check_sinusoidal_encoding",
        sinusoidal_encoding,
        forbidden,
        hidden,
        lambda e, c: _signature_hint(e, "sinusoidal_encoding(n_positions, d_model, base=10000.0)"),
        reference=_ref.sinusoidal_encoding,
    )
    specs = [(1, 2, None), (4, 4, None), (10, 8, None), (50, 16, None), (7, 6, None), (6, 8, 100.0)]
    if hidden:
        specs += [(200, 32, None), (3, 10, 1000.0), (16, 2, None), (9, 12, 10.0)]
    for n, d, base in specs:
        kwargs = {} if base is None else {"base": base}
        label = f"n_positions={n}, d_model={d}" + (f", base={base}" if base else "")
        case = Case(label, (n, d), kwargs, label)
        expected = _ref.sinusoidal_encoding(n, d, base if base else 10000.0)
        case.data.update(expected=expected, axes=("position", "channel"))
        if base is not None:
            case.data["variations"] = [("base", {"base": DEFAULT})]

        def hint(got: tuple, n=n, d=d) -> str | None:
            if got == (d, n) and n != d:
                return (
                    "that is (d_model, n_positions): one row per position, one column per feature"
                )
            return None

        out = run.expect_tensor(
            run.call(case), case, expected.shape, torch.float32, shape_hint=hint, expected=expected
        )
        if not run.close(out, expected, ATOL, RTOL):
            run.explain(out, expected, case, _mistakes(n, d, base or 10000.0), ATOL, RTOL)
    for n, d in [(4, 5)] + ([(3, 7)] if hidden else []):
        case = Case(f"odd d_model={d}", (n, d), {}, f"n_positions={n}, d_model={d}")
        run.expect_raises(case, ValueError, f"an odd d_model={d}", (str(d),))
    run.passed()


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
            "your matrix is M_1 whatever `k` is: the function ignores `k` (the angles are "
            "k * theta_i)",
            lambda: _shift(1, C, base),
        ),
    ]


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
        run.explain(m, expected, case, _shift_mistakes(k, C, base), 1e-5, 1e-4)
    run.passed()


# ---------------------------------------------------------------------------------------------
# p_t . p_(t+k) depends on the offset k only
def _offset(k, C, base, *, expo=2.0, reduce="sum", terms="cos", freq=True, factor=1.0):
    theta = base ** (-expo * torch.arange(C // 2, dtype=torch.float64) / C)  # (C/2,)
    angle = k.double()[..., None] * (theta if freq else torch.ones_like(theta))  # (..., C/2)
    val = torch.cos(angle) + (torch.sin(angle) if terms == "cos+sin" else 0.0)
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
            run.explain(got, expected, case, _offset_mistakes(k, C, base), 1e-4, 1e-5)
    run.passed()
