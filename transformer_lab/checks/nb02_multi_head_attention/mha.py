"""Check for notebook 2, exercises 3 and 4: multi-head attention, as a loop or batched.

multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None) -> (out, weights)
    x_q (B, T, C), x_kv (B, S, C), every w (C, C); Q = x_q @ w_q, ...; out (B, T, C),
    weights (B, H, T, S)

The cases are in mha_cases.py, the mistakes it names in mha_mistakes.py (computed by the wrong
multi-head attention of mha_variants.py), and the evidence for a wrong scale in
mha_scale_evidence.py.
"""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab import heads as _ref
from transformer_lab.checks.engine.attention_evidence import (
    OVERFLOW,
    close_but_empty_rows,
    empty_rows,
    overflowed,
)
from transformer_lab.checks.engine.core import Case, Runner
from transformer_lab.checks.engine.diagnose import same
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint
from transformer_lab.checks.nb02_multi_head_attention.mha_cases import ATOL, RTOL, _mha_cases
from transformer_lab.checks.nb02_multi_head_attention.mha_mistakes import _mha_mistakes
from transformer_lab.checks.nb02_multi_head_attention.mha_scale_evidence import (
    _scale_confirmed,
    _scale_observation,
)
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_multi_head_attention"]


def _mha_forbidden() -> list[Forbidden]:
    return [
        Forbidden("transformer_lab's MultiHeadAttention", function=_ref.MultiHeadAttention.forward),
        Forbidden(
            "PyTorch's nn.MultiheadAttention / F.multi_head_attention_forward",
            codes={F.multi_head_attention_forward.__code__, nn.MultiheadAttention.forward.__code__},
            builtin_names=("_native_multi_head_attention",),
        ),
    ]


def _lengths_hint(run: Runner, exc: BaseException, case: Case) -> str:
    """Evidence that the crash comes from S != T: the same call with x_kv cut or tiled to T
    positions runs."""
    xq, xkv = case.args[0], case.args[1]
    T, S = xq.shape[1], xkv.shape[1]
    if T == S or case.kwargs.get("mask") is not None:
        return ""
    same = xkv[:, :T] if S > T else xkv.repeat(1, -(-T // S), 1)[:, :T]
    args = (xq.clone(), same.clone(), *(a.clone() for a in case.args[2:6]), case.args[6])
    _, error, calls = run.attempt(args, {})
    if error is not None or calls:
        return ""
    return (
        f"your function fails only when x_kv has another length than x_q (S={S}, T={T}): keys "
        f"and values must both come from x_kv (S positions), queries from x_q (T positions)"
    )


def _head_index_hint(exc: BaseException, case: Case) -> str:
    """An index past a size-1 axis of a mask that has no head axis: mask[:, h] in a loop."""
    mask = case.kwargs.get("mask")
    if not isinstance(exc, IndexError) or mask is None or mask.dim() < 4 or mask.shape[1] != 1:
        return ""
    if "with size 1" not in str(exc):
        return ""
    return (
        f"the mask {tuple(mask.shape)} has no head axis to index with h (its dim 1 has size 1): "
        f"expand it first, mask.expand(B, H, T, S)[:, h], or let it broadcast"
    )


def _weights_layout(weights, expected: Tensor) -> str | None:
    """'(H, B, T, S)' when the weights are the reference's with the axes in that order."""
    if not torch.is_tensor(weights) or weights.dim() != 4:
        return None
    for perm in itertools.permutations(range(4)):
        moved = expected.permute(*perm)
        if perm != (0, 1, 2, 3) and moved.shape == weights.shape and same(weights, moved):
            if same(moved, expected):
                continue
            return "(" + ", ".join("BHTS"[p] for p in perm) + ")"
    return None


def check_multi_head_attention(multi_head_attention, hidden: bool = False) -> None:
    """Check ``multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None)``.

    Compared with ``transformer_lab.MultiHeadAttention`` (no bias) after copying the weights.
    Returns ``out`` (B, T, C) or ``(out, weights)`` with weights (B, H, T, S).
    """
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    run = Runner(
        "check_multi_head_attention",
        multi_head_attention,
        _mha_forbidden(),
        hidden,
        lambda e, c: (
            _lengths_hint(run, e, c)
            or _head_index_hint(e, c)
            or _signature_hint(
                e, "multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None)"
            )
        ),
    )
    for case in _mha_cases(hidden):
        xq, xkv, (wq, wk, wv, wo), H, mask = (case.data[n] for n in ("xq", "xkv", "w", "H", "mask"))
        exp_out, exp_w = case.data["expected"]
        value = run.call(case)
        out, weights = run.expect_tuple(value, case, ("out", "weights"), (exp_out, exp_w))
        case.data["axes"] = ("batch element", "head", "query", "key")
        layout = _weights_layout(weights, exp_w)
        if layout is not None:
            run.fail(
                f"your attention weights are laid out as {layout}, not (B, H, T, S): axes "
                f"swapped; stack the heads' weights on dim=1 (torch.stack(weights, dim=1)), the "
                f"head axis right after the batch",
                case,
            )
        weights = run.expect_tensor(
            weights,
            case,
            exp_w.shape,
            exp_w.dtype,
            what="attention weights",
            shape_hint=lambda got, T=xq.shape[1], S=xkv.shape[1], H=H, C=xq.shape[-1]: (
                "one column per key of x_q: keys and values must come from x_kv (the second "
                "argument), queries from x_q"
                if got[-1] == T and S != T
                else "that is one attention map for all heads: you averaged (or summed) the "
                "heads' weights; return every head's, stacked on dim=1: (B, H, T, S)"
                if tuple(got) == (xq.shape[0], T, S)
                else f"your weights have {got[1]} heads = C / n_heads: n_heads={H} is the number "
                f"of heads H, and each head has width D = C // n_heads"
                if len(got) == 4 and got[1] == C // H and got[1] != H and tuple(got[2:]) == (T, S)
                else None
            ),
            expected=exp_w,
        )
        mistakes = _mha_mistakes(xq, xkv, wq, wk, wv, wo, H, mask)
        empty = empty_rows(mask, exp_w.shape)  # (B, H, T): queries with no key, or None
        if not run.close(weights, exp_w, ATOL, RTOL) and not close_but_empty_rows(
            weights, exp_w, empty
        ):
            run.outputs = (weights, exp_w)
            if overflowed(case, weights, exp_w):
                run.fail(OVERFLOW, case)
            case.data["sums_to_one"] = -1
            if empty is not None:
                case.data["masked_rows"] = empty
            known = run.diagnose(weights, mistakes, ATOL, RTOL, pick=lambda r: r[1], expected=exp_w)
            if known is not None and "scal" in known:  # sizes may coincide: confirm on other (C, H)
                if not _scale_confirmed(run, case, known, hidden):
                    run.fail(_scale_observation(weights, case), case, named=False)
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
            shape_hint=lambda got: "merge the heads back to (B, T, C) and apply w_o",
            expected=exp_out,
        )
        empty_out = None if empty is None else empty.all(dim=1)  # (B, T): no head sees a key
        if not run.close(out, exp_out, ATOL, RTOL) and not close_but_empty_rows(
            out, exp_out, empty_out
        ):
            case.data["axes"] = ("batch element", "query", "feature")
            case.data.pop("masked_rows", None)
            run.explain(
                out,
                exp_out,
                case,
                mistakes,
                ATOL,
                RTOL,
                pick=lambda r: r[0],
                select=lambda r: r[0],
            )
    run.passed()


def _mha_reference(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    """The answer with the student's signature (for ``checks.diagnose``)."""
    from transformer_lab.attention import scaled_dot_product_attention

    split = _ref.split_heads
    q, k, v = split(x_q @ w_q, n_heads), split(x_kv @ w_k, n_heads), split(x_kv @ w_v, n_heads)
    out, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, H, T, D)
    return _ref.merge_heads(out) @ w_o, weights


register(
    Exercise(
        "multi_head_attention",
        "02_multi_head_attention",
        "multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None) -> (out, weights)",
        cells=(
            Cell("mha_loop_tests", "multi_head_attention_loop", 2),
            Cell("mha_tests", "multi_head_attention", 3),
        ),
        check=check_multi_head_attention,
        reference=_mha_reference,
        against="transformer_lab.heads.MultiHeadAttention",
    )
)
