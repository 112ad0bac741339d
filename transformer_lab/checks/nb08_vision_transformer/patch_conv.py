"""Checks for notebook 8, part 1b: the patch embedding as a convolution.

linear_to_conv(linear, patch_size, n_channels) -> nn.Conv2d computing the same patch embedding
"""

from __future__ import annotations

import torch
from torch import nn

from transformer_lab.checks.engine.core import Case, Runner, generator
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.nb08_vision_transformer.exercise_hints import _conv_tip, _hint
from transformer_lab.checks.registry import Cell, Exercise, register
from transformer_lab.models import vit as _vit

__all__ = ["check_linear_to_conv"]


# ---------------------------------------------------------------------------------------------
# the patch embedding as a convolution
def _same_storage(a, b) -> bool:
    try:
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    except (AttributeError, RuntimeError):
        return False


def _linear_changed(linear: nn.Linear, before: tuple) -> str:
    """What the student's function did to ``linear``, which must be left unchanged."""
    weight = linear.weight
    if tuple(weight.shape) != tuple(before[0].shape):
        return (
            f"your function changed the Linear layer in place: its weight is now "
            f"{tuple(weight.shape)}, not {tuple(before[0].shape)} (an assignment to "
            f"linear.weight or .data); leave linear unchanged and copy a view of its weight "
            f"into the Conv2d: conv.weight.copy_(linear.weight.view(...))."
        )
    return (
        "your function changed the Linear layer's weights (modified in place); leave linear "
        "unchanged and copy its weights into the Conv2d instead."
    )


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
            run.fail(_linear_changed(linear, before), case)
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


register(
    Exercise(
        "linear_to_conv",
        "08_vision_transformer",
        "linear_to_conv(linear, patch_size, n_channels) -> nn.Conv2d",
        cells=(Cell("linear_to_conv_tests", "linear_to_conv", 2),),
        check=check_linear_to_conv,
        against="the linear layer on transformer_lab.models.vit.patchify's patches",
    )
)
