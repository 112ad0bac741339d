"""``checks.diagnose``: the checks' verdict as data, for explorers and tools (never raises).

    diagnose(exercise, student_fn, case=None) -> Diagnosis | None

See :mod:`transformer_lab.checks._diagnose` for what the fields mean.
"""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Callable
from typing import Any

import torch

from transformer_lab.checks._diagnose import Diagnosis, same

__all__ = ["diagnose", "EXERCISES", "register"]

# exercise name -> (check function, reference with the student's signature or None)
EXERCISES: dict[str, tuple[Callable[..., None], Callable[..., Any] | None]] = {}


def register(name: str, check: Callable[..., None], reference: Callable[..., Any] | None) -> None:
    """Make ``check_<name>`` reachable through :func:`diagnose` (later notebooks call this)."""
    EXERCISES[name] = (check, reference)


def _theta(d: int, base: float) -> torch.Tensor:
    return base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)


def offset_dot_product_reference(k, d_model, base=10000.0):
    """sum_i cos(k theta_i), float32 of k's shape."""
    return torch.cos(torch.as_tensor(k).double()[..., None] * _theta(d_model, base)).sum(-1).float()


def _split_case(case: Any) -> tuple[tuple, dict]:
    if isinstance(case, dict):
        return tuple(case.get("args", ())), dict(case.get("kwargs", {}))
    if isinstance(case, tuple):
        return case, {}
    return (case,), {}


def diagnose(exercise: str, student_fn: Any, case: Any = None) -> Diagnosis | None:
    """The instant check's verdict on ``student_fn`` as a :class:`Diagnosis` (None: all good).

    With ``case`` (the inputs of one call), also the student's and the reference's outputs on
    those inputs. Output of the check (the ✓ line) is swallowed; nothing is raised for the
    student's errors.
    """
    from transformer_lab.checks._core import CheckFailed, Runner

    if exercise not in EXERCISES:
        known = ", ".join(sorted(EXERCISES))
        raise KeyError(f"unknown exercise {exercise!r}; known: {known}")
    check, reference = EXERCISES[exercise]
    verdict: Diagnosis | None = None
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            check(student_fn)
    except CheckFailed as exc:
        verdict = Diagnosis(exc.message, exc.named, exc.case, exc.student, exc.reference)
    except Exception as exc:  # a broken student function must never break an explorer
        verdict = Diagnosis(f"{type(exc).__name__}: {exc}", False)
    if case is None:
        return verdict
    args, kwargs = _split_case(case)
    want = None
    if reference is not None:
        try:
            with torch.no_grad():
                want = reference(*args, **kwargs)
        except Exception:
            want = None
    got = None
    try:
        run = Runner(f"check_{exercise}", student_fn)
        got, error, _ = run.attempt(args, kwargs)
        if error is not None and verdict is None:
            verdict = Diagnosis(f"your function raised {type(error).__name__}: {error}", False)
    except Exception as exc:
        if verdict is None:
            verdict = Diagnosis(f"{type(exc).__name__}: {exc}", False)
    agree = _agree(got, want)
    if verdict is None and agree:
        return None
    if verdict is None:
        verdict = Diagnosis("on these inputs your result differs from the reference", False)
    return Diagnosis(verdict.message, verdict.named, "the given inputs", got, want)


def _agree(got: Any, want: Any) -> bool:
    if isinstance(got, (tuple, list)) and isinstance(want, (tuple, list)):
        return len(got) == len(want) and all(_agree(g, w) for g, w in zip(got, want))
    if isinstance(want, (int, float)) and not isinstance(want, bool):
        return isinstance(got, (int, float)) and math.isclose(got, want, rel_tol=1e-6)
    return same(got, want, 1e-5, 1e-4)
