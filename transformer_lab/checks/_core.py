"""The machinery every check shares: calling the student's function safely, comparing with
the package's reference, and turning a mismatch into a message that names the mistake.

A check builds seeded :class:`Case` inputs, computes the reference on them (before the
student's code runs), calls the student's function through :meth:`Runner.call` with the
reference disabled, then compares. When the output is wrong, it computes a catalogue of
*known mistakes* on the same inputs and reports the one the student's output matches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import torch
from torch import Tensor

from transformer_lab.checks._guards import (
    TRUSTED,
    Forbidden,
    ReferenceUsed,
    forbid,
    hidden_seed,
    record_call,
    verify,
)

__all__ = ["Case", "Runner", "Mistake", "shape_of", "generator", "describe_args"]


def generator(seed: int) -> torch.Generator:
    """A private, seeded RNG (the global RNG of the notebook is left alone)."""
    return torch.Generator().manual_seed(hidden_seed(seed))  # the grader's secret, if grading


def shape_of(x: Any) -> str:
    if TRUSTED.is_tensor(x):
        return str(tuple(x.shape))
    return type(x).__name__


def describe_args(**named: Any) -> str:
    """'q (2, 5, 4), k (2, 5, 4)' style description of the inputs of a case."""
    parts = []
    for name, value in named.items():
        if TRUSTED.is_tensor(value):
            parts.append(f"{name} {tuple(value.shape)}")
        elif value is not None:
            parts.append(f"{name}={value!r}")
    return ", ".join(parts)


@dataclass
class Case:
    """One seeded input to the student's function.

    Args:
        name: short label used in messages ("causal mask", "large scores").
        args / kwargs: what the student's function is called with.
        describe: a human description of the inputs' shapes.
        data: anything the check needs later (reference output, raw inputs).
    """

    name: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    describe: str = ""
    data: dict = field(default_factory=dict)


@dataclass
class Mistake:
    """A known mistake: what the student's output looks like if they made it, and the message.

    ``compute`` returns the buggy output (a tensor, or a tuple compared element-wise);
    it may raise, in which case the mistake is skipped (the bug would not run on this input).
    """

    message: str
    compute: Callable[[], Any]


def _clone(value: Any) -> Any:
    if TRUSTED.is_tensor(value):
        return value.detach().clone()
    if isinstance(value, tuple):
        return tuple(_clone(v) for v in value)
    if isinstance(value, list):
        return [_clone(v) for v in value]
    return value


def _same_value(a: Any, b: Any) -> bool:
    if TRUSTED.is_tensor(a) and TRUSTED.is_tensor(b):
        return a.shape == b.shape and a.dtype == b.dtype and TRUSTED.equal(a, b)
    return True


class Runner:
    """Runs one student function through the cases of one check."""

    def __init__(
        self,
        check_name: str,
        student_fn: Any,
        forbidden: Iterable[Forbidden] = (),
        hidden: bool = False,
        error_hint: Callable[[BaseException, Case], str] | None = None,
    ) -> None:
        __tracebackhide__ = (
            True  # IPython hides this frame: students see their cell and the message
        )
        self.name = check_name
        self.fn = student_fn
        self.forbidden = list(forbidden)
        self.hidden = hidden
        self.error_hint = error_hint
        self.n_cases = 0
        verify(check_name)
        if not callable(student_fn):
            self.fail(
                f"expected your function (e.g. `{check_name.removeprefix('check_')}`), but received "
                f"{type(student_fn).__name__}; pass the function itself, without calling it."
            )

    # -- messages -----------------------------------------------------------------------
    def fail(self, message: str, case: Case | None = None) -> NoReturn:
        __tracebackhide__ = (
            True  # IPython hides this frame: students see their cell and the message
        )
        where = ""
        if case is not None:
            where = f" [case '{case.name}'" + (f": {case.describe}" if case.describe else "") + "]"
        raise AssertionError(f"{self.name}: {message}{where}")

    def passed(self, extra: str = "") -> None:
        kind = "hidden cases" if self.hidden else "cases"
        print(f"✓ {self.name} passed: {self.n_cases} {kind}{extra}.")

    # -- calling the student --------------------------------------------------------------
    def call(self, case: Case) -> Any:
        """Call the student's function on ``case`` with the references disabled."""
        __tracebackhide__ = (
            True  # IPython hides this frame: students see their cell and the message
        )
        self.n_cases += 1
        args, kwargs = _clone(case.args), _clone(case.kwargs)
        before_args, before_kwargs = _clone(args), _clone(kwargs)
        error: BaseException | None = None
        out = None
        with forbid(self.forbidden) as calls:
            try:
                out = self.fn(*args, **kwargs)
            except ReferenceUsed as exc:
                error = exc
            except Exception as exc:  # anything the student's code raises; KeyboardInterrupt passes
                error = exc
        record_call(self.name, case.name, out)  # for the grader, under a hidden check
        verify(self.name)
        if calls:
            self.fail(
                f"your function called {calls[0]}, which is what this exercise asks you to write; "
                f"the checks disable it while grading. Compute the result yourself.",
                case,
            )
        if isinstance(error, NotImplementedError):
            self.fail(
                "not implemented yet: replace `raise NotImplementedError()` with your code "
                "(between the ### BEGIN/END SOLUTION lines in the solution notebook).",
                case,
            )
        if error is not None:
            hint = self.error_hint(error, case) if self.error_hint else ""
            text = str(error).strip().splitlines()[0] if str(error).strip() else ""
            self.fail(
                f"your function raised {type(error).__name__}: {text}{(' — ' + hint) if hint else ''}",
                case,
            )
        for i, (now, then) in enumerate(zip(args, before_args)):
            if not _same_value(now, then):
                self.fail(
                    f"your function changed its input argument #{i + 1} in place (e.g. `x -= ...` or "
                    f"`x.masked_fill_`); compute on new tensors so the caller's data stays intact.",
                    case,
                )
        for key in kwargs:
            if not _same_value(kwargs[key], before_kwargs[key]):
                self.fail(
                    f"your function changed its input `{key}` in place; compute on new tensors instead.",
                    case,
                )
        return out

    # -- checking the output --------------------------------------------------------------
    def expect_tensor(
        self,
        value: Any,
        case: Case,
        shape: Sequence[int],
        dtype: torch.dtype | None = None,
        what: str = "output",
        shape_hint: Callable[[tuple], str | None] | None = None,
    ) -> Tensor:
        """Fail with a clear message unless ``value`` is a tensor of the given shape and dtype."""
        __tracebackhide__ = (
            True  # IPython hides this frame: students see their cell and the message
        )
        if value is None:
            self.fail(f"your function returned None for the {what}: did you forget `return`?", case)
        if not TRUSTED.is_tensor(value):
            kind = type(value).__name__
            extra = " (convert with torch.as_tensor)" if kind == "ndarray" else ""
            if isinstance(value, (tuple, list)):
                extra = f" of length {len(value)}"
            self.fail(
                f"the {what} must be a torch.Tensor, but your function returned a {kind}{extra}.",
                case,
            )
        shape = tuple(shape)
        if tuple(value.shape) != shape:
            hint = shape_hint(tuple(value.shape)) if shape_hint else None
            self.fail(
                f"the {what} should have shape {shape}, but yours has shape {tuple(value.shape)}"
                + (f": {hint}" if hint else "."),
                case,
            )
        if dtype is not None and value.dtype != dtype:
            if dtype == torch.bool:
                tip = "return a boolean tensor (compare, e.g. `idx[:, None] >= idx[None, :]`, or call `.bool()`)"
            else:
                tip = f"keep the dtype {dtype} (avoid mixing in float64 tensors, or call `.to({dtype})`)"
            self.fail(
                f"the {what} should have dtype {dtype}, but yours has dtype {value.dtype}: {tip}.",
                case,
            )
        return value.detach()

    def close(self, actual: Tensor, expected: Tensor, atol: float, rtol: float) -> bool:
        return actual.shape == expected.shape and TRUSTED.allclose(
            actual.to(expected.dtype), expected, atol=atol, rtol=rtol
        )

    def matches(self, actual: Tensor, candidate: Any, atol: float, rtol: float) -> bool:
        """Does ``actual`` equal a mistake's output? (NaN matches NaN, inf matches inf.)"""
        if not TRUSTED.is_tensor(candidate) or candidate.shape != actual.shape:
            return False
        a = actual.to(torch.float64) if actual.dtype != torch.bool else actual
        c = candidate.to(a.dtype) if candidate.dtype != a.dtype else candidate
        if a.dtype == torch.bool:
            return TRUSTED.equal(a, c)
        return TRUSTED.allclose(a, c, atol=atol, rtol=rtol, equal_nan=True)

    def diagnose(
        self,
        actual: Tensor,
        mistakes: Iterable[Mistake],
        atol: float,
        rtol: float,
        pick: Callable[[Any], Any] = lambda out: out,
    ) -> str | None:
        """Return the message of the first mistake whose output ``actual`` matches."""
        for mistake in mistakes:
            try:
                with torch.no_grad():
                    candidate = pick(mistake.compute())
            except Exception:  # this bug would crash on this input, so it is not the student's
                continue
            if self.matches(actual, candidate, atol, rtol):
                return mistake.message
        return None

    def mismatch(self, actual: Tensor, expected: Tensor, what: str = "output") -> str:
        """Generic description of how far off ``actual`` is."""
        if actual.dtype == torch.bool or expected.dtype == torch.bool:
            wrong = (actual != expected).nonzero()
            first = tuple(wrong[0].tolist()) if len(wrong) else ()
            return (
                f"{len(wrong)} entries of the {what} differ from the reference "
                f"(first at index {first}: yours {actual[first].item()}, expected {expected[first].item()})"
            )
        a, e = actual.to(torch.float64), expected.to(torch.float64)
        if not TRUSTED.isfinite(a).all():
            bad = (~TRUSTED.isfinite(a)).nonzero()[0].tolist()
            return f"the {what} contains NaN or inf (first at index {tuple(bad)}) where the reference is finite"
        diff = (a - e).abs()
        idx = tuple(int(i) for i in torch.unravel_index(diff.argmax(), diff.shape))
        return (
            f"the {what} differs from the reference by up to {diff.max().item():.3g} "
            f"(at index {idx}: yours {a[idx].item():.6g}, expected {e[idx].item():.6g})"
        )
