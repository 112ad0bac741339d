"""Running the student's own function inside an explorer, beside the package's reference.

An explorer whose concept is an exercise takes the student's function as an optional argument.
On every slider step it calls that function on the same inputs as the reference, through
:meth:`Student.call`, which never raises: an exception, ``None``, a tuple where a tensor belongs
or a wrong shape becomes one line (``Student.error``) that the explorer shows instead of a
traceback. :func:`compare` marks the entries that differ. The check's diagnosis (the same words
``checks.check_<exercise>`` would print, from ``checks.diagnose``) is computed once, when the
explorer is built, and shown under the plot.

Torch only: no widgets are imported here, so grading can import it freely.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

__all__ = ["Student", "compare", "diagnose"]

# Entries closer than this to the reference count as equal (float32 arithmetic in another order).
ATOL, RTOL = 1e-4, 1e-4


class _Wrong(Exception):
    """Raised by a ``pick`` function: the student's return value has the wrong form."""


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:160] if text else ""


def diagnose(exercise: str, fn: Callable[..., Any]) -> tuple[bool, str]:
    """The instant check's verdict on ``fn``, without raising: ``(passed, one_line_message)``.

    A thin layer over ``checks.diagnose(exercise, fn)`` (None when the check passes, else a
    ``Diagnosis`` whose ``message`` names the mistake).
    """
    from transformer_lab import checks

    try:
        verdict = checks.diagnose(exercise, fn)
    except Exception as err:  # the diagnosis must never break an explorer
        return False, f"the check could not run: {type(err).__name__}: {_first_line(err)}"
    if verdict is None:
        return True, f"✓ passes check_{exercise}."
    message = str(getattr(verdict, "message", verdict)).strip()
    return False, message.splitlines()[0] if message else f"check_{exercise} failed."


class Student:
    """The student's function of one exercise, called safely on an explorer's inputs.

    Args:
        fn: the student's function, or None (the explorer then draws the reference only).
        exercise: the exercise's name in ``transformer_lab.checks`` (``"softmax"`` for
            ``check_softmax``), used for the diagnosis.
        argument: the explorer's argument name, for the error when ``fn`` is not callable.
    """

    def __init__(self, fn: Any, exercise: str, argument: str | None = None) -> None:
        if fn is not None and not callable(fn):
            raise TypeError(
                f"{argument or exercise} must be your {exercise} function (or None), but received "
                f"{type(fn).__name__}; pass the function itself, without calling it."
            )
        self.fn = fn
        self.exercise = exercise
        self.name = getattr(fn, "__name__", exercise) if fn is not None else exercise
        self.error: str | None = None  # one line about the last call, None if it worked
        self._diagnosis: tuple[bool, str] | None = None

    def __bool__(self) -> bool:
        return self.fn is not None

    @property
    def diagnosis(self) -> tuple[bool, str]:
        """``(passed, message)`` of the exercise's check, computed once."""
        if self._diagnosis is None:
            self._diagnosis = diagnose(self.exercise, self.fn)
        return self._diagnosis

    def call(
        self,
        *args: Any,
        shape: tuple[int, ...] | None = None,
        pick: Callable[[Any], Any] | None = None,
        **kwargs: Any,
    ) -> Tensor | None:
        """Call the student's function; return its (picked) tensor, or None and set ``error``.

        Args:
            args, kwargs: passed to the function (tensors are cloned: the explorer's inputs
                stay intact whatever the function does).
            shape: the reference's shape; a different shape is an error.
            pick: takes the return value to the tensor to compare (e.g. the weights out of
                ``(out, weights)``); it may raise ``_Wrong(message)``.
        """
        ok, out = self._invoke(args, kwargs)
        if not ok:
            return None
        if pick is not None:
            try:
                out = pick(out)
            except _Wrong as err:
                self.error = f"your {self.name} {err}"
                return None
        return self._tensor(out, shape)

    def _invoke(self, args: tuple, kwargs: dict) -> tuple[bool, Any]:
        """Run the function on copies of the inputs: ``(True, result)``, or ``(False, None)``
        with ``error`` set to one line."""
        self.error = None
        if self.fn is None:
            return False, None
        args = tuple(a.clone() if isinstance(a, Tensor) else a for a in args)
        kwargs = {k: (v.clone() if isinstance(v, Tensor) else v) for k, v in kwargs.items()}
        try:
            with torch.no_grad():
                return True, self.fn(*args, **kwargs)
        except NotImplementedError:
            self.error = f"your {self.name} is not implemented yet: showing the reference only."
        except Exception as err:  # whatever the student's code raises becomes one line
            self.error = f"your {self.name} raised {type(err).__name__}: {_first_line(err)}"
        return False, None

    def _tensor(self, out: Any, shape: tuple[int, ...] | None, what: str = "") -> Tensor | None:
        """``out`` as a CPU tensor if it is one of ``shape``; else None and ``error`` set."""
        if out is None:
            where = f" as {what}" if what else ""
            self.error = f"your {self.name} returned None{where}: did you forget `return`?"
            return None
        if not isinstance(out, Tensor):
            if isinstance(out, np.ndarray):
                kind = "a numpy array"
            elif isinstance(out, (tuple, list)):
                kind = f"a {type(out).__name__} of length {len(out)}"
            else:
                kind = f"a {type(out).__name__}"
            where = f" as {what}" if what else ""
            self.error = f"your {self.name} returned {kind}{where} where a tensor belongs."
            return None
        if shape is not None and tuple(out.shape) != tuple(shape):
            self.error = (
                f"your {self.name} returned {what or 'a tensor'} of shape {tuple(out.shape)}, but shape "
                f"{tuple(shape)} was expected."
            )
            return None
        return out.detach().cpu()

    def call_pair(
        self,
        *args: Any,
        shapes: tuple[tuple[int, ...], tuple[int, ...]],
        names: str = "(out, weights)",
        **kwargs: Any,
    ) -> tuple[Tensor, Tensor] | None:
        """Call a function that returns a pair, e.g. ``(out, weights)``; check both shapes."""
        first, second = names.strip("()").split(", ")
        ok, out = self._invoke(args, kwargs)
        if not ok:
            return None
        try:
            pick_item(0, 2, names)(out)  # raises unless a pair
        except _Wrong as err:
            self.error = f"your {self.name} {err}"
            return None
        a = self._tensor(out[0], shapes[0], first)
        b = self._tensor(out[1], shapes[1], second) if a is not None else None
        return None if b is None else (a, b)

    def footer(self) -> str:
        """HTML for under the plot: the check's diagnosis."""
        if self.fn is None:
            return ""
        passed, message = self.diagnosis
        message = message.removeprefix(f"check_{self.exercise}: ")
        color = "#2a7d2a" if passed else "#b3261e"
        return (
            f"<div style='color:{color}'><b>check_{html.escape(self.exercise)}:</b> "
            f"{html.escape(message)}</div>"
        )

    def status(
        self,
        n_differ: int,
        max_diff: float | None,
        what: str = "entries",
        mark: str = "in red with an X or a hatch",
    ) -> str:
        """One HTML line for the readout: the error, or how far the student's result is off.

        ``max_diff`` None (e.g. for boolean masks) leaves the size of the difference out;
        ``mark`` says how the plot marks the differences.
        """
        if self.fn is None:
            return ""
        if self.error is not None:
            return f"<br><span style='color:#b3261e'>{html.escape(self.error)}</span>"
        if n_differ == 0:
            size = "" if max_diff is None else f" (max |difference| {max_diff:.1e})"
            return f"<br><span style='color:#2a7d2a'>yours matches the reference{size}.</span>"
        size = "" if max_diff is None else f" (max |difference| {max_diff:.3g})"
        return (
            f"<br><span style='color:#b3261e'>yours differs in {n_differ} {what}{size}, "
            f"marked {mark}.</span>"
        )


def wrong(message: str) -> _Wrong:
    """The exception a ``pick`` function raises for a return value of the wrong form."""
    return _Wrong(message)


def pick_item(index: int, arity: int, names: str) -> Callable[[Any], Any]:
    """A ``pick`` for functions returning a tuple (e.g. ``(out, weights)``): take item ``index``."""

    def pick(out: Any) -> Any:
        if not isinstance(out, (tuple, list)):
            kind = "a tensor" if isinstance(out, Tensor) else f"a {type(out).__name__}"
            raise _Wrong(f"returned {kind}, but it must return a tuple {names}.")
        if len(out) != arity:
            raise _Wrong(f"returned {len(out)} items, but it must return a tuple {names}.")
        return out[index]

    return pick


def compare(
    yours: Tensor | None, reference: Tensor, atol: float = ATOL, rtol: float = RTOL
) -> tuple[np.ndarray, float]:
    """Where the student's result differs from the reference, and by how much at most.

    Returns:
        ``(differs, max_diff)``: a bool array of the reference's shape (all False when there is
        no student result) and the largest absolute difference (NaN or inf where the reference is
        finite counts as infinite; 0.0 without a student result).
    """
    if yours is None:
        return np.zeros(tuple(reference.shape), dtype=bool), 0.0
    if reference.dtype == torch.bool or yours.dtype == torch.bool:
        differs = (yours.bool() != reference.bool()).numpy()
        return differs, float(differs.any())
    a, e = yours.double(), reference.double()
    both_nan = torch.isnan(a) & torch.isnan(e)
    same_inf = torch.isinf(a) & torch.isinf(e) & (a == e)
    diff = (a - e).abs()
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
    diff = torch.where(both_nan | same_inf, torch.zeros_like(diff), diff)
    differs = diff > atol + rtol * e.abs().nan_to_num(posinf=0.0, neginf=0.0)
    return differs.numpy(), float(diff.max()) if diff.numel() else 0.0
