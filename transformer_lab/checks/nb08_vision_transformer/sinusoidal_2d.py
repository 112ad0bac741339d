"""Check for notebook 08, part 2: fixed 2-D sinusoidal positions for a grid of patches.

sinusoidal_2d(grid_h, grid_w, d_model, base=10000.0) -> (N, C), rows in the first half
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_lab import positional as _positional
from transformer_lab.checks.engine.core import Case, Mistake, Runner
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.nb08_vision_transformer.exercise_hints import (
    _expect_value_error,
    _hint,
)
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_sinusoidal_2d"]


# ---------------------------------------------------------------------------------------------
# 2-D sinusoidal positions
def _sin2d_mistakes(h: int, w: int, C: int, base: float) -> list[Mistake]:
    rows = _positional.sinusoidal_encoding(h, C // 2, base)  # (h, C/2)
    cols = _positional.sinusoidal_encoding(w, C // 2, base)  # (w, C/2)

    def grid(first: Tensor, second: Tensor, a: int, b: int) -> Tensor:
        return torch.cat(
            [first[:, None, :].expand(a, b, C // 2), second[None, :, :].expand(a, b, C // 2)],
            dim=-1,
        )  # (a, b, C)

    def narrow(n: int) -> Tensor:  # frequencies of the full width C, cut to C/2 channels
        return _positional.sinusoidal_encoding(n, C, base)[:, : C // 2]

    return [
        Mistake(
            "each half's frequencies come from the full width C; encode the rows and the columns "
            "each at width C/2 (omega_i = base^(-2i / (C/2)))",
            lambda: grid(narrow(h), narrow(w), h, w).reshape(h * w, C),
        ),
        Mistake(
            "the halves are swapped: the first C/2 channels should encode the patch's row and the "
            "last C/2 its column",
            lambda: torch.cat(
                [cols[None, :, :].expand(h, w, C // 2), rows[:, None, :].expand(h, w, C // 2)],
                dim=-1,
            ).reshape(h * w, C),
        ),
        Mistake(
            "the patches are in column-major order; number them row by row (row index slowest), as "
            "patchify does",
            lambda: grid(rows, cols, h, w).transpose(0, 1).reshape(h * w, C),
        ),
        Mistake(
            "you used the 1-D encoding of the patch index 0..N-1: that ignores the grid (patches "
            "above each other are far apart); encode the row and the column separately",
            lambda: _positional.sinusoidal_encoding(h * w, C, base),
        ),
        Mistake(
            "each axis uses the full width C and the two are added; give each axis half the "
            "channels (width C/2) and concatenate",
            lambda: (
                _positional.sinusoidal_encoding(h, C, base)[:, None, :]
                + _positional.sinusoidal_encoding(w, C, base)[None, :, :]
            ).reshape(h * w, C),
        ),
        Mistake(
            "the row and column channels are interleaved; put all C/2 row channels first, then the "
            "C/2 column channels",
            lambda: torch.stack(
                [rows[:, None, :].expand(h, w, C // 2), cols[None, :, :].expand(h, w, C // 2)],
                dim=-1,
            ).reshape(h * w, C),
        ),
        Mistake(
            "each sin/cos pair is in the wrong order (cos first): the 1-D encoding puts sin in "
            "the even channels and cos in the odd ones, in each half",
            lambda: grid(rows, cols, h, w).reshape(h * w, C // 2, 2).flip(-1).reshape(h * w, C),
        ),
        Mistake(
            "the rows are encoded with the column count and the columns with the row count (h and "
            "w swapped); the row index runs over grid_h",
            lambda: grid(
                _positional.sinusoidal_encoding(w, C // 2, base),
                _positional.sinusoidal_encoding(h, C // 2, base),
                w,
                h,
            ).reshape(h * w, C),
        ),
    ]


_LAYOUTS = {  # how a 1-D encoding of width C/2 lays out its sines and cosines
    "pairs": "",
    "cos pairs": "each sin/cos pair is in the wrong order (cos first)",
    "sin|cos": "the sines come first and the cosines after, in two blocks",
    "cos|sin": "the cosines come first and the sines after, in two blocks",
}


def _layout_mistakes(h: int, w: int, C: int, base: float) -> list[Mistake]:
    """Each half encoded with another layout of its sines and cosines, or positions from 1."""
    half = C // 2
    freqs = base ** (-torch.arange(0, half, 2, dtype=torch.float64) / half)

    def enc(n: int, layout: str, start: int) -> Tensor:  # (n, C/2)
        a = torch.arange(start, start + n, dtype=torch.float64)[:, None] * freqs
        s, c = a.sin(), a.cos()
        if layout in ("pairs", "cos pairs"):
            pair = (s, c) if layout == "pairs" else (c, s)
            return torch.stack(pair, -1).reshape(n, half).float()
        return torch.cat((s, c) if layout == "sin|cos" else (c, s), -1).float()

    out = []
    for layout, said in _LAYOUTS.items():
        for start in (0, 1):
            if start == 0 and layout in ("pairs", "cos pairs"):
                continue  # the right answer, and a mistake of _sin2d_mistakes
            parts = [f"in each half {said}" if said else ""]
            parts.append("the positions start at 1; the first row and column are position 0")
            parts = [p for p in parts[: 1 + start] if p]
            tip = " (the 1-D encoding puts sin in the even channels, cos in the odd)" * bool(said)
            out.append(
                Mistake(
                    "; and ".join(parts) + tip,
                    lambda layout=layout, start=start: torch.cat(
                        [
                            enc(h, layout, start).repeat_interleave(w, 0),
                            enc(w, layout, start).repeat(h, 1),
                        ],
                        1,
                    ),
                )
            )
    return out


def check_sinusoidal_2d(sinusoidal_2d, hidden: bool = False) -> None:
    """Check ``sinusoidal_2d(grid_h, grid_w, d_model, base=10000.0)`` -> (grid_h * grid_w, C)."""
    __tracebackhide__ = True
    forbidden = [
        Forbidden(
            "transformer_lab's sinusoidal_encoding_2d", function=_positional.sinusoidal_encoding_2d
        )
    ]
    run = Runner(
        "check_sinusoidal_2d",
        sinusoidal_2d,
        forbidden,
        hidden,
        _hint("sinusoidal_2d(grid_h, grid_w, d_model, base=10000.0)"),
    )
    specs = [(3, 5, 8, 10000.0), (4, 4, 16, 10000.0), (2, 6, 12, 100.0), (1, 3, 4, 10000.0)]
    if hidden:
        specs += [(7, 3, 20, 10000.0), (5, 5, 32, 50.0), (2, 9, 24, 10000.0)]
    for h, w, C, base in specs:
        case = Case(
            f"{h}x{w} grid, C={C}, base={base:g}",
            (h, w, C),
            {"base": base},
            f"grid_h={h}, grid_w={w}, d_model={C}, base={base:g}",
        )
        expected = _positional.sinusoidal_encoding_2d(h, w, C, base)
        _, error, _ = run.attempt((h, w, C), {"base": base})
        if error is not None and (message := _square_grid_probe(run, h, w, C, base)):
            run.fail(f"your function raised {type(error).__name__} here; {message}", case)
        value = run.call(case)
        rows = getattr(value, "shape", (None,))[0] if getattr(value, "ndim", 0) == 2 else None
        if rows is not None and rows != h * w and rows in (h * h, w * w):
            side = "grid_h" if rows == h * h else "grid_w"
            run.fail(
                f"your encoding has {rows} rows for a {h}x{w} grid, as if {side} were both "
                f"sides of a square grid; it needs one row per patch, grid_h * grid_w = {h * w}.",
                case,
            )
        out = run.expect_tensor(value, case, expected.shape, torch.float32, "encoding")
        if not run.close(out, expected, 1e-5, 1e-5):
            message = run.diagnose(
                out, _sin2d_mistakes(h, w, C, base) + _layout_mistakes(h, w, C, base), 1e-5, 1e-5
            )
            if message is None and base != 10000.0:
                default = _positional.sinusoidal_encoding_2d(h, w, C)
                if run.close(out, default, 1e-5, 1e-5):
                    message = "the base argument is ignored: pass it on to the 1-D encoding"
            message = message or _halves_evidence(run, out, expected, h, w, C)
            message = message or _square_grid_probe(run, h, w, C, base)
            if message:
                run.fail(message, case)
            case.data["axes"] = ("patch", "channel")
            run.explain(out, expected, case, (), 1e-5, 1e-5, what="encoding")
    bad = Case("d_model=6", (3, 3, 6), {}, "grid_h=3, grid_w=3, d_model=6")
    _expect_value_error(
        run, lambda: sinusoidal_2d(3, 3, 6), bad, ["6"], "a width not divisible by 4"
    )
    run.passed()


def _halves_evidence(run: Runner, out: Tensor, expected: Tensor, h: int, w: int, C: int):
    """One half right, the other wrong: say which, and whose code each patch got instead."""
    half = C // 2
    close = lambda a, b: run.close(a, b, 1e-5, 1e-5)  # noqa: E731
    rows_ok = close(out[:, :half], expected[:, :half])
    cols_ok = close(out[:, half:], expected[:, half:])
    if rows_ok == cols_ok:
        return None
    bad, name, count, index = (
        (slice(half, None), "column", w, lambda n: n % w)
        if rows_ok
        else (slice(0, half), "row", h, lambda n: n // w)
    )
    codes = expected[:, bad].reshape(h, w, half)
    table = codes[0] if name == "column" else codes[:, 0]  # (count, C/2): the axis's codes
    got = out[:, bad]
    for n in range(h * w):
        hits = [i for i in range(count) if close(got[n], table[i])]
        if hits and hits[0] != index(n):
            return (
                f"the {'row' if rows_ok else 'column'} half is right, but patch {n} carries the "
                f"code of {name} {hits[0]}, and it lies in {name} {index(n)}: patches are numbered "
                f"row by row, so patch n is in row n // grid_w and column n % grid_w"
            )
    where = "last" if rows_ok else "first"
    return (
        f"the {'row' if rows_ok else 'column'} half is right, but the {where} C/2 channels (the "
        f"{name} code) are not: they should be the 1-D encoding (width C/2) of each patch's {name}"
    )


def _square_grid_probe(run: Runner, h: int, w: int, C: int, base: float) -> str | None:
    """Wrong (or crashing) on a grid_h x grid_w grid with grid_h != grid_w, right on square
    grids of both sizes: the two sizes are mixed up somewhere."""
    if h == w:
        return None
    for n in (h, w):
        out, error, calls = run.attempt((n, n, C), {"base": base})
        want = _positional.sinusoidal_encoding_2d(n, n, C, base)
        if error is not None or calls or not isinstance(out, Tensor) or out.shape != want.shape:
            return None
        if not run.close(out.detach().float(), want, 1e-5, 1e-5):
            return None
    return (
        f"right on square grids, but not on this {h} x {w} one: grid_h and grid_w are mixed up "
        f"somewhere; the rows run over grid_h = {h} (first half), the columns over grid_w = {w}"
    )


register(
    Exercise(
        "sinusoidal_2d",
        "08_vision_transformer",
        "sinusoidal_2d(grid_h, grid_w, d_model, base=10000.0) -> (N, C)",
        cells=(Cell("sinusoidal_2d_tests", "sinusoidal_2d", 2),),
        check=check_sinusoidal_2d,
        reference=_positional.sinusoidal_encoding_2d,
    )
)
