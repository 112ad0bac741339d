"""The attention core the attention checks share (scaled dot-product, self-, cross- and
multi-head attention): what the student may not call, fully masked rows, hints for shape errors,
and comparing (out, weights) against the catalogue of the core's mistakes (attention_mistakes.py).
Shared by notebooks 01, 02 and 04, so it lives in the engine."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab import attention as _ref
from transformer_lab import heads as _heads
from transformer_lab.checks.engine.attention_mistakes import attention_mistakes
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


OVERFLOW = (
    "the attention weights contain NaN or inf on large scores: exp() overflows (above about 88 "
    "in float32 it is inf, and inf / inf is NaN); subtract each row's maximum before exp(), as a "
    "stable softmax does"
)


def overflowed(case, actual: Tensor, expected: Tensor) -> bool:
    """On a case of large scores (``case.data["large_scores"]``): NaN or inf where the
    reference is finite."""
    if not case.data.get("large_scores") or not TRUSTED.is_tensor(actual):
        return False
    if actual.shape != expected.shape:
        return False
    return bool((~TRUSTED.isfinite(actual) & TRUSTED.isfinite(expected)).any())


def _right(out, expected) -> bool:
    """Is ``out`` a tensor of ``expected``'s shape and values?"""
    return (
        TRUSTED.is_tensor(out)
        and out.shape == expected.shape
        and TRUSTED.allclose(out.double(), expected.double(), atol=ATOL, rtol=RTOL, equal_nan=True)
    )


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
    import re

    found = re.search(r"\((\d+)x(\d+) and (\d+)x(\d+)\)", text)
    if found and int(found.group(1)) == int(found.group(3)) == int(found.group(4)):
        # (T x D) @ (D' x T) with D' != D: keys of another width than the queries, transposed
        return (
            f"the scores multiply queries of width {found.group(2)} by keys of width "
            f"{found.group(3)}: q and k need the same width D (the keys come from w_k, the "
            f"values from w_v)"
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
        if got[-2:] == (S, S) and S != T:
            return (
                f"one row per key ({S} x {S}): your queries come from the keys' sequence; the "
                f"queries come from the other input (its {T} tokens), Q = x_q @ w_q"
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
        if overflowed(case, weights, exp_w):
            run.fail(OVERFLOW, case)
        if mask is not None and _right(out, exp_out):  # the output saw the mask, the weights not
            scores = q.double() @ k.double().transpose(-2, -1) / math.sqrt(q.shape[-1])
            if TRUSTED.allclose(weights.double(), torch.softmax(scores, -1), atol=1e-4):
                run.fail(
                    "your output is right, but the weights you return are the unmasked ones "
                    "(computed before masking): return the masked weights, those the output "
                    "is computed from",
                    case,
                )
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
