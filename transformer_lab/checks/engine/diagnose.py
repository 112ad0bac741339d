"""Generic evidence: name a mistake from the student's output alone, for any tensor exercise.

Public API (``from transformer_lab import checks``)::

    checks.diagnose(exercise, student_fn, case=None) -> Diagnosis | None

    exercise    an exercise name from ``checks.EXERCISES`` ("softmax", "apply_rope", ...)
    student_fn  the student's function
    case        None: run the exercise's instant check; or the inputs of one call
                ({"args": (...), "kwargs": {...}}, or a tuple of positional arguments): the
                student's and the reference's outputs on them are returned too
    returns     None when the check passes (and, with ``case``, both outputs agree); otherwise
                Diagnosis(message, named, case, student, reference): ``message`` is the check's
                one-line verdict, ``named`` says whether it names a mistake, ``student`` /
                ``reference`` are the outputs of the failing case (or of ``case``), either of
                which may be None. Never raises because of the student's code.

Evidence :func:`explain` looks for, in this order (each names the mistake only if it fits):
  * correct except on the fully masked rows (NaN there, equal weights 1/S from -1e9, non-zero);
  * the reference with two axes swapped, or permuted;
  * the reference times a constant (the factor is matched against sqrt(D), D, sqrt(C), C, T,
    S, H, 2, -1, ...: sign flipped, sum where a mean belongs, FLOPs for multiply-adds);
  * the reference with an argument ignored (rerun with it changed: unchanged output, or the
    reference at the argument's default);
  * right for the first batch element / head / row only;
  * shifted by one position along an axis;
  * the reference's axes permuted and reshaped back (a reshape where a transpose belongs);
  * otherwise a precise observation: which slices differ, NaN positions, slice sums != 1,
    the largest difference and where.
Tuple order / arity, dtype, device, shapes and mutated inputs are named by
:class:`~transformer_lab.checks.engine.core.Runner` before values are compared.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from transformer_lab.checks.engine.evidence import (
    DEFAULT,
    Finding,
    _as_tensor,
    _constant_factor,
    _first_only,
    _masked_rows,
    _rearranged,
    _reshaped,
    _shifted,
    _variations,
    differs,
    observe,
    permuted,
    same,
)
from transformer_lab.checks.engine.guards import TRUSTED

__all__ = ["Diagnosis", "Finding", "explain", "observe", "same", "permuted", "DEFAULT"]


@dataclass
class Diagnosis:
    """What :func:`transformer_lab.checks.diagnose` returns when something is wrong."""

    message: str
    named: bool
    case: str | None = None
    student: Any = None
    reference: Any = None


# ---------------------------------------------------------------------------------------------
# the two valid softmax behaviours on an all -inf slice (candidate mistakes are built on both)
def softmax_zeros(x: Tensor, dim: int = -1) -> Tensor:
    """Softmax that gives zeros on an all -inf slice."""
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    s = e.sum(dim=dim, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones_like(s))


def softmax_nan(x: Tensor, dim: int = -1) -> Tensor:
    """Softmax that gives NaN on an all -inf slice (like torch.softmax)."""
    return torch.softmax(x, dim=dim)


def normalised_elsewhere(
    a: Tensor, e: Tensor, dim: int, axes: Sequence[str] | None = None
) -> str | None:
    """'normalised over another axis' when the reference's slices along ``dim`` sum to 1, the
    student's do not, and theirs (non-negative) sum to 1 along exactly one other axis."""
    if a.dim() < 2 or not TRUSTED.isfinite(a).all() or (a < 0).any():
        return None

    def sums_to_one(t: Tensor, d: int) -> bool:
        return TRUSTED.allclose(t.sum(dim=d), torch.ones_like(t.sum(dim=d)), atol=1e-4)

    if not sums_to_one(e, dim) or sums_to_one(a, dim):
        return None
    found = [
        d for d in range(a.dim()) if d != dim % a.dim() and a.shape[d] > 1 and sums_to_one(a, d)
    ]
    if len(found) != 1:
        return None
    name = lambda d: axes[d] if axes is not None and len(axes) == a.dim() else f"dim {d}"  # noqa: E731
    return (
        f"your values sum to 1 along {name(found[0])} (dim {found[0]}), not along "
        f"{name(dim % a.dim())} (dim {dim}): the softmax (or the normalisation) runs over the "
        f"wrong axis; normalise over dim {dim}"
    )


def _elsewhere(a: Tensor, e: Tensor, dim: int | None, axes) -> Finding | None:
    found = None if dim is None or a.dtype == torch.bool else normalised_elsewhere(a, e, dim, axes)
    return Finding(found, True) if found else None


def explain(
    actual: Any,
    expected: Any,
    *,
    what: str = "output",
    atol: float = 1e-5,
    rtol: float = 1e-4,
    dims: dict | None = None,
    axes: Sequence[str] | None = None,
    masked_rows: Tensor | None = None,
    sums_to_one: int | None = None,
    variations: Sequence[tuple[str, dict]] = (),
    rerun: Callable[[dict], tuple[Any, Any]] | None = None,
) -> Finding:
    """The best generic explanation of why ``actual`` is not ``expected`` (same shape)."""
    a, e = _as_tensor(actual), _as_tensor(expected)
    if a is None or e is None:
        return Finding(f"the {what} {differs(what)} from the reference", False)
    if a.shape != e.shape:
        hint = permuted(a, e, axes)
        if hint:
            return Finding(hint, True)
        return Finding(f"the {what} has shape {tuple(a.shape)}, expected {tuple(e.shape)}", False)
    if a.dtype != torch.bool and e.dtype != torch.bool:
        a = a.to(torch.float64)
        e = e.to(torch.float64)
    masked = _masked_rows(a, e, masked_rows, atol, rtol) if a.dtype != torch.bool else None
    if masked is not None:
        return masked
    if a.dtype != torch.bool and (~TRUSTED.isfinite(a) & TRUSTED.isfinite(e)).any():
        # NaN or inf where the reference is finite: no structural evidence, say where it is
        return Finding(observe(a, e, what, axes, sums_to_one), False)
    steps = (
        lambda: Finding(permuted(a, e, axes), True) if permuted(a, e, axes) else None,
        lambda: _elsewhere(a, e, sums_to_one, axes),
        lambda: _constant_factor(a, e, dims) if a.dtype != torch.bool else None,
        lambda: _variations(a, e, variations, rerun, atol, rtol),
        lambda: _first_only(a, e, axes, atol, rtol),
        lambda: _shifted(a, e, axes, atol, rtol),
        lambda: _reshaped(a, e, axes),
        lambda: _rearranged(a, e),
    )
    fallback = None  # an observation kept while the named evidence is still being tried
    for step in steps:
        try:
            found = step()
        except Exception:  # evidence that cannot be computed on this input is no evidence
            found = None
        if found is not None and found.named:
            return found
        fallback = fallback or found
    return fallback or Finding(observe(a, e, what, axes, sums_to_one), False)
