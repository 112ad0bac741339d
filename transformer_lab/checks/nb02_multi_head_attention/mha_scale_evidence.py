"""Evidence for a scaling mistake in notebook 02's multi-head attention: the divisor s read from
the student's weights (weights = softmax(q k^T / s)), the observation that names it against
sqrt(D), and the confirmation that a named scale (sqrt(C), sqrt(H), D, ...) also explains the
weights on a case with other C and H, where the sizes no longer coincide. The check is in mha.py.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from transformer_lab.checks.engine.core import Case, Runner
from transformer_lab.checks.nb02_multi_head_attention.mha_cases import ATOL, _mha_cases
from transformer_lab.checks.nb02_multi_head_attention.mha_variants import _mha

__all__ = []


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
            "sqrt(T)": "T",
            "sqrt(S)": "S",
            "missing": "none",
        }
        for marker, scale in scales.items():
            if marker in known:
                want = _mha(xq, xkv, wq, wk, wv, wo, oH, None, scale=scale)[1]
                return bool(torch.allclose(got_w.detach().double(), want.double(), atol=ATOL))
        return True  # a scale message this confirmation does not know: keep it
    return True
