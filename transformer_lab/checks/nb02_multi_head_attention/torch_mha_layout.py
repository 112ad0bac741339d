"""Which weight sits where in the student's nn.MultiheadAttention: the diagnosis of to_torch_mha
when the module's output differs (a weight untransposed, blocks out of order, a weight scaled,
the right numbers in the wrong layout)."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from transformer_lab.checks.engine.guards import TRUSTED

__all__ = ["weight_hint"]


def _close(a: Tensor | None, b: Tensor) -> bool:
    return a is not None and a.shape == b.shape and TRUSTED.allclose(a, b, atol=1e-6)


def _first_blocks(module: nn.MultiheadAttention, C: int, ws: tuple) -> str:
    """The common mistakes, in the order a student makes them."""
    w_q, w_k, w_v, w_o = ws
    in_proj = module.in_proj_weight
    if in_proj is not None and C > 1 and _close(in_proj[:C], w_q):
        return " in_proj_weight holds W_q untransposed: PyTorch stores (out, in), so copy w_q.T."
    if _close(module.out_proj.weight, w_o):
        return " out_proj.weight holds W_o untransposed: copy w_o.T."
    if in_proj is not None and _close(in_proj[:C], w_k.T):
        return (
            " in_proj_weight's blocks are in the wrong order: its rows are queries, then keys, "
            "then values (the query rows first: w_q.T, then w_k.T, then w_v.T)."
        )
    if in_proj is not None and _close(in_proj[C : 2 * C], w_q.T) and not _close(w_k, w_q):
        return " in_proj_weight holds W_q three times: its rows are w_q.T, then w_k.T, then w_v.T."
    if _close(in_proj, torch.cat([w_q.T, w_k.T, w_v.T])) and not _close(
        module.out_proj.weight, w_o.T
    ):
        return (
            " in_proj_weight is right, but out_proj.weight does not hold W_o: copy w_o.T into it."
        )
    return ""


def _slots(module: nn.MultiheadAttention, C: int, ws: tuple) -> str:
    """Say which of the weights sits in each block of in_proj_weight and in out_proj.weight
    ('' when a block holds none of them)."""
    names = ("w_q", "w_k", "w_v", "w_o")
    known = [(f"{n}.T", w.T) for n, w in zip(names, ws)] + list(zip(names, ws))

    def which(block) -> str | None:
        return next((name for name, w in known if _close(block, w)), None)

    in_proj = module.in_proj_weight
    if in_proj is None or tuple(in_proj.shape) != (3 * C, C):
        return ""
    found = [which(in_proj[i * C : (i + 1) * C]) for i in range(3)] + [
        which(module.out_proj.weight)
    ]
    want = ["w_q.T", "w_k.T", "w_v.T", "w_o.T"]
    if None in found or found == want:
        return ""
    return (
        f" in_proj_weight holds {', '.join(found[:3])} (in that order) and out_proj.weight "
        f"holds {found[3]}: they must be w_q.T, w_k.T, w_v.T (queries, keys, values) and w_o.T."
    )


def _factor_name(c: float, C: int, H: int) -> str:
    """' (= 1/sqrt(D), D = C / H = 4)' when the factor c is one of the sizes' roots or powers."""
    D = C // H
    named = {
        "1/sqrt(D)": 1 / math.sqrt(D),
        "sqrt(D)": math.sqrt(D),
        "1/D": 1 / D,
        "D": D,
        "1/sqrt(C)": 1 / math.sqrt(C),
        "sqrt(C)": math.sqrt(C),
    }
    for name, value in named.items():
        if value != 1 and abs(c - value) <= 1e-4 * value:
            return f" (= {name}, D = C / H = {D})"
    return ""


def _scaled(module: nn.MultiheadAttention, C: int, H: int, ws: tuple) -> str:
    """Say which block of the module's weights is the right one times a constant."""
    w_q, w_k, w_v, w_o = ws
    in_proj = module.in_proj_weight
    if in_proj is None or tuple(in_proj.shape) != (3 * C, C):
        return ""
    blocks = [
        ("the query block of in_proj_weight", in_proj[:C], w_q.T, "w_q.T"),
        ("the key block of in_proj_weight", in_proj[C : 2 * C], w_k.T, "w_k.T"),
        ("the value block of in_proj_weight", in_proj[2 * C :], w_v.T, "w_v.T"),
        ("out_proj.weight", module.out_proj.weight, w_o.T, "w_o.T"),
    ]
    for what, block, want, name in blocks:
        c = float((block * want).sum() / (want * want).sum())
        if abs(c - 1) > 1e-4 and TRUSTED.allclose(block, c * want, atol=1e-6):
            why = (
                "nn.MultiheadAttention divides the scores by sqrt(D) itself; "
                if "query" in what or "key" in what
                else ""
            )
            return (
                f" {what} is {name} times {c:.4g}{_factor_name(c, C, H)}: "
                f"{why}copy the weights unscaled."
            )
    return ""


def _same_numbers(a: Tensor | None, b: Tensor) -> bool:
    """``a`` holds exactly ``b``'s numbers, in some other arrangement."""
    if a is None or a.numel() != b.numel() or _close(a, b):
        return False
    return TRUSTED.allclose(a.flatten().sort().values, b.flatten().sort().values, atol=1e-6)


def _rearranged(module: nn.MultiheadAttention, ws: tuple) -> str:
    """The right numbers in the wrong places: a reshape or view where a transpose was needed
    (``torch.cat([w_q, w_k, w_v], dim=1).reshape(3 * C, C)``), rows interleaved, ..."""
    w_q, w_k, w_v, w_o = ws
    wrong = [
        name
        for name, param, want in (
            ("in_proj_weight", module.in_proj_weight, torch.cat([w_q.T, w_k.T, w_v.T])),
            ("out_proj.weight", module.out_proj.weight, w_o.T),
        )
        if _same_numbers(param, want)
    ]
    if not wrong:
        return ""
    return (
        f" {' and '.join(wrong)} {'hold' if len(wrong) > 1 else 'holds'} the right numbers in the "
        f"wrong layout: a reshape or view only regroups them in memory order, it does not "
        f"transpose; PyTorch stores (out, in), so in_proj_weight is torch.cat([w_q.T, w_k.T, "
        f"w_v.T], dim=0) and out_proj.weight is w_o.T."
    )


def weight_hint(module: nn.MultiheadAttention, C: int, H: int, ws: tuple) -> str:
    """' <what is wrong with the weights>' or '' (call under torch.no_grad())."""
    return (
        _first_blocks(module, C, ws)
        or _slots(module, C, ws)
        or _scaled(module, C, H, ws)
        or _rearranged(module, ws)
    )
