"""Check for notebook 3, exercise 1: sinusoidal positional encodings.

sinusoidal_encoding(n_positions, d_model, base=10000.0) -> (n_positions, d_model) float32
    PE[t, 2i] = sin(t / base^(2i / C)),  PE[t, 2i + 1] = cos(t / base^(2i / C));
    ValueError naming d_model when it is odd
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from transformer_lab import positional as _ref
from transformer_lab.checks.engine.core import Case, Mistake, Runner
from transformer_lab.checks.engine.diagnose import DEFAULT
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = [
    "check_sinusoidal_encoding",
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


def _table_evidence(out: Tensor, n: int, d: int, base: float) -> str | None:
    """Read the student's table as clock hands: odd columns that copy the even ones, the
    positions pair 0 or the slowest pair reveals, and the frequencies row 1 reveals (named only
    if they rebuild the table)."""
    a = out.detach().double()
    if not torch.isfinite(a).all():
        return None
    if d >= 2 and torch.allclose(a[:, 1::2], a[:, 0::2], atol=1e-4):
        return (
            "your odd columns repeat the even ones (sin in both): column 2i holds sin(t theta_i), "
            "column 2i + 1 holds cos(t theta_i)"
        )
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (C/2,)

    def table(t: Tensor, freq: Tensor) -> Tensor:
        angles = t[:, None] * freq[None, :]
        pe = torch.zeros(n, d, dtype=torch.float64)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(angles), torch.cos(angles)
        return pe

    # positions, read from pair 0 (frequency 1) or, unwrapped, from the slowest pair
    for pair in (0, d // 2 - 1):
        t = torch.atan2(a[:, 2 * pair], a[:, 2 * pair + 1]) / theta[pair]
        if torch.allclose(table(t, theta), a, atol=1e-4):
            return _positions_message(t)
    # frequencies, read from row 1 (position 1): angle = theta_i (mod 2 pi)
    if n > 2 and torch.allclose(a[0], table(torch.zeros(1), theta)[0], atol=1e-4):
        freq = torch.atan2(a[1, 0::2], a[1, 1::2])
        if torch.allclose(table(torch.arange(n, dtype=torch.float64), freq), a, atol=1e-4):
            mine = ", ".join(f"{v:.3g}" for v in freq[:4].tolist())
            want = ", ".join(f"{v:.3g}" for v in theta[:4].tolist())
            return (
                f"your pairs turn by {mine}, ... per row (modulo 2 pi) instead of theta_i = "
                f"base^(-2i/C) = {want}, ...: check the frequencies (the exponent -2i/C, a "
                f"float division with i the pair index, and the base) and that row t is position t"
            )
    return None


def _positions_message(t: Tensor) -> str:
    """The verdict for a table whose rows encode the positions ``t`` instead of 0, 1, 2, ..."""
    shown = ", ".join(f"{v:.3g}" for v in t[:4].tolist())
    steps = t.diff()
    step = steps[0].item() if len(steps) else 1.0
    even = bool(len(steps)) and torch.allclose(steps, torch.full_like(steps, step), atol=1e-4)
    if even and abs(t[0].item()) < 1e-4 and abs(step - 1) > 1e-3:
        two_pi = " (a factor 2 pi)" if abs(step - 2 * math.pi) < 1e-3 else ""
        return (
            f"every angle t theta_i is multiplied by {step:.3g}{two_pi}: your rows encode the "
            f"positions {shown}, ... (spaced by {step:.3g} instead of 1), or equally frequencies "
            f"{step:.3g} theta_i; use the consecutive integer positions t = 0, 1, 2, ... (step 1: "
            f"torch.arange(n_positions), not linspace) and theta_i = base^(-2i/C), no other factor"
        )
    return (
        f"your rows encode the positions {shown}, ... instead of the consecutive integer "
        f"positions t = 0, 1, 2, ... (step 1): use torch.arange(n_positions) (not normalised, "
        f"starting at 0)"
    )


def _confirmed_mistake(
    run: Runner, out: Tensor, expected: Tensor, n: int, d: int, base: float
) -> str | None:
    """The known mistake ``out`` matches, if the student's table on a second, wider input
    (n=13, C=12) matches the same mistake: on small C several exponent mistakes coincide."""
    known = run.diagnose(out, _mistakes(n, d, base), ATOL, RTOL, expected=expected)
    if known is None:
        return None
    n2, d2 = (13, 12) if (n, d) != (13, 12) else (11, 16)
    again, error, calls = run.attempt((n2, d2), {"base": base})
    if error is not None or calls or not isinstance(again, Tensor):
        return None
    want = _ref.sinusoidal_encoding(n2, d2, base)
    if again.shape != want.shape:
        return None
    return (
        known
        if run.diagnose(again, _mistakes(n2, d2, base), ATOL, RTOL, expected=want) == known
        else None
    )


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
            if len(got) == 2 and got[1] == d and abs(got[0] - n) == 1:
                return (
                    f"one row per position t = 0 .. n_positions - 1, so n_positions = {n} rows: "
                    f"torch.arange(n_positions) (not n_positions + 1, not from 1)"
                )
            return None

        out = run.expect_tensor(
            run.call(case), case, expected.shape, torch.float32, shape_hint=hint, expected=expected
        )
        if not run.close(out, expected, ATOL, RTOL):
            known = _confirmed_mistake(run, out, expected, n, d, base or 10000.0)
            if known is not None:
                run.fail(known, case)
            try:
                found = _table_evidence(out, n, d, base or 10000.0)
            except Exception:  # evidence that cannot be computed here is no evidence
                found = None
            if found is not None:
                run.fail(found, case)
            run.explain(out, expected, case, (), ATOL, RTOL)
    for n, d in [(4, 5)] + ([(3, 7)] if hidden else []):
        case = Case(f"odd d_model={d}", (n, d), {}, f"n_positions={n}, d_model={d}")
        run.expect_raises(case, ValueError, f"an odd d_model={d}", (str(d),))
    run.passed()


register(
    Exercise(
        "sinusoidal_encoding",
        "03_positional_encodings",
        "sinusoidal_encoding(n_positions, d_model, base=10000.0) -> (T, C)",
        cells=(Cell("sinusoidal_tests", "sinusoidal_encoding", 3),),
        check=check_sinusoidal_encoding,
        reference=_ref.sinusoidal_encoding,
    )
)
