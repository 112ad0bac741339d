"""The attention core the attention checks share (scaled dot-product, self-, cross- and
multi-head attention): what the student may not call, attention with one deliberate mistake,
the catalogue of the core's mistakes, fully masked rows, and comparing (out, weights)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab import attention as _ref
from transformer_lab import heads as _heads
from transformer_lab.checks.engine.core import Mistake
from transformer_lab.checks.engine.diagnose import softmax_zeros
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.engine.messages import signature_hint

ATOL, RTOL = 1e-5, 1e-4


def attention_forbidden() -> list[Forbidden]:
    return [
        Forbidden(
            "transformer_lab's reference scaled_dot_product_attention",
            function=_ref.scaled_dot_product_attention,
        ),
        Forbidden("transformer_lab's SelfAttention", function=_ref.SelfAttention.forward),
        Forbidden(
            "transformer_lab's MultiHeadAttention", function=_heads.MultiHeadAttention.forward
        ),
        Forbidden(
            "PyTorch's built-in attention (F.scaled_dot_product_attention, nn.MultiheadAttention)",
            codes={F.multi_head_attention_forward.__code__, nn.MultiheadAttention.forward.__code__},
            builtin_names=("scaled_dot_product_attention", "_scaled_dot_product_attention_math"),
        ),
    ]


def attend(
    q, k, v, mask=None, sm=softmax_zeros, *, scale=None, mask_mode="before", keys="mT", dim=-1
):
    """Attention with exactly one deliberate mistake switched on (for diagnosis).

    ``scale`` divides the scores (default sqrt(D)); ``sm`` is the softmax the mistake is built on.
    """
    kt = {
        "mT": lambda: k.transpose(-2, -1),
        "none": lambda: k,
        "T": lambda: k.permute(*reversed(range(k.dim()))),
        "12": lambda: k.transpose(1, 2),
    }[keys]()
    scores = q @ kt / (math.sqrt(q.shape[-1]) if scale is None else scale)  # (..., T, S)
    if mask is not None:
        fill = {"before": ~mask, "reversed": mask, "zero": ~mask, "1e9": ~mask}.get(mask_mode)
        value = {"zero": 0.0, "1e9": -1e9}.get(mask_mode, float("-inf"))
        if fill is not None:
            scores = scores.masked_fill(fill, value)
    weights = sm(scores, dim=dim)
    if mask is not None and mask_mode == "after":
        weights = weights * mask
    return weights @ v, weights


def _added_mask(q, k, v, mask, sm):
    """Attention with the boolean mask added to the scores as 0/1 (a mistake)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) + mask.to(q.dtype)
    weights = sm(scores, dim=-1)
    return weights @ v, weights


def _naive_softmax(x: Tensor, dim: int = -1) -> Tensor:
    return torch.exp(x) / torch.exp(x).sum(dim=dim, keepdim=True)


def attention_mistakes(q, k, v, mask, widths: dict[str, tuple[float, str]]) -> list[Mistake]:
    """Mistakes of the attention core, on the student's projections ``q, k, v``.

    ``widths``: other numbers a student may have scaled by, {name: (value, description)}.
    """
    d = q.shape[-1]

    def a(**kw) -> Mistake:
        return lambda sm: attend(q, k, v, mask, sm, **kw)

    out = [
        Mistake(
            "the 1/sqrt(D) scaling is missing: divide the scores by sqrt(D) = "
            "sqrt(q.shape[-1]) before the softmax",
            a(scale=1.0),
            softmax=True,
        ),
        Mistake(
            "the scores are divided by D instead of sqrt(D): the scaling is 1/sqrt(d_k)",
            a(scale=float(d)),
            softmax=True,
        ),
        Mistake(
            "the scores are multiplied by sqrt(D) instead of divided by it",
            a(scale=1 / math.sqrt(d)),
            softmax=True,
        ),
    ]
    by_value: dict[float, list[tuple[str, str]]] = {}  # sizes equal on this input: named together
    for name, (value, what) in widths.items():
        if value != d:
            by_value.setdefault(value, []).append((name, what))
    for value, names in by_value.items():
        if len(names) == 1:
            ((name, what),) = names
            divisor = f"sqrt({name}) = sqrt({value:g}) ({what})"
        else:
            divisor = f"sqrt({value:g}), i.e. " + " or ".join(f"sqrt({n}) ({w})" for n, w in names)
        out.append(
            Mistake(
                f"the scores are divided by {divisor} instead of sqrt(D) = sqrt({d}) (the width "
                f"of the queries and keys)",
                a(scale=math.sqrt(value)),
                softmax=True,
            )
        )

    def scores_as_weights(scale: float) -> tuple:
        s = q @ k.transpose(-2, -1) / scale
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        return None, s

    out += [
        Mistake(
            "the returned weights are the scores before the softmax: return "
            "softmax(scores), whose rows are non-negative and sum to 1",
            lambda: scores_as_weights(math.sqrt(d)),
        ),
        Mistake(
            "the attention weights contain NaN: your softmax overflows on large scores (exp() "
            "of a score above about 88 is inf in float32, and inf/inf is NaN); subtract each "
            "row's maximum before exp()",
            lambda: attend(q, k, v, mask, _naive_softmax),
        ),
        Mistake(
            "the softmax runs over the queries (dim=-2); each query's weights over the keys "
            "(dim=-1) must sum to 1",
            a(dim=-2),
            softmax=True,
        ),
        Mistake(
            "the keys are transposed over the wrong dimensions (k.T / k.transpose(1, 2) move "
            "batch or head dimensions); use k.transpose(-2, -1)",
            a(keys="T"),
            softmax=True,
        ),
        Mistake(
            "the keys are transposed over the wrong dimensions; use k.transpose(-2, -1), which "
            "swaps only the last two",
            a(keys="12"),
            softmax=True,
        ),
    ]
    out.append(
        Mistake(
            "the 1/sqrt(D) scaling is applied to the weights after the softmax; scale the "
            "scores before it (softmax(Q K^T / sqrt(D))), so each row of weights sums to 1",
            lambda sm: (None, attend(q, k, v, mask, sm, scale=1.0)[1] / math.sqrt(d)),
            softmax=True,
        )
    )
    if mask is not None:
        out += [
            Mistake(
                "the boolean mask is added to the scores (True counts as 1): a mask is not a "
                "number to add; set the masked scores to -inf: scores.masked_fill(~mask, "
                "float('-inf'))",
                lambda sm: _added_mask(q, k, v, mask, sm),
                softmax=True,
            ),
            Mistake(
                "the mask is applied after the softmax: masked keys get weight 0 but the rows no "
                "longer sum to 1. Set masked scores to -inf *before* the softmax",
                a(mask_mode="after"),
                softmax=True,
            ),
            Mistake(
                "the mask polarity is reversed: True means 'may attend', so fill the scores where "
                "the mask is False: scores.masked_fill(~mask, float('-inf'))",
                a(mask_mode="reversed"),
                softmax=True,
            ),
            Mistake(
                "masked scores are set to 0 instead of -inf: a score of 0 still gets weight "
                "exp(0) > 0; use float('-inf')",
                a(mask_mode="zero"),
                softmax=True,
            ),
            Mistake(
                "the mask is ignored: set the scores to -inf where mask is False, before the "
                "softmax",
                a(mask_mode="none"),
                softmax=True,
            ),
        ]
        if mask.dim() == 1:  # a (S,) key mask used as a column hides queries, not keys
            out.append(
                Mistake(
                    "your (S,) key mask is applied along the queries (e.g. mask[:, None]); a key "
                    "mask must broadcast over the last axis of the (T, S) scores: use it as is "
                    "(or mask[None, :])",
                    lambda sm: attend(q, k, v, mask[:, None], sm),
                    softmax=True,
                )
            )
        elif mask.shape[-1] == mask.shape[-2] and mask.shape[-1] > 1:
            out.append(
                Mistake(
                    "your mask is transposed: its rows are queries and its columns are keys "
                    "(True = query t may attend to key s); do not transpose it",
                    lambda sm: attend(q, k, v, mask.transpose(-2, -1), sm),
                    softmax=True,
                )
            )
    return out


def empty_rows(mask: Tensor | None, shape: tuple) -> Tensor | None:
    """Bool over the rows of (..., T, S) weights: queries that may attend to no key."""
    if mask is None:
        return None
    allowed = mask.expand(shape)
    empty = ~allowed.any(dim=-1)
    return empty if empty.any() else None


def close_but_empty_rows(actual: Tensor, expected: Tensor, empty: Tensor | None) -> bool:
    """Equal outside the fully masked rows, and each such row all zeros or all NaN."""
    if empty is None or actual.shape != expected.shape:
        return False
    empty = empty.expand(actual.shape[:-1])
    if not TRUSTED.allclose(
        actual[~empty].to(expected.dtype), expected[~empty], atol=ATOL, rtol=RTOL
    ):
        return False
    rows = actual[empty]  # (n, last)
    return bool(((rows == 0).all(dim=-1) | TRUSTED.isnan(rows).all(dim=-1)).all())


def _matmul_widths(text: str) -> tuple[int, int] | None:
    """(inner width of mat1, inner width of mat2) from 'shapes cannot be multiplied (AxB and CxD)'."""
    import re

    found = re.search(r"\((\d+)x(\d+) and (\d+)x(\d+)\)", text)
    return (int(found.group(2)), int(found.group(3))) if found else None


def tensor_error_hint(exc: BaseException, expected_signature: str, C: int | None = None) -> str:
    """A hint for an exception of the student's attention code; ``C`` is the input width when
    the exercise has projections (then a product over C points at the projections)."""
    text = str(exc)
    if "must be a 3D tensor" in text:  # torch.bmm on 2-D (or 4-D) inputs
        return (
            "torch.bmm takes exactly 3-D (B, ., .) tensors; use @ (torch.matmul), which works "
            "for 2-D, batched and multi-head inputs alike"
        )
    if "masked_fill" in text or "Boolean" in text or "bool" in text or "mask" in text.lower():
        return (
            "the mask is a boolean tensor (True = may attend) that broadcasts to the scores: "
            "scores.masked_fill(~mask, float('-inf'))"
        )
    widths = _matmul_widths(text)
    if "mat1 and mat2" in text and C is not None and widths and widths[0] == C:
        return (
            "the projections are (C, D) matrices applied as x @ w (row vectors: Q = X W_q), "
            "not w @ x or x @ w.T"
        )
    if isinstance(exc, (RuntimeError, IndexError)) and any(
        w in text for w in ("size", "shape", "dimension", "multiplied", "range")
    ):
        return (
            "the scores are q @ k.transpose(-2, -1): transpose only the last two dimensions of k "
            "(k.T and k.transpose(1, 2) also move batch or head dimensions)"
        )
    return signature_hint(exc, expected_signature)


def check_attention_pair(
    run, case, out, weights, exp_out, exp_w, mask, q, k, v, widths, out_hint=None
) -> None:
    """Compare (out, weights) of one attention call; ``q, k, v`` are what the softmax saw."""
    __tracebackhide__ = True
    T, S = exp_w.shape[-2], exp_w.shape[-1]

    def weights_hint(got: tuple) -> str | None:
        if got[-2:] == (S, T) and S != T:
            return (
                "the rows are keys (the weights are transposed): one row per query, the scores "
                "are Q K^T (queries x keys), not K Q^T, and the weights are not transposed after"
            )
        return None

    weights = run.expect_tensor(
        weights, case, exp_w.shape, exp_w.dtype, "attention weights", weights_hint, exp_w
    )
    empty = empty_rows(mask, exp_w.shape)
    if not run.close(weights, exp_w, ATOL, RTOL) and not close_but_empty_rows(
        weights, exp_w, empty
    ):
        if empty is not None:
            case.data["masked_rows"] = empty
        run.outputs = (weights, exp_w)
        mistakes = attention_mistakes(q, k, v, mask, widths)
        run.explain(
            weights,
            exp_w,
            case,
            mistakes,
            ATOL,
            RTOL,
            pick=lambda r: r[1],
            what="attention weights",
            select=lambda r: r[1],
        )
    out = run.expect_tensor(
        out,
        case,
        exp_out.shape,
        exp_out.dtype,
        shape_hint=lambda got: out_hint or "the output is weights @ v, shape (..., T, Dv)",
        expected=exp_out,
    )
    if not run.close(out, exp_out, ATOL, RTOL) and not close_but_empty_rows(out, exp_out, empty):
        if mask is not None and torch.is_tensor(out):  # the output built before the mask
            scores = q.double() @ k.double().transpose(-2, -1) / math.sqrt(q.shape[-1])
            unmasked = torch.softmax(scores, dim=-1) @ v.double()
            if unmasked.shape == out.shape and torch.allclose(out.double(), unmasked, atol=1e-4):
                run.fail(
                    "the weights are right but the output ignores the mask: it is the unmasked "
                    "weights @ v; compute the output from the masked weights you return",
                    case,
                )
        run.fail(
            "the weights are right but the output is not: the output is weights @ v "
            f"({run.mismatch(out, exp_out)})",
            case,
        )
