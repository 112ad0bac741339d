"""The catalogue of the attention core's mistakes (notebooks 01, 02 and 04): :func:`attend`, scaled
dot-product attention with one deliberate mistake (no scaling, the softmax over the wrong axis,
the mask added or applied after the softmax, ...), and :func:`attention_mistakes`, those mistakes
with their messages for one case."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from transformer_lab.checks.engine.core import Mistake
from transformer_lab.checks.engine.diagnose import softmax_zeros


def attend(
    q, k, v, mask=None, sm=softmax_zeros, *, scale=None, mask_mode="before", keys="mT", dim=-1
):
    """Attention with exactly one deliberate mistake switched on (for diagnosis).

    ``scale`` divides the scores (default sqrt(D)); ``sm`` is the softmax the mistake is built on.
    """
    kt = {
        "mT": lambda: k.transpose(-2, -1),
        "none": lambda: k,
        "T": lambda: k.permute(*reversed(range(k.dim()))),
        "12": lambda: k.transpose(1, 2),
    }[keys]()
    scores = q @ kt / (math.sqrt(q.shape[-1]) if scale is None else scale)  # (..., T, S)
    if mask is not None:
        fill = {"before": ~mask, "reversed": mask, "zero": ~mask, "1e9": ~mask}.get(mask_mode)
        value = {"zero": 0.0, "1e9": -1e9}.get(mask_mode, float("-inf"))
        if fill is not None:
            scores = scores.masked_fill(fill, value)
    weights = sm(scores, dim=dim)
    if mask is not None and mask_mode == "after":
        weights = weights * mask
    return weights @ v, weights


def _added_mask(q, k, v, mask, sm):
    """Attention with the boolean mask added to the scores as 0/1 (a mistake)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) + mask.to(q.dtype)
    weights = sm(scores, dim=-1)
    return weights @ v, weights


POLARITY = (
    "the mask is inverted (its polarity is reversed): True = may attend, False = hidden, so "
    "fill the scores where the mask is False: scores.masked_fill(~mask, float('-inf'))"
)

UNASKED_CAUSAL = (
    "a causal (lower-triangular, tril) mask is applied although the `mask` argument asks for "
    "none: queries here may see every key, future positions included; mask only where `mask` "
    "is False"
)


def causal_variants(mask: Tensor | None, T: int, S: int) -> list[Tensor]:
    """The masks of a student who adds a causal mask of their own: the (T, S) lower triangle
    aligned at the first key or at the last, on its own and combined with ``mask``."""
    ones = torch.ones(T, S, dtype=torch.bool)
    found = []
    for causal in (ones.tril(), ones.tril(S - T)):
        for m in (causal,) if mask is None else (causal, causal & mask):
            if not any(m.shape == f.shape and torch.equal(m, f) for f in found):
                found.append(m)
    return found


def _naive_softmax(x: Tensor, dim: int = -1) -> Tensor:
    return torch.exp(x) / torch.exp(x).sum(dim=dim, keepdim=True)


def attention_mistakes(q, k, v, mask, widths: dict[str, tuple[float, str]]) -> list[Mistake]:
    """Mistakes of the attention core, on the student's projections ``q, k, v``.

    ``widths``: other numbers a student may have scaled by, {name: (value, description)}.
    """
    d = q.shape[-1]

    def a(**kw) -> Mistake:
        return lambda sm: attend(q, k, v, mask, sm, **kw)

    out = [
        Mistake(
            "the 1/sqrt(D) scaling is missing: divide the scores by sqrt(D) = "
            "sqrt(q.shape[-1]) before the softmax",
            a(scale=1.0),
            softmax=True,
        ),
        Mistake(
            "the scores are divided by D instead of sqrt(D): the scaling is 1/sqrt(d_k)",
            a(scale=float(d)),
            softmax=True,
        ),
        Mistake(
            "the scores are multiplied by sqrt(D) instead of divided by it",
            a(scale=1 / math.sqrt(d)),
            softmax=True,
        ),
    ]
    by_value: dict[float, list[tuple[str, str]]] = {}  # sizes equal on this input: named together
    for name, (value, what) in widths.items():
        if value != d:
            by_value.setdefault(value, []).append((name, what))
    for value, names in by_value.items():
        if len(names) == 1:
            ((name, what),) = names
            divisor = f"sqrt({name}) = sqrt({value:g}) ({what})"
        else:
            divisor = f"sqrt({value:g}), i.e. " + " or ".join(f"sqrt({n}) ({w})" for n, w in names)
        out.append(
            Mistake(
                f"the scores are divided by {divisor} instead of sqrt(D) = sqrt({d}) (the width "
                f"of the queries and keys)",
                a(scale=math.sqrt(value)),
                softmax=True,
            )
        )

    def scores_as_weights(scale: float) -> tuple:
        s = q @ k.transpose(-2, -1) / scale
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        return None, s

    out += [
        Mistake(
            "the returned weights are the scores before the softmax: return "
            "softmax(scores), whose rows are non-negative and sum to 1",
            lambda: scores_as_weights(math.sqrt(d)),
        ),
        Mistake(
            "the attention weights contain NaN: your softmax overflows on large scores (exp() "
            "of a score above about 88 is inf in float32, and inf/inf is NaN); subtract each "
            "row's maximum before exp()",
            lambda: attend(q, k, v, mask, _naive_softmax),
        ),
        Mistake(
            "the softmax runs over the queries (dim=-2); each query's weights over the keys "
            "(dim=-1) must sum to 1",
            a(dim=-2),
            softmax=True,
        ),
        Mistake(
            "the keys are transposed over the wrong dimensions (k.T / k.transpose(1, 2) move "
            "batch or head dimensions); use k.transpose(-2, -1)",
            a(keys="T"),
            softmax=True,
        ),
        Mistake(
            "the keys are transposed over the wrong dimensions; use k.transpose(-2, -1), which "
            "swaps only the last two",
            a(keys="12"),
            softmax=True,
        ),
    ]
    out.append(
        Mistake(
            "the 1/sqrt(D) scaling is applied to the weights after the softmax; scale the "
            "scores before it (softmax(Q K^T / sqrt(D))), so each row of weights sums to 1",
            lambda sm: (None, attend(q, k, v, mask, sm, scale=1.0)[1] / math.sqrt(d)),
            softmax=True,
        )
    )
    if mask is not None:
        out += [
            Mistake(
                "the boolean mask is added to the scores (True counts as 1): a mask is not a "
                "number to add; set the masked scores to -inf: scores.masked_fill(~mask, "
                "float('-inf'))",
                lambda sm: _added_mask(q, k, v, mask, sm),
                softmax=True,
            ),
            Mistake(
                "the mask is applied after the softmax: masked keys get weight 0 but the rows no "
                "longer sum to 1. Set masked scores to -inf *before* the softmax",
                a(mask_mode="after"),
                softmax=True,
            ),
            Mistake(
                POLARITY,
                a(mask_mode="reversed"),
                softmax=True,
            ),
            Mistake(
                "masked scores are set to 0 instead of -inf: a score of 0 still gets weight "
                "exp(0) > 0; use float('-inf')",
                a(mask_mode="zero"),
                softmax=True,
            ),
            Mistake(
                "the mask is ignored: set the scores to -inf where mask is False, before the "
                "softmax",
                a(mask_mode="none"),
                softmax=True,
            ),
        ]
        if mask.dim() == 1:  # a (S,) key mask used as a column hides queries, not keys
            out.append(
                Mistake(
                    "your (S,) key mask is applied along the queries (e.g. mask[:, None]); a key "
                    "mask must broadcast over the last axis of the (T, S) scores: use it as is "
                    "(or mask[None, :])",
                    lambda sm: attend(q, k, v, mask[:, None], sm),
                    softmax=True,
                )
            )
        elif mask.shape[-1] == mask.shape[-2] and mask.shape[-1] > 1:
            out.append(
                Mistake(
                    "your mask is transposed: its rows are queries and its columns are keys "
                    "(True = query t may attend to key s); do not transpose it",
                    lambda sm: attend(q, k, v, mask.transpose(-2, -1), sm),
                    softmax=True,
                )
            )
    T, S = q.shape[-2], k.shape[-2]
    for causal in causal_variants(mask, T, S):
        out.append(
            Mistake(UNASKED_CAUSAL, lambda sm, m=causal: attend(q, k, v, m, sm), softmax=True)
        )
    return out
