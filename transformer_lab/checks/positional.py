"""Checks for notebook 3: sinusoidal positional encodings.

Student-facing signature:

    sinusoidal_encoding(n_positions, d_model, base=10000.0) -> (n_positions, d_model) float32
        PE[t, 2i] = sin(t / base^(2i / C)),  PE[t, 2i + 1] = cos(t / base^(2i / C))
    shift_matrix(k, d_model, base=10000.0) -> (C, C), with p_(t+k) = p_t @ M_k for every t
    offset_dot_product(k, d_model, base=10000.0) -> k's shape, p_t . p_(t+k)
    apply_rope(x, base=10000.0) -> x's shape (..., T, D), pair (2i, 2i+1) at position t rotated by t theta_i
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_lab import positional as _ref
from transformer_lab.checks._core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks._guards import TRUSTED, Forbidden
from transformer_lab.checks.attention import _signature_hint

__all__ = [
    "check_sinusoidal_encoding",
    "check_shift_matrix",
    "check_offset_dot_product",
    "check_apply_rope",
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
    """Check ``sinusoidal_encoding(n_positions, d_model, base=10000.0)`` (interleaved sin/cos)."""
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
    )
    specs = [(1, 2, None), (4, 4, None), (10, 8, None), (50, 16, None), (7, 6, None), (6, 8, 100.0)]
    if hidden:
        specs += [(200, 32, None), (3, 10, 1000.0), (16, 2, None), (9, 12, 10.0)]
    for n, d, base in specs:
        kwargs = {} if base is None else {"base": base}
        case = Case(
            f"n_positions={n}, d_model={d}" + (f", base={base}" if base else ""),
            (n, d),
            kwargs,
            f"n_positions={n}, d_model={d}" + (f", base={base}" if base else ""),
        )
        expected = _ref.sinusoidal_encoding(n, d, base if base else 10000.0)

        def hint(got: tuple, n=n, d=d) -> str | None:
            if got == (d, n) and n != d:
                return (
                    "that is (d_model, n_positions): one row per position, one column per feature"
                )
            return None

        out = run.expect_tensor(
            run.call(case), case, expected.shape, torch.float32, shape_hint=hint
        )
        if not run.close(out, expected, ATOL, RTOL):
            message = run.diagnose(out, _mistakes(n, d, base if base else 10000.0), ATOL, RTOL)
            run.fail(message or run.mismatch(out, expected, "encoding"), case)
    run.passed()


# ---------------------------------------------------------------------------------------------
# the shift matrix M_k: p_t M_k = p_(t+k), checked on the reference encodings
def check_shift_matrix(shift_matrix, hidden: bool = False) -> None:
    """Check ``shift_matrix(k, d_model, base=10000.0)``: p_t @ M_k must equal p_(t+k) for every t."""
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
    )
    specs = [(1, 8, 10000.0), (3, 16, 10000.0), (-2, 6, 100.0), (7, 32, 10000.0)]
    if hidden:
        specs = [(11, 12, 10000.0), (-5, 64, 10000.0), (2, 10, 500.0)]
    n = 40  # positions of the reference encoding
    for k, C, base in specs:
        pe = _ref.sinusoidal_encoding(n, C, base)  # (n, C), computed before the student's code runs
        case = Case(
            f"k={k}, C={C}, base={base}", (k, C, base), {}, f"k={k}, d_model={C}, base={base}"
        )
        m = run.expect_tensor(run.call(case), case, (C, C)).float()
        lo, hi = max(0, -k), n - max(0, k)  # the t with both t and t + k inside the table
        target = pe[lo + k : hi + k]  # (positions, C)
        if TRUSTED.allclose(pe[lo:hi] @ m, target, atol=1e-4):
            continue
        hint = ""
        if TRUSTED.allclose(pe[lo:hi] @ m.T, target, atol=1e-4):
            # M_k^T = M_(-k): the transpose and a shift by -k are the same mistake
            hint = " Your matrix is the transpose (it shifts by -k): with row vectors p_t M, the -sin goes top-right."
        run.fail(f"p_t @ M_k differs from p_(t+k) for k={k}, C={C}, base={base}.{hint}", case)
    run.passed()


# ---------------------------------------------------------------------------------------------
# p_t . p_(t+k) depends on the offset k only
def check_offset_dot_product(offset_dot_product, hidden: bool = False) -> None:
    """Check ``offset_dot_product(k, d_model, base=10000.0)`` against p_t . p_(t+k) measured on the
    package's encodings, for every position t and offsets -20..20."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    forbidden = [
        Forbidden(
            "transformer_lab's sinusoidal_encoding (use the formula, do not build encodings)",
            function=_ref.sinusoidal_encoding,
        )
    ]
    run = Runner(
        "check_offset_dot_product",
        offset_dot_product,
        forbidden,
        hidden,
        lambda e, c: _signature_hint(e, "offset_dot_product(k, d_model, base=10000.0)"),
    )
    specs = [(16, 10000.0), (64, 10000.0), (10, 100.0)]
    if hidden:
        specs = [(8, 10000.0), (128, 10000.0), (32, 50.0)]
    n = 60  # positions of the reference encoding
    for C, base in specs:
        pe = _ref.sinusoidal_encoding(n, C, base).double()  # (n, C)
        k = torch.arange(-20, 21)
        case = Case(
            f"C={C}, base={base}", (k, C, base), {}, describe_args(k=k, d_model=C, base=base)
        )
        got = run.expect_tensor(
            run.call(case),
            case,
            k.shape,
            shape_hint=lambda shape: "return one value per offset, the shape of k",
        )
        for j, offset in enumerate(k.tolist()):
            lo, hi = max(0, -offset), n - max(0, offset)
            measured = (pe[lo:hi] * pe[lo + offset : hi + offset]).sum(
                -1
            )  # p_t . p_(t+k) for every t
            if TRUSTED.allclose(got[j].double().expand_as(measured), measured, atol=1e-4):
                continue
            hint = ""
            if abs(got[j].item() - 2 * measured[0].item()) < 1e-3:
                hint = " Your value is twice the dot product: there are C/2 frequencies, not C."
            run.fail(
                f"for C={C}, base={base}, offset k={offset}: p_t . p_(t+k) = {measured[0].item():.4f} "
                f"for every t, but received {got[j].item():.4f}.{hint}",
                case,
            )
    if hidden:  # k may have any shape
        k = torch.tensor([[0, 1], [2, 3]])
        case = Case("2-D offsets", (k, 8), {}, describe_args(k=k, d_model=8))
        run.expect_tensor(
            run.call(case), case, k.shape, shape_hint=lambda shape: "return a tensor of k's shape"
        )
    run.passed()


# ---------------------------------------------------------------------------------------------
# rotary position embedding
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
    return [
        Mistake(
            "rotated the wrong way (the minus sign belongs to the first formula: x_even cos - x_odd sin)",
            lambda: _rotate_pairs(x, -t * base ** (-i2 / D)),
        ),
        Mistake(
            "positions start at 1; the first row (t = 0) must not be rotated",
            lambda: _rotate_pairs(x, (t + 1) * base ** (-i2 / D)),
        ),
        Mistake(
            "the exponent is 2i/D over the even channel index, not i/D",
            lambda: _rotate_pairs(x, t * base ** (-i2 / 2 / D)),
        ),
        Mistake(
            "pairs are channels (2i, 2i+1), side by side, not (i, i + D/2)",
            lambda: _rotate_halves(x, t * base ** (-i2 / D)),
        ),
    ]


def check_apply_rope(apply_rope, hidden: bool = False) -> None:
    """Check ``apply_rope(x, base=10000.0)`` on (B, H, T, D) inputs against the package's RotaryEmbedding."""
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
    specs = [(1, 1, 6, 4, 10000.0), (2, 3, 9, 8, 10000.0), (1, 2, 12, 16, 100.0)]
    if hidden:
        specs = [(1, 1, 20, 2, 10000.0), (3, 2, 7, 32, 10000.0), (2, 4, 5, 12, 1000.0)]
    for B, H, T, D, base in specs:
        x = torch.randn(B, H, T, D, generator=g)
        with torch.no_grad():
            want = _ref.RotaryEmbedding(D, base)(x)  # computed before the student's code runs
        case = Case(
            f"B={B}, H={H}, T={T}, D={D}, base={base}", (x, base), {}, describe_args(x=x, base=base)
        )
        got = run.expect_tensor(run.call(case), case, x.shape)
        if run.close(got, want, atol=1e-5, rtol=1e-5):
            continue
        message = run.diagnose(got, _rope_mistakes(x, base), atol=1e-5, rtol=1e-5)
        run.fail(
            message
            or f"your output differs from the reference by up to {(got.to(want.dtype) - want).abs().max().item():.3g}; "
            f"check the pairing (channels 2i and 2i+1).",
            case,
        )
    run.passed()
