"""``checks.diagnose``: the checks' verdict as data, for explorers and tools (never raises).

    diagnose(exercise, student_fn, case=None) -> Diagnosis | None

See :mod:`transformer_lab.checks.engine.diagnose` for what the fields mean.
"""

from __future__ import annotations

import contextlib
import io
import math
import weakref
from typing import Any

import torch

from transformer_lab.checks.engine.diagnose import Diagnosis, same
from transformer_lab.checks.registry import EXERCISES  # name -> (check, reference or None)

__all__ = ["diagnose", "EXERCISES"]


# student function -> {exercise: verdict}: an explorer calls diagnose on every slider step, but
# the instant check's verdict depends only on the function (redefining it makes a new object)
_VERDICTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


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
    student's errors. The check's verdict is cached per function object (a redefined function
    is a new object), so an explorer may call this on every slider step: after the first call
    only ``case`` is computed.
    """
    from transformer_lab.checks.engine.core import CheckFailed, Runner

    if exercise not in EXERCISES:
        known = ", ".join(sorted(EXERCISES))
        raise KeyError(f"unknown exercise {exercise!r}; known: {known}")
    check, reference = EXERCISES[exercise]
    verdict = _check_verdict(exercise, check, student_fn, CheckFailed)
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


def _check_verdict(exercise: str, check, student_fn, failure) -> Diagnosis | None:
    try:
        cached = _VERDICTS.get(student_fn, {})
    except TypeError:  # not weak-referenceable: no cache
        cached = {}
    if exercise in cached:
        return cached[exercise]
    verdict: Diagnosis | None = None
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            check(student_fn)
    except failure as exc:
        verdict = Diagnosis(exc.message, exc.named, exc.case, exc.student, exc.reference)
    except Exception as exc:  # a broken student function must never break an explorer
        verdict = Diagnosis(f"{type(exc).__name__}: {exc}", False)
    try:
        _VERDICTS.setdefault(student_fn, {})[exercise] = verdict
    except TypeError:
        pass
    return verdict


def _agree(got: Any, want: Any) -> bool:
    if isinstance(got, (tuple, list)) and isinstance(want, (tuple, list)):
        return len(got) == len(want) and all(_agree(g, w) for g, w in zip(got, want))
    if isinstance(want, (int, float)) and not isinstance(want, bool):
        return isinstance(got, (int, float)) and math.isclose(got, want, rel_tol=1e-6)
    return same(got, want, 1e-5, 1e-4)
