"""Multi-head attention computed wrong on purpose, for notebook 02's known mistakes: ``_mha`` is
multi-head attention with a switch for every mistake (a reshape without a transpose, sqrt(C)
instead of sqrt(D), the mask ignored, w_o per head, ...), ``_mha_loop`` the same one head at a
time (the mask indexed per head, each head projected from its own channels), and the other
functions one mistake each (keys or values from x_q, the heads concatenated out of order, the
residual added). The list of mistakes, with their messages, is in mha_mistakes.py.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

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
    keys_first=False,
):
    """Functional multi-head attention with exactly one deliberate mistake switched on.

    ``roles``: four weights used as (w_q, w_k, w_v, w_o) instead of the given ones; ``split``
    may also be "strided" (head h takes channels h, h + H, ...) or "first" (every head takes
    channels 0 .. D - 1); ``use_mask="reversed"`` fills where the mask is True, ``"after"``
    multiplies the weights by the mask after the softmax; ``keys_first`` scores K Q^T."""
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
    sizes = {"D": D, "C": C, "H": H, "T": T, "S": S}  # scale: sqrt of one of them
    root = {"none": 1.0, "D2": D}.get(scale) or math.sqrt(sizes[scale])
    scores = (k @ q.transpose(-2, -1) if keys_first else q @ k.transpose(-2, -1)) / root
    if mask is not None and use_mask == "zero":  # masked scores set to 0, not -inf
        scores = scores.masked_fill(~mask, 0.0)
    elif mask is not None and use_mask == "add":  # the boolean mask added to the scores
        scores = scores + mask.to(scores.dtype)
    elif mask is not None and use_mask and use_mask != "after":
        scores = scores.masked_fill(mask if use_mask == "reversed" else ~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1) if sm is None else sm(scores, dim=-1)
    if mask is not None and use_mask == "after":  # masked keys zeroed, rows no longer sum to 1
        weights = weights * mask
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
