"""Check for notebook 05: layer norm (the position-wise MLP is checked in mlp.py).

Student-facing signature:

    layer_norm(x, gain, bias, eps=1e-5) -> x's shape
        statistics over the last dimension (the C features of each token), biased variance

The blocks (residual connections, pre- and post-norm, the decoder block) and the parameter
count are checked in :mod:`transformer_lab.checks.nb05_transformer_block.residual`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab import blocks as _ref
from transformer_lab.checks.engine.core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks.engine.fallback import verdict
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.precision import float32_inside
from transformer_lab.checks.nb05_transformer_block.blocks_evidence import (
    affine_probe,
    ln_error_hint,
    ln_evidence,
)
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_layer_norm"]


ATOL, RTOL = 1e-5, 1e-4


# ---------------------------------------------------------------------------------------------
# layer norm
def _ln(
    x: Tensor,
    g: Tensor,
    b: Tensor,
    eps: float,
    *,
    dims=(-1,),
    unbiased=False,
    eps_outside=False,
    swap=False,
    gain=True,
    shift=True,
    center=True,
    l2=False,
) -> Tensor:
    """Layer norm with one deliberate mistake switched on."""
    mean = x.mean(dim=dims, keepdim=True)
    centred = x - mean if center else x
    if l2:  # divide by the vector's length instead of its standard deviation
        y = centred / torch.sqrt((centred**2).sum(dim=dims, keepdim=True) + eps)
    else:
        var = x.var(dim=dims, keepdim=True, unbiased=unbiased)
        if not center:  # RMS norm: the mean square, not the variance
            var = (x**2).mean(dim=dims, keepdim=True)
        y = centred / (var.sqrt() + eps) if eps_outside else centred / torch.sqrt(var + eps)
    if swap:
        return y * b + g
    return y * (g if gain else 1.0) + (b if shift else 0.0)


def _axis_name(d: int, ndim: int) -> str:
    if ndim == 2:
        return "the tokens" if d == 0 else "?"
    names = {0: "the batch", ndim - 2: "the tokens"}
    return names.get(d, "a leading axis")


def _ln_mistakes(x: Tensor, g: Tensor, b: Tensor, eps: float) -> list[Mistake]:
    L = lambda msg, **kw: Mistake(msg, lambda: _ln(x, g, b, eps, **kw))  # noqa: E731
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
            "gain and bias are swapped: y = x_hat * gain + bias (the gain scales, the bias shifts)",
            swap=True,
        ),
        L("gain and bias are not applied: y = x_hat * gain + bias", gain=False, shift=False),
        L("the gain is not applied: y = x_hat * gain + bias", gain=False),
        L("the bias is not added: y = x_hat * gain + bias", shift=False),
        L(
            "the mean is not subtracted (that is RMS norm): x_hat = (x - mean) / sqrt(var + eps)",
            center=False,
        ),
        L(
            "you divided by the length (L2 norm) of the centred vector, which is sqrt(C) times its "
            "standard deviation; divide by sqrt(var + eps) with var the mean of (x - mean)**2",
            l2=True,
        ),
    ]
    if eps != 1e-5:
        out.append(
            Mistake(
                f"the eps argument is ignored: this case passes eps={eps:g}, use it in sqrt(var + eps)",
                lambda: _ln(x, g, b, 1e-5),
            )
        )
    out.append(
        Mistake(
            "eps is missing: divide by sqrt(var + eps), not sqrt(var) (eps keeps a constant token finite)",
            lambda: _ln(x, g, b, 0.0),
        )
    )
    for d in range(x.dim() - 1):
        out.append(
            L(
                f"the statistics are taken over dimension {d} ({_axis_name(d, x.dim())}); layer norm "
                f"normalises each token over its own C features, the last dimension (dim=-1, keepdim=True)",
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
    if x.dim() == 3:
        out.append(
            L(
                "the statistics are taken over the tokens and the features of each sequence (dims "
                "1 and 2); layer norm normalises each token separately: dim=-1 only",
                dims=(1, 2),
            )
        )
    out.append(
        L("the variance is unbiased and taken over the wrong dimension", dims=(0,), unbiased=True)
    )
    return out


def check_layer_norm(layer_norm, hidden: bool = False) -> None:
    """Check ``layer_norm(x, gain, bias, eps=1e-5)`` against ``torch.nn.functional.layer_norm``."""
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
        ln_error_hint,
    )
    g = generator(9808 if hidden else 808)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    specs = [
        ("tokens (B, T, C)", r(2, 3, 8) * 2 + 1, 1 + 0.5 * r(8), r(8), None),
        ("a matrix (T, C)", r(4, 6), torch.ones(6), torch.zeros(6), None),
        ("C = 2", r(3, 2), r(2), r(2), None),
        ("small variance, eps=1e-2", r(2, 5, 4) * 0.05, r(4), r(4), 1e-2),
        ("a constant token", torch.full((1, 2, 6), 3.0), r(6), r(6), None),
    ]
    if hidden:
        specs += [
            ("4-D input", r(2, 2, 3, 16) * 3 - 2, r(16), r(16), None),
            ("one token", r(1, 1, 5), r(5), r(5), 1e-3),
            ("an offset of 10", r(3, 4, 12) + 10.0, r(12), r(12), None),
        ]
    # float64 in, float64 out: the statistics keep the input's precision (no .float())
    specs.append(
        ("float64 tokens", r(2, 3, 8).double() * 3 - 1, r(8).double(), r(8).double(), None)
    )
    for name, x, w, b, eps in specs:
        kwargs = {} if eps is None else {"eps": eps}
        e = 1e-5 if eps is None else eps
        case = Case(name, (x, w, b), kwargs, describe_args(x=x, gain=w, bias=b, eps=eps))
        expected = F.layer_norm(x, x.shape[-1:], w, b, e)
        out = run.expect_tensor(
            run.call(case),
            case,
            expected.shape,
            expected.dtype,
            shape_hint=lambda got: "return the normalised tensor, same shape as x",
        )
        if run.close(out, expected, ATOL, RTOL) and float32_inside(out, expected):
            run.fail(float32_inside(out, expected), case)
        if not run.close(out, expected, ATOL, RTOL):
            message = run.diagnose(out, _ln_mistakes(x, w, b, e), ATOL, RTOL)
            message = message or ln_evidence(out, x, w, b, e) or affine_probe(run, case, x, e)
            message, named = verdict(message, out, expected, dims={"C": x.shape[-1]})
            run.fail(message, case, named=named)
    run.passed()


register(
    Exercise(
        "layer_norm",
        "05_transformer_block",
        "layer_norm(x, gain, bias, eps=1e-5) -> x's shape",
        cells=(Cell("layer_norm_tests", "layer_norm", 2),),
        check=check_layer_norm,
        against="torch.nn.functional.layer_norm",
    )
)
