"""Checks for notebook 8, part 1: an image as a sequence of patches.

patchify(images, patch_size) -> (B, N, C*P*P), patches row by row, features (channel, row, column)
linear_to_conv(linear, patch_size, n_channels) -> nn.Conv2d computing the same patch embedding
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from transformer_lab.checks._core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks._integrity import TRUSTED, Forbidden
from transformer_lab.checks.softmax import signature_hint
from transformer_lab.models import vit as _vit

__all__ = ["check_patchify", "check_linear_to_conv"]


def _hint(expected: str, shape_tip=None):
    """Hints for an exception of the student's code. ``shape_tip(exc, case)``: what to check
    when a shape error is raised (each exercise has its own shapes; None: no hint)."""

    def hint(exc: BaseException, case: Case) -> str:
        text = str(exc)
        if signature_hint(exc, expected):
            return signature_hint(exc, expected)
        shape_error = isinstance(exc, RuntimeError) and (
            "shape" in text or "size" in text or "must match" in text or "multiplied" in text
        )
        if shape_error and shape_tip is not None:
            return shape_tip(exc, case) or ""
        return ""

    return hint


def _patchify_tip(exc: BaseException, case: Case) -> str:
    return "check each reshape against the shape comments: (B, C, H/P, P, W/P, P) first"


def _embed_tip(exc: BaseException, case: Case) -> str:
    text = str(exc)
    if "Sizes of tensors must match" in text or "Tensors must have same number of dim" in text:
        return "the pieces you concatenate differ in shape: expand cls_token to (B, 1, C)"
    if "cannot be multiplied" in text:
        return (
            "w_e is (C_in, C) in the course's row convention: compute patches @ w_e (F.linear "
            "would transpose it)"
        )
    return "check each shape: patchify gives (B, N, C_in), @ w_e (B, N, C), [CLS] (B, 1, C), pos (N + 1, C)"


def _conv_tip(exc: BaseException, case: Case) -> str:
    P, ch, C = case.data["P"], case.data["ch"], case.data["C"]
    return (
        f"the convolution is nn.Conv2d(n_channels, C, kernel_size=patch_size, stride=patch_size) "
        f"= Conv2d({ch}, {C}, kernel_size={P}, stride={P}); its weight has shape ({C}, {ch}, {P}, "
        f"{P}) (out_channels, in_channels, P, P): view linear.weight as that"
    )


def _expect_value_error(run: Runner, call, case: Case, must_name: list[str], what: str) -> None:
    """The text asks for a ValueError whose message names ``must_name``; fail clearly otherwise."""
    __tracebackhide__ = True
    try:
        call()
    except ValueError as exc:
        missing = [word for word in must_name if word not in str(exc)]
        if missing:
            run.fail(
                f"{what}: your ValueError is right, but its message should name {must_name} "
                f"(the values received); yours says {str(exc)!r}.",
                case,
            )
        return
    except Exception as exc:  # the wrong kind of error, e.g. torch's RuntimeError from a reshape
        run.fail(
            f"{what}: expected a ValueError naming {must_name}, but your function raised "
            f"{type(exc).__name__}: {str(exc).strip()[:120]}. Check the sizes first and raise "
            f"ValueError yourself.",
            case,
        )
    run.fail(f"{what}: expected a ValueError naming {must_name}, but nothing was raised.", case)


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
    ]


def _square_probe(run: Runner, patchify, case: Case) -> str | None:
    """On a non-square image: is the student's function right on a square one? Then the bug
    depends on H != W (height and width mixed up somewhere)."""
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
            return (
                f"right on square images but wrong on this {H} x {W} one: the height and width "
                f"(H/P and W/P) are mixed up somewhere; the grid has H/P = {H // P} rows of "
                f"W/P = {W // P} patches"
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


def check_patchify(patchify, hidden: bool = False) -> None:
    """Check ``patchify(images, patch_size)``: (B, C, H, W) -> (B, N, C*P*P)."""
    __tracebackhide__ = True
    forbidden = [Forbidden("transformer_lab's reference patchify", function=_vit.patchify)]
    run = Runner(
        "check_patchify",
        patchify,
        forbidden,
        hidden,
        _hint("patchify(images, patch_size)", _patchify_tip),
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
    x = torch.zeros(1, 1, 6, 4)
    bad = Case("an image of 6 x 4 with P=4", (x, 4), {}, "images (1, 1, 6, 4), patch_size=4")
    _expect_value_error(
        run,
        lambda: patchify(x.clone(), 4),
        bad,
        ["6", "4"],
        "an image whose height is not a multiple of P",
    )
    run.passed()


# ---------------------------------------------------------------------------------------------
# the patch embedding as a convolution
def _same_storage(a, b) -> bool:
    try:
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    except (AttributeError, RuntimeError):
        return False


def _conv_cases(hidden: bool) -> list[Case]:
    g = generator(9802 if hidden else 802)
    specs = [(2, 3, 6), (4, 1, 8), (3, 2, 5)] + ([(5, 3, 7), (2, 4, 12)] if hidden else [])
    cases = []
    for P, ch, C in specs:
        linear = nn.Linear(ch * P * P, C)
        with torch.no_grad():
            linear.weight.copy_(torch.randn(C, ch * P * P, generator=g))
            linear.bias.copy_(torch.randn(C, generator=g))
        x = torch.randn(2, ch, 3 * P, 2 * P, generator=g)
        case = Case(
            f"P={P}, channels={ch}, C={C}", (linear, P, ch), {}, f"Linear({ch * P * P}, {C}), P={P}"
        )
        case.data.update(x=x, P=P, ch=ch, C=C, linear=linear)
        cases.append(case)
    return cases


def check_linear_to_conv(linear_to_conv, hidden: bool = False) -> None:
    """Check ``linear_to_conv(linear, patch_size, n_channels)`` -> an equivalent ``nn.Conv2d``."""
    __tracebackhide__ = True
    run = Runner(
        "check_linear_to_conv",
        linear_to_conv,
        [
            Forbidden(
                "transformer_lab's PatchEmbedding.to_conv2d", function=_vit.PatchEmbedding.to_conv2d
            )
        ],
        hidden,
        _hint("linear_to_conv(linear, patch_size, n_channels)", _conv_tip),
    )
    for case in _conv_cases(hidden):
        x, P, ch, C, linear = (case.data[k] for k in ("x", "P", "ch", "C", "linear"))
        before = linear.weight.detach().clone(), linear.bias.detach().clone()
        conv = run.call(case)
        if conv is None:
            run.fail("your function returned None: did you forget `return conv`?", case)
        if not isinstance(conv, nn.Conv2d):
            run.fail(
                f"expected an nn.Conv2d, but your function returned a {type(conv).__name__}.", case
            )
        if not (TRUSTED.equal(linear.weight, before[0]) and TRUSTED.equal(linear.bias, before[1])):
            run.fail(
                "your function changed the Linear layer's weights; copy them into the Conv2d instead.",
                case,
            )
        kernel, stride = tuple(conv.kernel_size), tuple(conv.stride)
        if (conv.in_channels, conv.out_channels) != (ch, C):
            run.fail(
                f"the convolution should map {ch} image channels to C={C} features, but yours maps "
                f"{conv.in_channels} to {conv.out_channels}.",
                case,
            )
        if kernel != (P, P):
            run.fail(f"the kernel should be P x P = {P} x {P}, but yours is {kernel}.", case)
        if stride != (P, P):
            run.fail(
                f"the stride should equal the patch size ({P}) so patches do not overlap, but yours "
                f"is {stride}.",
                case,
            )
        if tuple(conv.padding) != (0, 0) or tuple(conv.dilation) != (1, 1) or conv.groups != 1:
            run.fail(
                "use no padding, no dilation and groups=1: one patch per kernel position.", case
            )
        with torch.no_grad():
            expected = linear(_vit.patchify(x, P))  # (B, N, C)
            got = conv(x).flatten(2).transpose(1, 2)  # (B, C, gh, gw) -> (B, N, C)
        if conv.bias is None:
            run.fail(
                "your Conv2d has no bias (bias=False); the Linear layer's bias must be copied too.",
                case,
            )
        if run.close(got, expected, 1e-4, 1e-4):
            shared = [
                name
                for name, mine, theirs in (("weight", conv.weight, linear.weight),
                                           ("bias", conv.bias, linear.bias))
                if mine is theirs or _same_storage(mine, theirs)
            ]  # fmt: skip
            if shared:
                run.fail(
                    f"right values, but the Conv2d's {' and '.join(shared)} share memory with the "
                    f"Linear's (a view or the same Parameter), so training one changes the other; "
                    f"copy them: conv.weight.copy_(...) under torch.no_grad().",
                    case,
                )
            continue
        w, b = linear.weight.detach(), linear.bias.detach()
        cw, cb = conv.weight.detach(), conv.bias.detach()
        right_weight = run.close(cw, w.view(C, ch, P, P), 1e-6, 1e-6)
        if right_weight:
            run.fail(
                "the weights are right but the bias is not the Linear's: copy linear.bias into "
                "conv.bias (a new Conv2d starts with a random bias).",
                case,
            )
        if not run.close(cb, b, 1e-6, 1e-6):
            run.fail(
                "neither the weight nor the bias is the Linear's: copy linear.weight (viewed as "
                "(C, channels, P, P)) and linear.bias into the Conv2d, under torch.no_grad().",
                case,
            )
        candidates = [
            (
                w.view(C, P, P, ch).permute(0, 3, 1, 2),
                "the weight is read as (C, P, P, channels); a flattened patch runs (channel, row, "
                "column), so view it as (C, channels, P, P)",
            ),
            (
                w.view(C, ch, P, P).transpose(2, 3),
                "each kernel is transposed (rows and columns swapped): view the weight as "
                "(C, channels, P, P) without transposing",
            ),
            (
                w.T.reshape(C, ch, P, P),
                "the weight was transposed before reshaping: nn.Linear already stores it as "
                "(out, in) = (C, channels*P*P), the layout Conv2d wants; view it as (C, channels, P, P)",
            ),
        ]
        kernel = w.view(C, ch, P, P)
        candidates += [
            (kernel.flip(-1, -2), "each kernel is flipped (rotated by 180 degrees): Conv2d does not "
             "flip its kernel (it computes a correlation), so copy the weight without flipping"),
            (kernel.flip(-1), "each kernel is mirrored left-right (flipped along its columns): copy "
             "the weight without flipping"),
            (kernel.flip(-2), "each kernel is flipped upside down (along its rows): copy the weight "
             "without flipping"),
        ]  # fmt: skip
        for candidate, message in candidates:
            if run.close(cw, candidate, 1e-6, 1e-6):
                run.fail(message + ".", case)
        if cw.shape == kernel.shape and run.close(
            cw.flatten(1).sort(-1).values, kernel.flatten(1).sort(-1).values, 1e-6, 1e-6
        ):
            run.fail(
                "each output feature's kernel holds the right numbers of the Linear's row, but in "
                "other places (a transpose, permute or flip): view linear.weight as (C, channels, "
                "P, P) without moving anything.",
                case,
            )
        run.fail(
            "the bias is right but the weight is not the Linear's weight viewed as (C, channels, P, "
            "P): " + run.mismatch(cw, kernel, "kernel"),
            case,
            named=False,
        )
    run.passed()
