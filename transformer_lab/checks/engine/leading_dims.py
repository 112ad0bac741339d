"""Is a crash about the number of leading dimensions? The same case, rerun with the same data
under another number of leading (batch, heads) dims: if it runs there, the function assumes a
fixed layout (unpacking ``B, T, C = x.shape``, ``x.shape[2]``, ``transpose(1, 2)``) where the
exercise asks for any number of leading dims. Each check words the hint for its own shapes."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from transformer_lab.checks.engine.core import Case, Runner

__all__ = ["runs_with_other_leading_dims"]

SHAPE_ERRORS = (IndexError, RuntimeError, ValueError)


def _relead(value, lead: tuple, new: tuple, core: int):
    if isinstance(value, Tensor) and value.dim() >= core and tuple(value.shape[:-core]) == lead:
        return value.reshape(*new, *value.shape[value.dim() - core :]).clone()
    return value


def runs_with_other_leading_dims(
    run: Runner, exc: BaseException, case: Case, core: int, only: tuple[int, ...] | None = None
) -> int | None:
    """The number of dims of the first tensor argument with which the case runs, when it raised
    ``exc`` with these; None when no other count runs or ``exc`` is no shape error.

    ``core``: the trailing dims the exercise defines (1 for (..., C), 2 for (..., T, D)); the
    leading ones are regrouped as (N,), (1, N), (1, 1, N) or none. ``only``: the positions of the
    arguments to regroup (default: every tensor argument with the first one's leading dims)."""
    if not isinstance(exc, SHAPE_ERRORS):
        return None
    first = next((a for a in case.args if isinstance(a, Tensor) and a.dim() >= core), None)
    if first is None:
        return None
    lead = tuple(first.shape[: first.dim() - core])
    n = math.prod(lead)
    for new in [(n,), (1, n), (1, 1, n)] + ([()] if n == 1 else []):
        if len(new) == len(lead):
            continue
        args = tuple(
            _relead(a, lead, new, core) if only is None or i in only else a
            for i, a in enumerate(case.args)
        )
        kwargs = case.kwargs if only is not None else {
            k: _relead(v, lead, new, core) for k, v in case.kwargs.items()
        }  # fmt: skip
        with torch.no_grad():
            _, error, calls = run.attempt(args, dict(kwargs))
        if error is None and not calls:
            return len(new) + core
    return None
