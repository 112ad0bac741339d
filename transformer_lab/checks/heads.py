"""Checks for notebook 2: splitting and merging heads, and multi-head attention.

Student-facing signatures (row vectors, weights without bias):

    split_heads(x, n_heads)   (B, T, C) -> (B, H, T, D)
    merge_heads(x)            (B, H, T, D) -> (B, T, C)
    multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None) -> out or (out, weights)
        x_q (B, T, C), x_kv (B, S, C), every w (C, C); Q = x_q @ w_q, ...; out (B, T, C)
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab import heads as _ref
from transformer_lab.checks._core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks._integrity import Forbidden
from transformer_lab.checks.attention import _optional_weights, _signature_hint

__all__ = ["check_split_heads", "check_merge_heads", "check_multi_head_attention"]

ATOL, RTOL = 1e-5, 1e-4


def _split_mistakes(x: Tensor, H: int) -> list[Mistake]:
    B, T, C = x.shape
    D = C // H
    return [
        Mistake(
            "heads split with a reshape but no transpose: x.reshape(B, H, T, D) mixes positions across heads; "
            "use x.view(B, T, H, D).transpose(1, 2)",
            lambda: x.reshape(B, H, T, D),
        ),
        Mistake(
            "each head must get a contiguous slice of the C features (head h gets features h*D .. h*D + D - 1); "
            "you interleave them: view as (B, T, H, D), not (B, T, D, H)",
            lambda: x.view(B, T, D, H).permute(0, 3, 1, 2),
        ),
    ]


def _split_cases(hidden: bool) -> list[Case]:
    g = generator(9505 if hidden else 505)
    specs = [((2, 3, 8), 2), ((1, 4, 12), 3), ((2, 5, 6), 1), ((2, 4, 4), 4)]
    if hidden:
        specs += [((3, 2, 16), 4), ((1, 7, 10), 5)]
    cases = []
    for shape, H in specs:
        x = torch.randn(*shape, generator=g)
        case = Case(f"H={H}", (x, H), {}, describe_args(x=x, n_heads=H))
        case.data.update(x=x, H=H, expected=_ref.split_heads(x, H))
        cases.append(case)
    return cases


def check_split_heads(split_heads, hidden: bool = False) -> None:
    """Check ``split_heads(x, n_heads)``: (B, T, C) -> (B, H, T, D) with D = C / H."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    forbidden = [Forbidden("transformer_lab's reference split_heads", function=_ref.split_heads)]
    run = Runner("check_split_heads", split_heads, forbidden, hidden,
                 lambda e, c: _signature_hint(e, "split_heads(x, n_heads)"))
    for case in _split_cases(hidden):
        x, H, expected = case.data["x"], case.data["H"], case.data["expected"]
        B, T, C = x.shape

        def hint(got: tuple, B=B, T=T, H=H, C=C) -> str | None:
            if got == (B, T, H, C // H):
                return "that is (B, T, H, D): transpose(1, 2) to put the heads before the positions"
            return None

        out = run.expect_tensor(run.call(case), case, expected.shape, expected.dtype, shape_hint=hint)
        if not run.close(out, expected, 0.0, 0.0):
            run.fail(run.diagnose(out, _split_mistakes(x, H), 0.0, 0.0) or run.mismatch(out, expected), case)
    run.passed()


def check_merge_heads(merge_heads, hidden: bool = False) -> None:
    """Check ``merge_heads(x)``: (B, H, T, D) -> (B, T, C), the inverse of split_heads."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    forbidden = [Forbidden("transformer_lab's reference merge_heads", function=_ref.merge_heads)]
    run = Runner("check_merge_heads", merge_heads, forbidden, hidden, lambda e, c: _signature_hint(e, "merge_heads(x)"))
    for case in _split_cases(hidden):
        x = case.data["expected"].contiguous()  # (B, H, T, D): merging must give back the original
        B, H, T, D = x.shape
        merge_case = Case(case.name, (x,), {}, describe_args(x=x))
        expected = _ref.merge_heads(x)
        out = run.expect_tensor(run.call(merge_case), merge_case, expected.shape, expected.dtype,
                                shape_hint=lambda got: "the result is (B, T, H * D)")
        if not run.close(out, expected, 0.0, 0.0):
            mistakes = [
                Mistake("heads merged with a reshape but no transpose: x.reshape(B, T, C) mixes heads and positions; "
                        "use x.transpose(1, 2).reshape(B, T, H * D)", lambda: x.reshape(B, T, H * D)),
                Mistake("the features are interleaved across heads: transpose to (B, T, H, D) and then reshape",
                        lambda: x.permute(0, 2, 3, 1).reshape(B, T, H * D)),
            ]
            run.fail(run.diagnose(out, mistakes, 0.0, 0.0) or run.mismatch(out, expected), merge_case)
    run.passed()


# ---------------------------------------------------------------------------------------------
def _mha(x_q, x_kv, wq, wk, wv, wo, H, mask=None, *, split="ok", merge="ok", out_proj=True,
         transpose_w=False, scale="D", kv_from_q=False, use_mask=True):
    """Functional multi-head attention with exactly one deliberate mistake switched on."""
    if transpose_w:
        wq, wk, wv, wo = wq.T, wk.T, wv.T, wo.T
    src = x_q if kv_from_q else x_kv
    q, k, v = x_q @ wq, src @ wk, src @ wv  # (B, T, C), (B, S, C), (B, S, C)
    B, T, C = q.shape
    S, D = k.shape[1], C // H

    def sp(t: Tensor, L: int) -> Tensor:
        if split == "reshape":
            return t.reshape(B, H, L, D)  # the bug: no transpose
        return t.view(B, L, H, D).transpose(1, 2)  # (B, H, L, D)

    q, k, v = sp(q, T), sp(k, S), sp(v, S)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D if scale == "D" else C)  # (B, H, T, S)
    if mask is not None and use_mask:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = weights @ v  # (B, H, T, D)
    out = out.reshape(B, T, C) if merge == "reshape" else out.transpose(1, 2).reshape(B, T, C)
    return (out @ wo if out_proj else out), weights


def _mha_cases(hidden: bool) -> list[Case]:
    g = generator(9606 if hidden else 606)
    r = lambda *s: torch.randn(*s, generator=g) / (s[-1] ** 0.5 if len(s) == 2 else 1.0)  # noqa: E731
    causal = lambda T: torch.ones(T, T, dtype=torch.bool).tril()  # noqa: E731
    pad = lambda lengths, S: (torch.arange(S)[None, :] < torch.tensor(lengths)[:, None])[:, None, None, :]  # noqa: E731
    x = r(2, 4, 8)
    specs = [
        ("self-attention, H=2", x, x, 2, None),
        ("cross-attention, T != S, H=4", r(2, 3, 8), r(2, 5, 8), 4, None),
        ("causal self-attention", r(2, 5, 8), None, 2, causal(5)),
        ("cross-attention with padding mask", r(2, 3, 12), r(2, 6, 12), 3, pad([6, 2], 6)),
        ("one head", r(1, 4, 6), None, 1, None),
    ]
    if hidden:
        specs += [
            ("H=4, causal", r(3, 6, 16), None, 4, causal(6)),
            ("cross-attention, H=8", r(2, 2, 16), r(2, 7, 16), 8, pad([7, 3], 7)),
        ]
    cases = []
    for name, xq, xkv, H, mask in specs:
        xkv = xq if xkv is None else xkv
        C = xq.shape[-1]
        wq, wk, wv, wo = (r(C, C) for _ in range(4))
        kwargs = {} if mask is None else {"mask": mask}
        case = Case(name, (xq, xkv, wq, wk, wv, wo, H), kwargs, describe_args(x_q=xq, x_kv=xkv, n_heads=H, mask=mask))
        module = _ref.MultiHeadAttention(C, H, bias=False)
        with torch.no_grad():  # nn.Linear stores W^T: y = x @ weight.T, and our w is applied as x @ w
            for lin, w in ((module.q_proj, wq), (module.k_proj, wk), (module.v_proj, wv), (module.out_proj, wo)):
                lin.weight.copy_(w.T)
            out, weights = module(xq, xkv, mask=mask, need_weights=True)
        case.data.update(xq=xq, xkv=xkv, w=(wq, wk, wv, wo), H=H, mask=mask, expected=(out, weights))
        cases.append(case)
    return cases


def _mha_forbidden() -> list[Forbidden]:
    return [
        Forbidden("transformer_lab's MultiHeadAttention", function=_ref.MultiHeadAttention.forward),
        Forbidden(
            "PyTorch's nn.MultiheadAttention / F.multi_head_attention_forward",
            codes={F.multi_head_attention_forward.__code__, nn.MultiheadAttention.forward.__code__},
            builtin_names=("_native_multi_head_attention",),
        ),
    ]


def check_multi_head_attention(multi_head_attention, hidden: bool = False) -> None:
    """Check ``multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None)``.

    Compared with ``transformer_lab.MultiHeadAttention`` (no bias) after copying the weights.
    Returns ``out`` (B, T, C) or ``(out, weights)`` with weights (B, H, T, S).
    """
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    run = Runner(
        "check_multi_head_attention", multi_head_attention, _mha_forbidden(), hidden,
        lambda e, c: _signature_hint(e, "multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None)"),
    )
    for case in _mha_cases(hidden):
        xq, xkv, (wq, wk, wv, wo), H, mask = (case.data[n] for n in ("xq", "xkv", "w", "H", "mask"))
        exp_out, exp_w = case.data["expected"]
        out, weights = _optional_weights(run, run.call(case), case)
        out = run.expect_tensor(out, case, exp_out.shape, exp_out.dtype,
                                shape_hint=lambda got: "merge the heads back to (B, T, C) and apply w_o")
        if weights is not None:
            weights = run.expect_tensor(weights, case, exp_w.shape, exp_w.dtype, what="attention weights",
                                        shape_hint=lambda got: "the weights of every head: (B, H, T, S)")
        if run.close(out, exp_out, ATOL, RTOL) and (weights is None or run.close(weights, exp_w, ATOL, RTOL)):
            continue
        M = lambda msg, **kw: Mistake(msg, lambda: _mha(xq, xkv, wq, wk, wv, wo, H, mask, **kw))  # noqa: E731
        mistakes = [
            M("the output projection is missing: multiply the merged heads by w_o", out_proj=False),
            M("heads split with a reshape but no transpose: use .view(B, T, H, D).transpose(1, 2)", split="reshape"),
            M("heads merged with a reshape but no transpose: use .transpose(1, 2).reshape(B, T, C)", merge="reshape"),
            M("the scores are scaled by sqrt(C) (the model width) instead of sqrt(D) = sqrt(C / H) (the head width)", scale="C"),
            M("the weights are applied as x @ w.T: the course uses row vectors, Q = x_q @ w_q", transpose_w=True),
            M("keys and values must come from x_kv (the second argument); you computed them from x_q", kv_from_q=True),
        ]
        if mask is not None:
            mistakes.append(M("the mask is ignored: fill the scores with -inf where mask is False, before the softmax", use_mask=False))
        message = run.diagnose(out, mistakes, ATOL, RTOL, pick=lambda r: r[0])
        if message is None and weights is not None and not run.close(weights, exp_w, ATOL, RTOL):
            message = run.diagnose(weights, mistakes, ATOL, RTOL, pick=lambda r: r[1])
        if message is None:
            message = run.mismatch(out, exp_out) if not run.close(out, exp_out, ATOL, RTOL) else "the returned attention weights are wrong"
        run.fail(message, case)
    run.passed()
