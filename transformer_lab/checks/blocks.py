"""Checks for notebook 5: layer normalisation.

Student-facing signature:

    layer_norm(x, weight, bias, eps=1e-5) -> x's shape
        statistics over the last dimension (the C features of each token), biased variance
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab import blocks as _ref
from transformer_lab.checks._core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks._guards import Forbidden
from transformer_lab.checks.attention import _signature_hint

__all__ = ["check_layer_norm"]

ATOL, RTOL = 1e-5, 1e-4


def _ln(
    x: Tensor,
    w: Tensor,
    b: Tensor,
    eps: float,
    *,
    dims=(-1,),
    unbiased=False,
    eps_outside=False,
    swap=False,
    affine=True,
    center=True,
) -> Tensor:
    """Layer norm with one deliberate mistake switched on."""
    mean = x.mean(dim=dims, keepdim=True)
    var = x.var(dim=dims, keepdim=True, unbiased=unbiased)
    centred = x - mean if center else x
    y = centred / (var.sqrt() + eps) if eps_outside else centred / torch.sqrt(var + eps)
    if not affine:
        return y
    return y * b + w if swap else y * w + b


def _mistakes(x: Tensor, w: Tensor, b: Tensor, eps: float) -> list[Mistake]:
    L = lambda msg, **kw: Mistake(msg, lambda: _ln(x, w, b, eps, **kw))  # noqa: E731
    out = [
        L(
            "the variance is unbiased (divides by C - 1); layer norm uses the biased variance: "
            "x.var(dim=-1, unbiased=False, keepdim=True), i.e. the mean of (x - mean)**2",
            unbiased=True,
        ),
        L(
            "eps is added to the standard deviation; add it to the variance: (x - mean) / sqrt(var + eps)",
            eps_outside=True,
        ),
        L(
            "weight and bias are swapped: y = x_hat * weight + bias (weight is the gain, bias the shift)",
            swap=True,
        ),
        L("weight and bias are not applied: y = x_hat * weight + bias", affine=False),
        L("the mean is not subtracted: x_hat = (x - mean) / sqrt(var + eps)", center=False),
    ]
    for d in range(x.dim() - 1):
        out.append(
            L(
                f"the statistics are taken over dimension {d}; layer norm normalises each token over its "
                f"C features, the last dimension (dim=-1, keepdim=True)",
                dims=(d,),
            )
        )
    out.append(
        L(
            "the statistics are taken over all dimensions at once; layer norm uses only the last one "
            "(each token's C features), dim=-1 with keepdim=True",
            dims=tuple(range(x.dim())),
        )
    )
    out.append(
        L("the variance is unbiased and taken over the wrong dimension", dims=(0,), unbiased=True)
    )
    return out


def check_layer_norm(layer_norm, hidden: bool = False) -> None:
    """Check ``layer_norm(x, weight, bias, eps=1e-5)`` against the package's reference."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    forbidden = [
        Forbidden("transformer_lab's reference layer_norm", function=_ref.layer_norm),
        Forbidden("transformer_lab's LayerNorm", function=_ref.LayerNorm.forward),
        Forbidden(
            "PyTorch's built-in layer norm (F.layer_norm, nn.LayerNorm)",
            codes={F.layer_norm.__code__, nn.LayerNorm.forward.__code__},
            builtin_names=("layer_norm", "native_layer_norm", "group_norm", "rms_norm"),
        ),
    ]
    run = Runner(
        "check_layer_norm",
        layer_norm,
        forbidden,
        hidden,
        lambda e, c: _signature_hint(e, "layer_norm(x, weight, bias, eps=1e-5)"),
    )
    g = generator(9808 if hidden else 808)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    specs = [
        ("tokens (B, T, C)", r(2, 3, 8) * 2 + 1, r(8), r(8), None),
        ("a matrix (T, C)", r(4, 6), torch.ones(6), torch.zeros(6), None),
        ("C = 2", r(3, 2), r(2), r(2), None),
        ("small variance, eps=1e-2", r(2, 5, 4) * 0.05, r(4), r(4), 1e-2),
    ]
    if hidden:
        specs += [
            ("4-D input", r(2, 2, 3, 16) * 3 - 2, r(16), r(16), None),
            ("one token", r(1, 1, 5), r(5), r(5), 1e-3),
        ]
    for name, x, w, b, eps in specs:
        kwargs = {} if eps is None else {"eps": eps}
        case = Case(name, (x, w, b), kwargs, describe_args(x=x, weight=w, bias=b, eps=eps))
        expected = _ref.layer_norm(x, w, b, 1e-5 if eps is None else eps)
        out = run.expect_tensor(
            run.call(case),
            case,
            expected.shape,
            expected.dtype,
            shape_hint=lambda got: "return the normalised tensor, same shape as x",
        )
        if not run.close(out, expected, ATOL, RTOL):
            message = run.diagnose(
                out, _mistakes(x, w, b, 1e-5 if eps is None else eps), ATOL, RTOL
            )
            run.fail(message or run.mismatch(out, expected), case)
    run.passed()
