"""The known mistakes of notebook 02's multi-head attention, each computed on the case's inputs:
``_mha`` is multi-head attention with switches for every mistake (a reshape without a transpose,
sqrt(C) instead of sqrt(D), the mask ignored, w_o per head, ...), and :func:`_mha_mistakes` lists
them, with their messages, in the order the check tries them. The check is in mha.py.

About 300 lines, kept whole: ``_mha`` and the list that switches its mistakes on are read together,
one mistake per switch.
"""

from __future__ import annotations

import itertools
import math

import torch
from torch import Tensor

from transformer_lab.checks.engine.core import Mistake

__all__ = []


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


def _mha_heads_order(x_q, x_kv, wq, wk, wv, wo, H, mask, perm):
    """The heads concatenated in the order ``perm`` (a mistake unless it is the identity)."""
    out, w = _mha(x_q, x_kv, wq, wk, wv, wo, H, mask, out_proj=False)  # (B, T, C)
    B, T, C = out.shape
    D = C // H
    heads = out.view(B, T, H, D)[:, :, list(perm)]
    return heads.reshape(B, T, C) @ wo, w


def _mha_mistakes(xq, xkv, wq, wk, wv, wo, H, mask) -> list[Mistake]:
    """The known mistakes of multi-head attention on one case, in the order they are tried."""
    M = lambda msg, **kw: Mistake(msg, lambda: _mha(xq, xkv, wq, wk, wv, wo, H, mask, **kw))  # noqa: E731
    mistakes = [
        M("the output projection is missing: multiply the merged heads by w_o", out_proj=False),
        M(
            "heads split with a reshape but no transpose: use .view(B, T, H, D).transpose(1, 2)",
            split="reshape",
        ),
        M(
            "heads merged with a reshape but no transpose: use .transpose(1, 2).reshape(B, T, C)",
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
            "keys and values must come from x_kv (the second argument); you computed them from x_q",
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
                        lambda perm=perm: _mha_heads_order(xq, xkv, wq, wk, wv, wo, H, mask, perm),
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
                        f" ({role} transposed, as in x @ w.T; the course uses row vectors, x @ w)"
                        if name == role + ".T"
                        else ""
                    ),
                    roles=tuple(roles),
                )
            )
    return mistakes
