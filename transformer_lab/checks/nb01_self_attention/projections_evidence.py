"""Evidence for notebook 01's self-attention check, from reruns of the student's function and the
shape of its output, for two families of mistakes:

- values assumed as wide as the queries: a stacked projection x @ [w_q | w_k | w_v] split into
  equal parts (found in the output), or a function that crashes unless w_v has the queries'
  width (found by a rerun with such a w_v);
- the batch elements mixed: right on each sequence alone, wrong on the batch, and sequence 0's
  output moves when only the other sequences change.

The check is in projections.py.
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_lab import attention as _ref
from transformer_lab.checks.engine.attention_mistakes import attend
from transformer_lab.checks.engine.core import Case, Runner
from transformer_lab.checks.engine.diagnose import softmax_nan, softmax_zeros

__all__ = []


# ---------------------------------------------------------------------------------------------
# the values' width Dv differs from the queries' D
def _stacked_splits(x, wq, wk, wv) -> list[tuple[str, tuple[Tensor, Tensor, Tensor]]]:
    """Q, K, V cut out of one stacked projection x @ [w_q | w_k | w_v] into equal parts (chunk,
    tensor_split, or D columns each): wrong when Dv != D (a split that happens to cut at
    [D, D, Dv] is left out)."""
    D, Dv = wq.shape[-1], wv.shape[-1]
    if D == Dv or wk.shape[-1] != D:
        return []
    qkv = x @ torch.cat([wq, wk, wv], dim=-1)  # (..., T, 2D + Dv)
    splits = [
        ("chunk(3)", lambda: qkv.chunk(3, dim=-1)),
        ("tensor_split(3)", lambda: qkv.tensor_split(3, dim=-1)),
        ("as [D, D, D]", lambda: (qkv[..., :D], qkv[..., D : 2 * D], qkv[..., 2 * D : 3 * D])),
    ]
    out = []
    for how, split in splits:
        parts = split()
        widths = [part.shape[-1] for part in parts]
        if len(parts) == 3 and widths[0] == widths[1] and widths != [D, D, Dv]:
            out.append((how, tuple(parts)))
    return out


def _split_message(how: str, D: int, Dv: int) -> str:
    widths = (
        f"the values have a different width from the queries and keys here (w_v has Dv = {Dv} "
        f"columns, w_q and w_k D = {D})"
    )
    if how == "as [D, D, D]":
        return (
            f"{widths}, but your values keep only D = {D} of them, as if they were as wide as "
            f"the queries (a stacked projection cut into D-wide parts?): V = x @ w_v keeps all "
            f"Dv columns; split a stacked projection at [D, D, Dv]"
        )
    return (
        f"{widths}: your stacked projection x @ [w_q | w_k | w_v] is split {how}, into equal "
        f"parts, which cuts it in the wrong places; split it at [D, D, Dv] "
        f"(torch.split(qkv, [D, D, Dv], dim=-1)) or project with each matrix on its own"
    )


def _stacked_split_found(run: Runner, out, weights, x, wq, wk, wv) -> str | None:
    """The student's (out, weights) are attention on a stacked projection split evenly: the
    values are wider or narrower than the queries here."""
    if not (torch.is_tensor(out) and torch.is_tensor(weights)):
        return None
    for how, (q, k, v) in _stacked_splits(x, wq, wk, wv):
        for sm in (softmax_zeros, softmax_nan):
            want_out, want_w = attend(q, k, v, None, sm)
            if (
                out.shape == want_out.shape
                and weights.shape == want_w.shape
                and run.close(out.detach(), want_out, 1e-5, 1e-4)
                and run.close(weights.detach(), want_w, 1e-5, 1e-4)
            ):
                return _split_message(how, wq.shape[-1], wv.shape[-1])
    return None


def _value_width_crash(run: Runner, case: Case) -> str:
    """The student's function crashed where Dv != D: does it run, and right, once w_v has the
    queries' width? Then it assumes the values are as wide as the queries."""
    x, wq, wk, wv = case.args
    D, Dv = wq.shape[-1], wv.shape[-1]
    if D == Dv:
        return ""
    narrow = wq.flip(-1) * 0.5  # any (C, D) matrix: a w_v of width D
    value, error, calls = run.attempt((x.clone(), wq.clone(), wk.clone(), narrow), {})
    want, _ = _ref.scaled_dot_product_attention(x @ wq, x @ wk, x @ narrow)
    if error is not None or calls or not isinstance(value, tuple) or not torch.is_tensor(value[0]):
        return ""
    if value[0].shape != want.shape or not run.close(value[0].detach(), want, 1e-5, 1e-4):
        return ""
    return (
        f"your function works when w_v has the same width as w_q, but here the values have a "
        f"different width (Dv = {Dv}, D = {D}): only the queries and keys must share D; a "
        f"stacked projection x @ [w_q | w_k | w_v] must be split at [D, D, Dv], not into equal "
        f"parts"
    )


# ---------------------------------------------------------------------------------------------
# the batch elements mixed
def _right_per_sequence(run: Runner, case: Case) -> bool:
    """The student's function, called on each batch element alone, gives the reference's."""
    exp_out, exp_w = case.data["expected"]
    for b in range(case.args[0].shape[0]):
        args = tuple(a[b].clone() if torch.is_tensor(a) and a.dim() == 3 else a for a in case.args)
        value, error, calls = run.attempt(args, {})
        if error is not None or calls or not isinstance(value, tuple) or len(value) != 2:
            return False
        o, w = value
        if not (torch.is_tensor(o) and torch.is_tensor(w)) or o.shape != exp_out[b].shape:
            return False
        if w.shape != exp_w[b].shape or not run.close(o.detach(), exp_out[b], 1e-5, 1e-4):
            return False
        if not run.close(w.detach(), exp_w[b], 1e-5, 1e-4):
            return False
    return True


def _batch_mixed(run: Runner, case: Case, out: Tensor) -> bool:
    """Sequence 0's output changes when only the other sequences of the batch change."""
    args = tuple(
        torch.cat([a[:1], a[1:].flip(-1) * 1.5]) if torch.is_tensor(a) and a.dim() == 3 else a
        for a in case.args
    )
    value, error, calls = run.attempt(args, {})
    if error is not None or calls or not isinstance(value, tuple) or not torch.is_tensor(value[0]):
        return False
    return value[0].shape == out.shape and not run.close(
        value[0][0].detach(), out[0].detach(), 1e-6, 1e-5
    )
