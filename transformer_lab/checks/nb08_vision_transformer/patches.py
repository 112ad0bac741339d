"""Checks for notebook 8, part 1: an image as a sequence of patches.

patchify(images, patch_size) -> (B, N, C*P*P), patches row by row, features (channel, row, column)
linear_to_conv(linear, patch_size, n_channels) -> nn.Conv2d computing the same patch embedding
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_lab.checks.engine.core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.nb08_vision_transformer.exercise_hints import (
    _expect_value_error,
    _hint,
    _patchify_tip,
)
from transformer_lab.checks.nb08_vision_transformer.patch_conv import check_linear_to_conv
from transformer_lab.checks.registry import Cell, Exercise, register
from transformer_lab.models import vit as _vit

__all__ = ["check_patchify", "check_linear_to_conv"]


# ---------------------------------------------------------------------------------------------
# patchify
def _patchify_mistakes(x: Tensor, P: int) -> list[Mistake]:
    B, C, H, W = x.shape
    gh, gw = H // P, W // P
    grid = x.reshape(B, C, gh, P, gw, P)  # (B, C, gh, P, gw, P)

    def order(*dims: int) -> Tensor:
        return grid.permute(*dims).reshape(B, gh * gw, C * P * P)

    return [
        Mistake(
            "the features inside a patch are ordered (row, column, channel); the course and "
            "Conv2d's kernel use (channel, row, column): permute to (B, H/P, W/P, C, P, P)",
            lambda: order(0, 2, 4, 3, 5, 1),
        ),
        Mistake(
            "you reshaped without permuting: each 'patch' is a run of consecutive pixels in memory "
            "(pieces of image rows), not a P x P square. Reshape to (B, C, H/P, P, W/P, P), then "
            "permute the two grid axes in front",
            lambda: x.reshape(B, gh * gw, C * P * P),
        ),
        Mistake(
            "the patches are numbered column by column; number them row by row (the grid's row "
            "index H/P varies slowest): permute to (B, H/P, W/P, ...)",
            lambda: order(0, 4, 2, 1, 3, 5),
        ),
        Mistake(
            "inside each patch rows and columns are swapped (every patch is transposed); keep the "
            "pixel order (channel, row, column)",
            lambda: order(0, 2, 4, 1, 5, 3),
        ),
        Mistake(
            "your patches are strided (every (H/P)-th pixel), not contiguous squares: split the "
            "height as (H/P, P), not (P, H/P), and the width likewise",
            lambda: (
                x.reshape(B, C, P, gh, P, gw).permute(0, 3, 5, 1, 2, 4).reshape(B, -1, C * P * P)
            ),
        ),
        Mistake(
            "the patches are right but each is flattened (column, row, channel)-wise; flatten as "
            "(channel, row, column)",
            lambda: order(0, 2, 4, 5, 3, 1),
        ),
        Mistake(
            "the height and width are swapped in your reshape: (B, C, W/P, P, H/P, P) only works "
            "for square images; split the height first, (B, C, H/P, P, W/P, P)",
            lambda: (
                x.reshape(B, C, gw, P, gh, P).permute(0, 2, 4, 1, 3, 5).reshape(B, -1, C * P * P)
            ),
        ),
        Mistake(
            "the batch axis is mixed into the patches: you built (N, B, ...) and reshaped it to "
            "(B, N, ...); keep the batch axis first when you permute, (B, H/P, W/P, C, P, P)",
            lambda: _vit.patchify(x, P).transpose(0, 1).reshape(B, gh * gw, C * P * P),
        ),
    ]


def _square_probe(run: Runner, patchify, case: Case, raised: bool = False) -> str | None:
    """On a non-square image: is the student's function right on a square one? Then the bug
    depends on H != W (height and width mixed up somewhere, or the grid assumed square)."""
    x, P = case.data["x"], case.data["P"]
    B, C, H, W = x.shape
    if H == W:
        return None
    side = max(H, W)
    square = torch.randn(B, C, side, side, generator=generator(8011))
    out, error, calls = run.attempt((square.clone(), P), {})
    if error is None and not calls and TRUSTED.is_tensor(out):
        want = _vit.patchify(square, P)
        if out.shape == want.shape and TRUSTED.equal(out.detach(), want):
            what = "fails" if raised else "wrong"
            return (
                f"right on square images but {what} on this non-square {H} x {W} one: the height "
                f"and width (H/P and W/P) are mixed up, or one is used for both: reshape to "
                f"(B, C, H/P, P, W/P, P); the grid has H/P = {H // P} rows of W/P = {W // P} "
                f"patches"
            )
    return None


def _grid_shape_hint(got: tuple, x: Tensor, P: int) -> str | None:
    """(B, P*P, C*(H/P)*(W/P)): P read as the number of patches per side, not their size."""
    B, C, H, W = x.shape
    N, F = (H // P) * (W // P), C * P * P
    if len(got) == 3 and got[0] == B and (got[1], got[2]) == (P * P, C * N) and got[1] != N:
        return (
            f"that is a {P} x {P} grid of patches (P patches per side); P is the size of a patch "
            f"in pixels: cut P x P pixel squares, a grid of H/P x W/P = {H // P} x {W // P} = "
            f"{N} patches of C*P*P = {F} numbers"
        )
    return None


def _patchify_cases(hidden: bool) -> list[Case]:
    g = generator(9801 if hidden else 801)
    specs = [(2, 3, 4, 6, 2), (2, 1, 8, 8, 2), (1, 2, 6, 6, 3), (3, 3, 8, 8, 4), (1, 1, 4, 4, 1)]
    if hidden:
        specs += [(2, 3, 10, 15, 5), (4, 2, 12, 8, 4), (1, 3, 14, 14, 7)]
    cases = []
    for B, C, H, W, P in specs:
        x = torch.randn(B, C, H, W, generator=g)
        case = Case(f"{B}x{C}x{H}x{W}, P={P}", (x, P), {}, describe_args(images=x, patch_size=P))
        case.data.update(x=x, P=P)
        cases.append(case)
    return cases


def _crash_tip(run: Runner, patchify, case: Case) -> str:
    """A shape error: on a non-square image, first see whether square images work."""
    return _square_probe(run, patchify, case, raised=True) or _patchify_tip(None, case)


def check_patchify(patchify, hidden: bool = False) -> None:
    """Check ``patchify(images, patch_size)``: (B, C, H, W) -> (B, N, C*P*P)."""
    __tracebackhide__ = True
    forbidden = [Forbidden("transformer_lab's reference patchify", function=_vit.patchify)]
    run = Runner(
        "check_patchify",
        patchify,
        forbidden,
        hidden,
        _hint("patchify(images, patch_size)", lambda exc, case: _crash_tip(run, patchify, case)),
    )
    for case in _patchify_cases(hidden):
        x, P = case.data["x"], case.data["P"]
        B, C, H, W = x.shape
        N = (H // P) * (W // P)

        def shape_hint(got: tuple, N=N, C=C, P=P) -> str | None:
            if got == (B, C * P * P, N) and N != C * P * P:
                return "that is (B, C*P*P, N): the patches should be the rows, transpose the last two axes"
            if len(got) == 3 and got[0] == B and got[1] > N:
                return f"N should be (H/P)(W/P) = {N}: patches must not overlap (stride = P)"
            if (found := _grid_shape_hint(got, x, P)) is not None:
                return found
            if got == (N, B, C * P * P) and N != B:
                return (
                    "that is (N, B, C*P*P): the patches are stacked on dim 0, in front of the batch; "
                    "stack them on dim 1 (or transpose dims 0 and 1) to get (B, N, C*P*P)"
                )
            return None

        expected = _vit.patchify(x, P)
        out = run.expect_tensor(
            run.call(case), case, expected.shape, x.dtype, "patches", shape_hint
        )
        if not run.close(out, expected, 0.0, 0.0):
            message = run.diagnose(out, _patchify_mistakes(x, P), 0.0, 0.0)
            message = message or _square_probe(run, patchify, case)
            if message:
                run.fail(message, case)
            case.data["axes"] = ("batch element", "patch", "feature")
            run.explain(out, expected, case, (), 0.0, 0.0, what="patches")
    # P's digits appear in neither side, so a message that omits P (or the size) is caught
    for (H, W), side in (((6, 8), "height"), ((8, 6), "width")):
        x = torch.zeros(1, 1, H, W)
        bad = Case(
            f"an image of {H} x {W} with P=4", (x, 4), {}, f"images (1, 1, {H}, {W}), patch_size=4"
        )
        _expect_value_error(
            run,
            lambda x=x: patchify(x.clone(), 4),
            bad,
            ["6", "4"],
            f"an image whose {side} is not a multiple of P",
        )
    run.passed()


register(
    Exercise(
        "patchify",
        "08_vision_transformer",
        "patchify(images, patch_size) -> (B, N, C*P*P)",
        cells=(Cell("patchify_tests", "patchify", 2),),
        check=check_patchify,
        reference=_vit.patchify,
    )
)
