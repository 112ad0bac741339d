"""Checks for notebook 8, part 2: the input sequence and the fixed 2-D positions.

vit_embed(images, patch_size, w_e, b_e, cls_token, pos) -> (B, N + 1, C)
sinusoidal_2d(grid_h, grid_w, d_model, base=10000.0) -> (N, C), rows in the first half
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_lab import positional as _positional
from transformer_lab.checks.engine.core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks.engine.evidence import _constant_factor
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.nb08_vision_transformer.exercise_hints import (
    _embed_tip,
    _expect_value_error,
    _hint,
)
from transformer_lab.checks.registry import Cell, Exercise, register
from transformer_lab.models import vit as _vit

__all__ = ["check_vit_embed", "check_sinusoidal_2d"]


# ---------------------------------------------------------------------------------------------
# [CLS] and positions
def _embed_cases(hidden: bool) -> list[Case]:
    g = generator(9803 if hidden else 803)
    specs = [(2, 1, 8, 8, 2, 6), (1, 3, 4, 6, 2, 5), (3, 2, 6, 6, 3, 4)]
    if hidden:
        specs += [(2, 3, 10, 5, 5, 7), (4, 1, 8, 8, 4, 9)]
    cases = []
    for B, ch, H, W, P, C in specs:
        N = (H // P) * (W // P)
        x = torch.randn(B, ch, H, W, generator=g)
        w_e, b_e = torch.randn(ch * P * P, C, generator=g), torch.randn(C, generator=g)
        cls_token, pos = torch.randn(C, generator=g), torch.randn(N + 1, C, generator=g)
        args = (x, P, w_e, b_e, cls_token, pos)
        describe = describe_args(images=x, patch_size=P, w_e=w_e, cls_token=cls_token, pos=pos)
        case = Case(f"{B}x{ch}x{H}x{W}, P={P}, C={C}", args, {}, describe)
        case.data.update(zip(("x", "P", "w_e", "b_e", "cls", "pos"), args))
        cases.append(case)
    return cases


def _reference_embed(x, P, w_e, b_e, cls_token, pos) -> Tensor:
    patches = _vit.patchify(x, P) @ w_e + b_e  # (B, N, C)
    cls = cls_token.expand(x.shape[0], 1, -1)  # (B, 1, C)
    return torch.cat([cls, patches], dim=1) + pos  # (B, N + 1, C)


def _hwc_patches(x: Tensor, P: int) -> Tensor:
    B, C, H, W = x.shape
    grid = x.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)  # (B, gh, gw, P, P, C)
    return grid.reshape(B, (H // P) * (W // P), C * P * P)


def _embed_mistakes(x, P, w_e, b_e, cls_token, pos) -> list[Mistake]:
    B = x.shape[0]
    patches = _vit.patchify(x, P) @ w_e + b_e  # (B, N, C)
    cls = cls_token.expand(B, 1, -1)  # (B, 1, C)
    return [
        Mistake(
            "[CLS] is at the end of the sequence; it goes first (position 0), before the patches",
            lambda: torch.cat([patches, cls], dim=1) + pos,
        ),
        Mistake(
            "[CLS] gets no position embedding: add the whole (N + 1, C) table after prepending [CLS]",
            lambda: torch.cat([cls, patches + pos[1:]], dim=1),
        ),
        Mistake(
            "the patches get rows 0..N-1 of the position table and [CLS] row N; prepend [CLS] first, "
            "then add the table, so [CLS] gets row 0",
            lambda: torch.cat([cls + pos[-1:], patches + pos[:-1]], dim=1),
        ),
        Mistake(
            "the bias b_e is missing from the patch projection",
            lambda: _reference_embed(x, P, w_e, torch.zeros_like(b_e), cls_token, pos),
        ),
        Mistake("the position embeddings are missing", lambda: torch.cat([cls, patches], dim=1)),
        Mistake(
            "the patches get no position embeddings (only [CLS] does): add the whole (N + 1, C) "
            "table to the sequence",
            lambda: torch.cat([cls + pos[0], patches], dim=1),
        ),
        Mistake(
            "the patches get rows 0..N-1 of the position table and [CLS] none; prepend [CLS] "
            "first, then add the whole (N + 1, C) table",
            lambda: torch.cat([cls, patches + pos[:-1]], dim=1),
        ),
        Mistake(
            "the patches are flattened (row, column, channel)-wise: use the course's patch order "
            "(channel, row, column), the order patchify and Conv2d's kernel use",
            lambda: torch.cat([cls, _hwc_patches(x, P) @ w_e + b_e], dim=1) + pos,
        ),
    ]


def check_vit_embed(vit_embed, hidden: bool = False) -> None:
    """Check ``vit_embed(images, patch_size, w_e, b_e, cls_token, pos)`` -> (B, N + 1, C)."""
    __tracebackhide__ = True
    run = Runner(
        "check_vit_embed",
        vit_embed,
        [Forbidden("transformer_lab's ViT", function=_vit.ViT.forward)],
        hidden,
        _hint("vit_embed(images, patch_size, w_e, b_e, cls_token, pos)", _embed_tip),
    )
    for case in _embed_cases(hidden):
        args = tuple(case.data[k] for k in ("x", "P", "w_e", "b_e", "cls", "pos"))
        expected = _reference_embed(*args)
        B, N1, C = expected.shape

        def shape_hint(got: tuple, N1=N1) -> str | None:
            if got[:1] == (B,) and len(got) == 3 and got[1] == N1 - 1:
                return "one token short: prepend the [CLS] token to the N patch embeddings"
            return None

        out = run.expect_tensor(
            run.call(case), case, expected.shape, expected.dtype, "sequence", shape_hint
        )
        if not run.close(out, expected, 1e-4, 1e-4):
            message = run.diagnose(out, _embed_mistakes(*args), 1e-4, 1e-4)
            message = message or _embed_evidence(run, out, expected, args)
            if message:
                run.fail(message, case)
            case.data.update(axes=("batch element", "token", "feature"), dims={"C": C})
            run.explain(out, expected, case, (), 1e-4, 1e-4, what="sequence")
    run.passed()


def _embed_evidence(run: Runner, out: Tensor, expected: Tensor, args) -> str | None:
    """Which part is wrong ([CLS] or the patches), and by what: an input added where it does
    not belong, a constant factor, or patches that are not patchify's."""
    x, P, w_e, b_e, cls_token, pos = args
    C = w_e.shape[1]
    close = lambda a, b: a.shape == b.shape and run.close(a, b, 1e-4, 1e-4)  # noqa: E731
    cls_ok, patches_ok = close(out[:, 0], expected[:, 0]), close(out[:, 1:], expected[:, 1:])
    terms = {"b_e": b_e, "pos[0]": pos[0], "cls_token": cls_token, "pos[1]": pos[1]}
    if close(out - expected, pos.expand_as(out)):
        return "the position table pos is added twice, to every token: add it once"
    if patches_ok and not cls_ok:
        delta = out[:, 0] - expected[:, 0]  # (B, C)
        for name, term in terms.items():
            for sign, verb in ((1, "an extra"), (-1, "no")):
                if close(delta, sign * term.expand_as(delta)):
                    return (
                        f"the patches are right, but token 0 ([CLS]) has {verb} {name} in it: it "
                        f"should be exactly cls_token + pos[0] (the bias b_e belongs to the patch "
                        f"projection only)"
                    )
        return None
    if not cls_ok or patches_ok:
        return None
    mine, want = out[:, 1:] - pos[1:], expected[:, 1:] - pos[1:]  # patch embeddings, no positions
    for name, term in (("b_e", b_e), ("their positions pos[1:]", pos[1:])):
        if close(mine - want, term.expand_as(mine)):
            return (
                f"[CLS] is right, but the patch embeddings have {name} added twice: add each "
                f"term once (the position table once, to the whole sequence)"
            )
    for shown, a, e in (("patches @ w_e + b_e", mine, want),
                        ("patches @ w_e", mine - b_e, want - b_e)):  # fmt: skip
        found = _constant_factor(a.double(), e.double(), {"D": C, "C_in": w_e.shape[0]})
        if found is not None and found.named:
            return f"[CLS] is right, but the patch embeddings ({shown}): {found.message}"
    if w_e.shape[0] <= w_e.shape[1]:  # the projection can be undone: which patches went in?
        pixels = (mine - b_e).double() @ torch.linalg.pinv(w_e.double())  # (B, N, C_in)
        true = _vit.patchify(x, P).double()
        if not close(pixels, true) and all(
            close(p.flatten().sort().values, t.flatten().sort().values)
            for p, t in zip(pixels, true)
        ):
            return (
                "[CLS] and the positions are right, but the vectors you project are not "
                "patchify(images, P)'s patches: the same pixels in another order; call your "
                "patchify (a reshape alone cuts strips of pixel rows, not squares)"
            )
    return None


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
            message = run.diagnose(out, _sin2d_mistakes(h, w, C, base), 1e-5, 1e-5)
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
        "vit_embed",
        "08_vision_transformer",
        "vit_embed(images, patch_size, w_e, b_e, cls_token, pos) -> (B, N+1, C)",
        cells=(Cell("vit_embed_tests", "vit_embed", 2),),
        check=check_vit_embed,
        reference=_reference_embed,
        against="transformer_lab.models.vit.patchify, then [CLS] and positions",
    )
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
