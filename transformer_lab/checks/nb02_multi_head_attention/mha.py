"""Check for notebook 2, exercises 3 and 4: multi-head attention, as a loop or batched.

multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None) -> (out, weights)
    x_q (B, T, C), x_kv (B, S, C), every w (C, C); Q = x_q @ w_q, ...; out (B, T, C),
    weights (B, H, T, S)
"""

from __future__ import annotations

import itertools
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab import heads as _ref
from transformer_lab.checks.engine.core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint
from transformer_lab.checks.registry import Cell, Exercise, register

ATOL, RTOL = 1e-5, 1e-4

__all__ = ["check_multi_head_attention"]


# ---------------------------------------------------------------------------------------------
def _mha(
    x_q,
    x_kv,
    wq,
    wk,
    wv,
    wo,
    H,
    mask=None,
    *,
    split="ok",
    merge="ok",
    out_proj=True,
    transpose_w=False,
    scale="D",
    kv_from_q=False,
    use_mask=True,
    wo_per_head=False,
    roles=None,
    wo_first_block=False,
    sm=None,
    wo_on_values=False,
):
    """Functional multi-head attention with exactly one deliberate mistake switched on.

    ``roles``: four weights used as (w_q, w_k, w_v, w_o) instead of the given ones; ``split``
    may also be "strided" (head h takes channels h, h + H, ...) or "first" (every head takes
    channels 0 .. D - 1); ``use_mask="reversed"`` fills where the mask is True."""
    if roles is not None:
        wq, wk, wv, wo = roles
    if transpose_w:
        wq, wk, wv, wo = wq.T, wk.T, wv.T, wo.T
    src = x_q if kv_from_q else x_kv
    q, k, v = x_q @ wq, src @ wk, src @ wv  # (B, T, C), (B, S, C), (B, S, C)
    if wo_on_values:  # W_o moved onto the values, before the heads are merged
        v, wo, out_proj = v @ wo, wo, False
    B, T, C = q.shape
    S, D = k.shape[1], C // H

    def sp(t: Tensor, L: int) -> Tensor:
        if split == "reshape":
            return t.reshape(B, H, L, D)  # the bug: no transpose
        if split == "strided":
            return t.view(B, L, D, H).permute(0, 3, 1, 2)  # head h: channels h::H
        if split == "first":
            return t[..., :D].unsqueeze(1).expand(B, H, L, D)  # every head: channels 0..D-1
        return t.view(B, L, H, D).transpose(1, 2)  # (B, H, L, D)

    q, k, v = sp(q, T), sp(k, S), sp(v, S)
    root = {"D": math.sqrt(D), "C": math.sqrt(C), "H": math.sqrt(H), "none": 1.0, "D2": D}[scale]
    scores = q @ k.transpose(-2, -1) / root  # (B, H, T, S)
    if mask is not None and use_mask == "zero":  # masked scores set to 0, not -inf
        scores = scores.masked_fill(~mask, 0.0)
    elif mask is not None and use_mask == "add":  # the boolean mask added to the scores
        scores = scores + mask.to(scores.dtype)
    elif mask is not None and use_mask:
        scores = scores.masked_fill(mask if use_mask == "reversed" else ~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1) if sm is None else sm(scores, dim=-1)
    out = weights @ v  # (B, H, T, D)
    if wo_first_block:  # every head through the first D rows of W_o, summed
        return sum(out[:, h] @ wo[:D] for h in range(H)), weights
    if wo_per_head:  # each head's D features through its own diagonal block of W_o
        blocks = [out[:, h] @ wo[h * D : (h + 1) * D, h * D : (h + 1) * D] for h in range(H)]
        return torch.cat(blocks, dim=-1), weights  # (B, T, C)
    out = out.reshape(B, T, C) if merge == "reshape" else out.transpose(1, 2).reshape(B, T, C)
    return (out @ wo if out_proj else out), weights


def _mha_loop(x_q, x_kv, wq, wk, wv, wo, H, mask=None, *, head_mask="expand", own_channels=False):
    """Multi-head attention one head at a time, with one deliberate mistake: ``head_mask="index"``
    takes mask[:, h] without expanding the mask to (B, H, T, S); ``own_channels`` projects each
    head from its own D input channels only (x[..., c] @ w[c, c])."""
    B, T, C = x_q.shape
    S, D = x_kv.shape[1], C // H
    outs, ws = [], []
    for h in range(H):
        c = slice(h * D, (h + 1) * D)
        if own_channels:
            q, k, v = x_q[..., c] @ wq[c, c], x_kv[..., c] @ wk[c, c], x_kv[..., c] @ wv[c, c]
        else:
            q, k, v = x_q @ wq[:, c], x_kv @ wk[:, c], x_kv @ wv[:, c]
        scores = q @ k.transpose(-2, -1) / math.sqrt(D)  # (B, T, S)
        if mask is not None:
            m = mask.expand(B, H, T, S)[:, h] if head_mask == "expand" else mask[:, h]
            scores = scores.masked_fill(~m, float("-inf"))
        w = torch.softmax(scores, dim=-1)
        outs.append(w @ v)
        ws.append(w)
    return torch.cat(outs, dim=-1) @ wo, torch.stack(ws, dim=1)


def _plus(result: tuple, x: Tensor) -> tuple:
    return result[0] + x, result[1]


def _mha_v_from(x_q, x_kv, wq, wk, wv, wo, H, mask, which: str):
    """The keys (``which="k"``) or the values (``"v"``) computed from x_q (needs T = S)."""
    if x_q.shape != x_kv.shape:
        raise ValueError("only visible when T = S")
    B, T, C = x_q.shape
    D = C // H
    sp = lambda t: t.view(B, T, H, D).transpose(1, 2)  # noqa: E731
    q = sp(x_q @ wq)
    k = sp((x_q if which == "k" else x_kv) @ wk)
    v = sp((x_q if which == "v" else x_kv) @ wv)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return (w @ v).transpose(1, 2).reshape(B, T, C) @ wo, w


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


def _mha_heads_order(x_q, x_kv, wq, wk, wv, wo, H, mask, perm):
    """The heads concatenated in the order ``perm`` (a mistake unless it is the identity)."""
    out, w = _mha(x_q, x_kv, wq, wk, wv, wo, H, mask, out_proj=False)  # (B, T, C)
    B, T, C = out.shape
    D = C // H
    heads = out.view(B, T, H, D)[:, :, list(perm)]
    return heads.reshape(B, T, C) @ wo, w


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
        M = lambda msg, **kw: Mistake(msg, lambda: _mha(xq, xkv, wq, wk, wv, wo, H, mask, **kw))  # noqa: E731
        mistakes = [
            M("the output projection is missing: multiply the merged heads by w_o", out_proj=False),
            M(
                "heads split with a reshape but no transpose: use "
                ".view(B, T, H, D).transpose(1, 2)",
                split="reshape",
            ),
            M(
                "heads merged with a reshape but no transpose: use "
                ".transpose(1, 2).reshape(B, T, C)",
                merge="reshape",
            ),
            M(
                "the scores are scaled by sqrt(C) (the model width) instead of sqrt(D) = "
                "sqrt(C / H) (the head width)",
                scale="C",
            ),
            M(
                "the scores are scaled by sqrt(H) (the number of heads) instead of sqrt(D) = "
                "sqrt(C / H) (the head width)",
                scale="H",
            ),
            M("the 1/sqrt(D) scaling is missing (D = C / H, the head width)", scale="none"),
            M(
                "the scores are divided by D instead of sqrt(D) (D = C / H, the head width); "
                "scaling both q and k by 1/sqrt(D) does this: scale the scores once",
                scale="D2",
            ),
            Mistake(
                "the softmax runs over the heads axis (dim=1): each query's weights over the "
                "keys must sum to 1, so take the softmax over the last dim",
                lambda: _mha(xq, xkv, wq, wk, wv, wo, H, mask, sm=lambda t, dim: t.softmax(1)),
            ),
            M(
                "w_o multiplies the values before attention (x_kv @ w_v @ w_o): w_o mixes the "
                "heads, so apply it once to the merged heads' output (B, T, C) @ w_o",
                wo_on_values=True,
            ),
            M(
                "the weights are applied as x @ w.T: the course uses row vectors, Q = x_q @ w_q",
                transpose_w=True,
            ),
            M(
                "keys and values must come from x_kv (the second argument); you computed them "
                "from x_q",
                kv_from_q=True,
            ),
            M(
                "W_o is applied per head (each head's output through its own D x D block): W_o "
                "mixes all heads, so apply it once to the concatenation (B, T, C) @ w_o",
                wo_per_head=True,
            ),
        ]
        if mask is not None:
            mistakes.append(
                M(
                    "the mask is ignored: fill the scores with -inf where mask is False, before "
                    "the softmax",
                    use_mask=False,
                )
            )
            mistakes.append(
                M(
                    "the masked scores are set to 0, but a score of 0 still gets weight after "
                    "the softmax: fill them with float('-inf') (scores.masked_fill(~mask, -inf))",
                    use_mask="zero",
                )
            )
            mistakes.append(
                M(
                    "the mask is added to the scores as numbers (+1 where allowed), which blocks "
                    "nothing: fill the scores with -inf where mask is False, before the softmax",
                    use_mask="add",
                )
            )
            mistakes.append(
                Mistake(
                    "the mask polarity is reversed: True means 'may attend', so fill the scores "
                    "where the mask is False: scores.masked_fill(~mask, float('-inf'))",
                    lambda sm: _mha(xq, xkv, wq, wk, wv, wo, H, mask, use_mask="reversed", sm=sm),
                    softmax=True,
                )
            )
        mistakes += [
            M(
                "each head must take a contiguous slice of the channels (head h: columns "
                "h*D .. h*D + D - 1); yours interleaves them (head h takes h, h + H, ...)",
                split="strided",
            ),
            M(
                "every head uses the columns of the first head (0 .. D - 1): head h takes columns h*D .. "
                "(h+1)*D - 1 of Q, K and V",
                split="first",
            ),
            M(
                "every head goes through the first D rows of w_o: head h's output meets rows "
                "h*D .. (h+1)*D - 1 of w_o; concatenate the heads and multiply by the whole w_o",
                wo_first_block=True,
            ),
        ]
        mistakes += [
            Mistake(
                "the values come from x_q: keys and values must both come from x_kv (the second "
                "argument), queries from x_q",
                lambda: _mha_v_from(xq, xkv, wq, wk, wv, wo, H, mask, "v"),
            ),
            Mistake(
                "the keys come from x_q: keys and values must both come from x_kv (the second "
                "argument), queries from x_q",
                lambda: _mha_v_from(xq, xkv, wq, wk, wv, wo, H, mask, "k"),
            ),
            Mistake(
                "your output is the right one plus x_q: the residual connection (x + attention) "
                "belongs to the block around attention; return merged_heads @ w_o only",
                lambda: _plus(_mha(xq, xkv, wq, wk, wv, wo, H, mask), xq),
            ),
            Mistake(
                "each head projects only its own D input channels (x[..., cols] @ w_q[cols, cols]): "
                "every head sees all C input channels; project first (x @ w_q), then give head h "
                "the columns h*D .. (h+1)*D - 1",
                lambda: _mha_loop(xq, xkv, wq, wk, wv, wo, H, mask, own_channels=True),
            ),
        ]
        if 1 < H <= 4:
            for perm in itertools.permutations(range(H)):
                if list(perm) != list(range(H)):
                    mistakes.append(
                        Mistake(
                            f"the heads are concatenated in the wrong order (yours: heads "
                            f"{', '.join(map(str, perm))}): head h's output goes to channels "
                            f"h*D .. (h+1)*D - 1, in order, before w_o",
                            lambda perm=perm: _mha_heads_order(
                                xq, xkv, wq, wk, wv, wo, H, mask, perm
                            ),
                        )
                    )
        if mask is not None and (mask.dim() < 4 or mask.shape[1] == 1):
            mistakes.append(
                Mistake(
                    "in your loop over heads the mask is indexed per head (mask[:, h]) but it has "
                    f"no head axis (shape {tuple(mask.shape)}): expand it first, "
                    "mask.expand(B, H, T, S)[:, h], or let it broadcast",
                    lambda: _mha_loop(xq, xkv, wq, wk, wv, wo, H, mask, head_mask="index"),
                )
            )
        # one weight in another's role (or transposed): name the role and the weight
        given = {"w_q": wq, "w_k": wk, "w_v": wv, "w_o": wo}
        role_text = {"w_q": "queries", "w_k": "keys", "w_v": "values", "w_o": "output projection"}
        for i, role in enumerate(given):
            for name, w in [*given.items(), *((n + ".T", w.T) for n, w in given.items())]:
                if name == role:
                    continue
                roles = list(given.values())
                roles[i] = w
                mistakes.append(
                    M(
                        f"the {role_text[role]} {'uses' if role == 'w_o' else 'use'} {name} "
                        f"instead of {role}"
                        + (
                            f" ({role} transposed, as in x @ w.T; the course uses row vectors, "
                            f"x @ w)"
                            if name == role + ".T"
                            else ""
                        ),
                        roles=tuple(roles),
                    )
                )
        if not run.close(weights, exp_w, ATOL, RTOL):
            run.outputs = (weights, exp_w)
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
