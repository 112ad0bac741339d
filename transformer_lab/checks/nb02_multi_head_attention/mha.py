"""Check for notebook 2, exercises 3 and 4: multi-head attention, as a loop or batched.

multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None) -> (out, weights)
    x_q (B, T, C), x_kv (B, S, C), every w (C, C); Q = x_q @ w_q, ...; out (B, T, C),
    weights (B, H, T, S)

The mistakes it names are computed in mha_mistakes.py.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab import heads as _ref
from transformer_lab.checks.engine.core import Case, Runner, describe_args, generator
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint
from transformer_lab.checks.nb02_multi_head_attention.mha_mistakes import _mha, _mha_mistakes
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_multi_head_attention"]


ATOL, RTOL = 1e-5, 1e-4


def _mha_cases(hidden: bool) -> list[Case]:
    g = generator(9606 if hidden else 606)
    r = lambda *s: torch.randn(*s, generator=g) / (s[-1] ** 0.5 if len(s) == 2 else 1.0)  # noqa: E731
    causal = lambda T: torch.ones(T, T, dtype=torch.bool).tril()  # noqa: E731

    def pad(lengths: list[int], S: int) -> Tensor:
        allowed = torch.arange(S)[None, :] < torch.tensor(lengths)[:, None]  # (B, S)
        return allowed[:, None, None, :]  # (B, 1, 1, S)

    x = r(2, 4, 8)
    specs = [
        ("self-attention, H=2", x, x, 2, None),
        ("cross-attention, T != S, H=4", r(2, 3, 8), r(2, 5, 8), 4, None),
        ("causal self-attention", r(2, 5, 8), None, 2, causal(5)),
        ("cross-attention with padding mask", r(2, 3, 12), r(2, 6, 12), 3, pad([6, 2], 6)),
        ("one head", r(1, 4, 6), None, 1, None),
        ("cross-attention, T = S", r(2, 4, 8), r(2, 4, 8), 2, None),
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
        case = Case(
            name,
            (xq, xkv, wq, wk, wv, wo, H),
            kwargs,
            describe_args(x_q=xq, x_kv=xkv, n_heads=H, mask=mask),
        )
        module = _ref.MultiHeadAttention(C, H, bias=False)
        with (
            torch.no_grad()
        ):  # nn.Linear stores W^T: y = x @ weight.T, and our w is applied as x @ w
            for lin, w in (
                (module.q_proj, wq),
                (module.k_proj, wk),
                (module.v_proj, wv),
                (module.out_proj, wo),
            ):
                lin.weight.copy_(w.T)
            out, weights = module(xq, xkv, mask=mask, need_weights=True)
        case.data.update(
            xq=xq, xkv=xkv, w=(wq, wk, wv, wo), H=H, mask=mask, expected=(out, weights)
        )
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


def _fitted_scale(weights: Tensor, case: Case) -> float | None:
    """The divisor s with weights = softmax(q k^T / s), read from the student's weights."""
    xq, xkv, (wq, wk, _, _), H = case.args[0], case.args[1], case.args[2:6], case.args[6]
    B, T, C = xq.shape
    D, S = C // H, xkv.shape[1]
    q = (xq @ wq).view(B, T, H, D).transpose(1, 2).double()
    k = (xkv @ wk).view(B, S, H, D).transpose(1, 2).double()
    raw = q @ k.transpose(-2, -1)  # (B, H, T, S)
    w = weights.detach().double()
    if w.shape != raw.shape or not torch.isfinite(w).all() or (w <= 0).any():
        return None
    lw = w.log() - w.log().mean(-1, keepdim=True)
    rc = raw - raw.mean(-1, keepdim=True)
    inv = (lw * rc).sum() / (rc * rc).sum()  # least squares: lw = rc / s
    if inv <= 0 or not torch.allclose(lw, rc * inv, atol=1e-3):
        return None
    return float(1 / inv)


def _scale_observation(weights: Tensor, case: Case) -> str:
    C, H = case.args[0].shape[-1], case.args[6]
    s = _fitted_scale(weights, case)
    got = f"by {s:.4g}" if s is not None else "by another number"
    return (
        f"the scaling is wrong: with C={C}, H={H} your scores are divided {got} instead of "
        f"sqrt(D) = {math.sqrt(C // H):.4g} (D = C / H = {C // H}, the head width)"
    )


def _scale_confirmed(run: Runner, case: Case, known: str, hidden: bool) -> bool:
    """The scale mistake ``known`` also explains the student's weights on a case with other
    C and H (a scale name built on sizes that coincide here is no evidence)."""
    C, H = case.args[0].shape[-1], case.args[6]
    for other in _mha_cases(hidden):
        oC, oH = other.args[0].shape[-1], other.args[6]
        if other.kwargs or (oC, oH) == (C, H) or oH == 1:
            continue
        value, error, calls = run.attempt(tuple(other.args), {})
        if error is not None or calls or not isinstance(value, tuple) or len(value) != 2:
            return False
        got_w = value[1]
        if not torch.is_tensor(got_w) or got_w.shape != other.data["expected"][1].shape:
            return False
        xq, xkv, (wq, wk, wv, wo) = other.data["xq"], other.data["xkv"], other.data["w"]
        scales = {
            "divided by D instead": "D2",
            "sqrt(C)": "C",
            "sqrt(H)": "H",
            "missing": "none",
        }
        for marker, scale in scales.items():
            if marker in known:
                want = _mha(xq, xkv, wq, wk, wv, wo, oH, None, scale=scale)[1]
                return bool(torch.allclose(got_w.detach().double(), want.double(), atol=ATOL))
        return True  # a scale message this confirmation does not know: keep it
    return True


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
        if not run.close(weights, exp_w, ATOL, RTOL):
            run.outputs = (weights, exp_w)
            case.data["sums_to_one"] = -1
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
        if not run.close(out, exp_out, ATOL, RTOL):
            case.data["axes"] = ("batch element", "query", "feature")
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
