"""Check for notebook 05: the position-wise MLP.

mlp(x, w_1, b_1, w_2, b_2) -> x's shape
    GELU(x W_1 + b_1) W_2 + b_2, row vectors: w_1 (C, d_ff), w_2 (d_ff, C)
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab import blocks as _ref
from transformer_lab.checks.engine.core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks.engine.fallback import verdict
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.leading_dims import runs_with_other_leading_dims
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint
from transformer_lab.checks.nb05_transformer_block.blocks import ATOL, RTOL
from transformer_lab.checks.nb05_transformer_block.blocks_evidence import (
    activation_probe,
    bias_probe,
    mixing,
    repeatable,
    unused_weight,
)
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_mlp"]


# ---------------------------------------------------------------------------------------------
# the position-wise MLP
def _gelu_sigmoid(h: Tensor) -> Tensor:
    return h * torch.sigmoid(1.702 * h)


def _mlp_mistakes(x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor) -> list[Mistake]:
    gelu = F.gelu
    M = Mistake
    return [
        M(
            "you used ReLU; this MLP uses GELU (exact: F.gelu(h), i.e. h * Phi(h)), as in BERT and ViT",
            lambda: F.relu(x @ w1 + b1) @ w2 + b2,
        ),
        M(
            "you used the tanh approximation of GELU (GPT-2's); this exercise uses the exact GELU, "
            "F.gelu(h) = 0.5 * h * (1 + erf(h / sqrt(2)))",
            lambda: F.gelu(x @ w1 + b1, approximate="tanh") @ w2 + b2,
        ),
        M(
            "you used the sigmoid approximation h * sigmoid(1.702 h) of GELU; use the exact GELU, "
            "F.gelu(h) = 0.5 * h * (1 + erf(h / sqrt(2)))",
            lambda: _gelu_sigmoid(x @ w1 + b1) @ w2 + b2,
        ),
        M(
            "you used SiLU/swish (h * sigmoid(h)); this MLP uses GELU: F.gelu(h)",
            lambda: F.silu(x @ w1 + b1) @ w2 + b2,
        ),
        M(
            "there is no activation between the two layers: without it the MLP is one linear map; "
            "apply GELU to x W_1 + b_1",
            lambda: (x @ w1 + b1) @ w2 + b2,
        ),
        M(
            "GELU is also applied after the second layer; the output is GELU(x W_1 + b_1) W_2 + b_2, "
            "with no activation at the end",
            lambda: gelu(gelu(x @ w1 + b1) @ w2 + b2),
        ),
        M(
            "the activation comes before the first layer; it goes between the two: "
            "GELU(x W_1 + b_1) W_2 + b_2",
            lambda: (gelu(x) @ w1 + b1) @ w2 + b2,
        ),
        M("b_1 is not added: GELU(x W_1 + b_1) W_2 + b_2", lambda: gelu(x @ w1) @ w2 + b2),
        M("b_2 is not added: GELU(x W_1 + b_1) W_2 + b_2", lambda: gelu(x @ w1 + b1) @ w2),
        M("neither bias is added: GELU(x W_1 + b_1) W_2 + b_2", lambda: gelu(x @ w1) @ w2),
        M(
            "b_1 is added after the activation; it belongs inside: GELU(x W_1 + b_1)",
            lambda: (gelu(x @ w1) + b1) @ w2 + b2,
        ),
        M(
            "w_1 and w_2 are swapped (and transposed to fit): the first layer is x @ w_1 + b_1 "
            "with w_1 of shape (C, d_ff), the second h @ w_2 + b_2 with w_2 of shape (d_ff, C)",
            lambda: gelu(x @ w2.T + b1) @ w1.T + b2,
        ),
        M(
            "the input x is added to the output: the residual connection belongs to the block "
            "(exercise 3), the MLP returns GELU(x W_1 + b_1) W_2 + b_2 only",
            lambda: x + gelu(x @ w1 + b1) @ w2 + b2,
        ),
    ]


def _mlp_error_hint(exc: BaseException, case: Case) -> str:
    text = str(exc)
    if "cannot be multiplied" in text or "size of tensor" in text or "shape" in text:
        return (
            "the course uses row vectors: x (..., C) @ w_1 (C, d_ff) @ w_2 (d_ff, C); no transposes"
        )
    return _signature_hint(exc, "mlp(x, w_1, b_1, w_2, b_2)")


def _leading_dims_hint(run: Runner, exc: BaseException, case: Case) -> str:
    """The MLP crashes on x of this shape but runs once x has another number of leading dims:
    it assumes a fixed layout ((B, T, C) or (T, C)) instead of (..., C)."""
    dims = runs_with_other_leading_dims(run, exc, case, core=1, only=(0,))
    if dims is None:
        return ""
    return (
        f"your function runs on a {dims}-D x but fails on x of shape "
        f"{tuple(case.args[0].shape)}: x is (..., C), any number of leading dimensions; do not "
        f"unpack x.shape into a fixed B, T, C (read C from x.shape[-1]; x @ w acts on the "
        f"last dimension whatever the leading ones)"
    )


def check_mlp(mlp, hidden: bool = False) -> None:
    """Check ``mlp(x, w_1, b_1, w_2, b_2) = GELU(x W_1 + b_1) W_2 + b_2`` against
    ``torch.nn.Sequential(Linear, GELU, Linear)`` with the same weights, and that it works on each
    token alone (permuting tokens permutes the output; changing one token changes one row)."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    forbidden = [
        Forbidden("transformer_lab's FeedForward", function=_ref.FeedForward.forward),
        Forbidden(
            "PyTorch's TransformerEncoderLayer feed-forward block",
            codes={nn.TransformerEncoderLayer._ff_block.__code__},
        ),
    ]
    run = Runner(
        "check_mlp",
        mlp,
        forbidden,
        hidden,
        lambda e, c: _leading_dims_hint(run, e, c) or _mlp_error_hint(e, c),
    )
    g = generator(9505 if hidden else 505)
    shapes = [((2, 5, 6), 24), ((4, 8), 32), ((1, 1, 4), 16), ((3, 6, 8), 20)]
    if hidden:
        shapes += [((2, 3, 4, 12), 48), ((5, 10), 7), ((2, 7, 16), 64)]
    for shape, d_ff in shapes:
        C = shape[-1]
        x = torch.randn(*shape, generator=g) * 1.5
        w1 = torch.randn(C, d_ff, generator=g) / math.sqrt(C)
        b1 = torch.randn(d_ff, generator=g) * 0.5
        w2 = torch.randn(d_ff, C, generator=g) / math.sqrt(d_ff)
        b2 = torch.randn(C, generator=g) * 0.5
        with torch.random.fork_rng(devices=[]):  # building nn.Linear draws from the global RNG
            torch_mlp = nn.Sequential(nn.Linear(C, d_ff), nn.GELU(), nn.Linear(d_ff, C))
        with torch.no_grad():  # nn.Linear stores W as (out, in): our row-vector W transposed
            torch_mlp[0].weight.copy_(w1.T)
            torch_mlp[0].bias.copy_(b1)
            torch_mlp[2].weight.copy_(w2.T)
            torch_mlp[2].bias.copy_(b2)
            expected = torch_mlp(x)
        case = Case(
            f"x {tuple(shape)}, d_ff={d_ff}",
            (x, w1, b1, w2, b2),
            {},
            describe_args(x=x, w_1=w1, b_1=b1, w_2=w2, b_2=b2),
        )
        out = run.expect_tensor(
            run.call(case),
            case,
            expected.shape,
            expected.dtype,
            shape_hint=lambda got: "the MLP maps every token's C features back to C features",
        )
        if not run.close(out, expected, ATOL, RTOL):
            message = run.diagnose(out, _mlp_mistakes(x, w1, b1, w2, b2), ATOL, RTOL)
            message = message or repeatable(run, case, out) or mixing(run, case, out)
            message = message or bias_probe(run, case)
            message = message or unused_weight(run, case)
            dims = {"C": C, "d_ff": d_ff}
            if message is None and not verdict(None, out, expected, dims=dims)[1]:
                message = activation_probe(run)  # after the generic evidence, which may name it
            message, named = verdict(message, out, expected, dims=dims)
            run.fail(message, case, named=named)
        if x.dim() >= 2 and x.shape[-2] > 1:  # position-wise: tokens do not talk to each other
            T = x.shape[-2]
            perm = torch.randperm(T, generator=g)
            changed = x.clone()
            changed[..., 0, :] = changed[..., 0, :] + 1.0
            for label, inp, want in [
                ("tokens permuted", x[..., perm, :], expected[..., perm, :]),
                ("token 0 changed", changed, None),
            ]:
                sub = Case(f"{case.name}, {label}", (inp, w1, b1, w2, b2), {}, case.describe)
                got = run.expect_tensor(run.call(sub), sub, expected.shape, expected.dtype)
                if want is not None and not run.close(got, want, ATOL, RTOL):
                    run.fail(
                        "permuting the tokens did not permute the output the same way: the MLP "
                        "must act on each token (row) separately, with no mixing across tokens",
                        sub,
                    )
                if want is None and not run.close(got[..., 1:, :], out[..., 1:, :], ATOL, RTOL):
                    run.fail(
                        "changing token 0 changed other tokens' outputs: the MLP must act on "
                        "each token separately (mixing tokens is attention's job)",
                        sub,
                    )
    run.passed()


register(
    Exercise(
        "mlp",
        "05_transformer_block",
        "mlp(x, w_1, b_1, w_2, b_2) -> (..., C)",
        cells=(Cell("mlp_tests", "mlp", 2),),
        check=check_mlp,
        against="torch's Linear, GELU, Linear",
    )
)
