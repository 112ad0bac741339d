"""Checks for notebook 8, part 2: the input sequence and the fixed 2-D positions.

vit_embed(images, patch_size, w_e, b_e, cls_token, pos) -> (B, N + 1, C)
sinusoidal_2d(grid_h, grid_w, d_model, base=10000.0) -> (N, C), rows in the first half
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_lab import positional as _positional
from transformer_lab.checks._core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks._integrity import Forbidden
from transformer_lab.checks.patches import _expect_value_error, _hint
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
        _hint("vit_embed(images, patch_size, w_e, b_e, cls_token, pos)"),
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
            run.fail(message or run.mismatch(out, expected, "sequence"), case)
    run.passed()


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
        out = run.expect_tensor(run.call(case), case, expected.shape, torch.float32, "encoding")
        if not run.close(out, expected, 1e-5, 1e-5):
            message = run.diagnose(out, _sin2d_mistakes(h, w, C, base), 1e-5, 1e-5)
            if message is None and base != 10000.0:
                default = _positional.sinusoidal_encoding_2d(h, w, C)
                if run.close(out, default, 1e-5, 1e-5):
                    message = "the base argument is ignored: pass it on to the 1-D encoding"
            run.fail(message or run.mismatch(out, expected, "encoding"), case)
    bad = Case("d_model=6", (3, 3, 6), {}, "grid_h=3, grid_w=3, d_model=6")
    _expect_value_error(
        run, lambda: sinusoidal_2d(3, 3, 6), bad, ["6"], "a width not divisible by 4"
    )
    run.passed()
