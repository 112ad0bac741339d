"""The machinery every check shares: calling the student's function safely, comparing with
the package's reference, and turning a mismatch into one short message that names the mistake.

A check builds seeded :class:`Case` inputs, computes the reference on them (before the
student's code runs), calls the student's function through :meth:`Runner.call` with the
reference disabled, then compares. When the output is wrong, :meth:`Runner.explain` first tries
the exercise's catalogue of *known mistakes* (computed on the same inputs), then the generic
evidence of :mod:`transformer_lab.checks.engine.diagnose` (transposed, a constant factor, an ignored
argument, only the first element right, ...), and otherwise describes what it observes.

Failures are raised as :class:`CheckFailed` (an ``AssertionError``): IPython shows the line of
the student's cell and the message, not the checks' own frames.

About 300 lines, kept whole: :class:`Runner` is one class (calling, comparing, explaining); its
expectations are in expect.py, its messages in messages.py.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NoReturn

import torch
from torch import Tensor

from transformer_lab.checks.engine import diagnose as _diagnose
from transformer_lab.checks.engine.expect import ExpectMixin, _clone, input_change, snapshot
from transformer_lab.checks.engine.forbid import Forbidden, ReferenceUsed, forbid
from transformer_lab.checks.engine.guards import verify
from transformer_lab.checks.engine.messages import (
    CheckFailed,
    common_error_hint,
    describe_args,
    generator,
    kind_of,
    shape_of,
    stub_left,
)

__all__ = [
    "Case",
    "CheckFailed",
    "Runner",
    "Mistake",
    "shape_of",
    "kind_of",
    "generator",
    "describe_args",
]


@dataclass
class Case:
    """One seeded input to the student's function.

    Args:
        name: short label used in messages ("causal mask", "large scores").
        args / kwargs: what the student's function is called with.
        describe: a human description of the inputs' shapes.
        data: anything the check needs later (reference output, raw inputs). Keys the generic
            diagnosis reads: ``dims`` ({"D": 4, ...} sizes a constant factor is matched
            against), ``axes`` (names of the output's axes, e.g. ("batch element", "query")),
            ``masked_rows`` (bool over the output's rows: nothing to attend to), ``sums_to_one``
            (the dim whose slices sum to 1), ``variations`` ([(argument, kwargs override)]:
            reruns that reveal an ignored argument).
    """

    name: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    describe: str = ""
    data: dict = field(default_factory=dict)


@dataclass
class Mistake:
    """A known mistake: what the student's output looks like if they made it, and the message.

    ``compute`` returns the buggy output (a tensor, or a tuple compared element-wise); it may
    raise, in which case the mistake is skipped (the bug would not run on this input). With
    ``softmax=True``, ``compute(sm)`` takes the softmax to build on and is tried with both valid
    behaviours on an all -inf slice (zeros, NaN), so the diagnosis does not depend on the
    student's choice there.
    """

    message: str
    compute: Callable[..., Any]
    softmax: bool = False


def _param_names(fn: Any, n: int) -> list[str]:
    try:
        names = [p.name for p in inspect.signature(fn).parameters.values()]
    except (TypeError, ValueError):
        names = []
    return (names + [f"#{i + 1}" for i in range(len(names), n)])[:n]


class Runner(ExpectMixin):
    """Runs one student function through the cases of one check.

    Args:
        check_name: "check_softmax".
        student_fn: the function under test.
        forbidden: what it may not call.
        hidden: the graded cell's hidden run (other cases, and "hidden cases" in the summary).
        error_hint: turns an exception of the student's code into a hint.
        reference: the package's reference with the student's signature; the generic diagnosis
            reruns it with changed arguments.
    """

    def __init__(
        self,
        check_name: str,
        student_fn: Any,
        forbidden: Iterable[Forbidden] = (),
        hidden: bool = False,
        error_hint: Callable[[BaseException, Case], str] | None = None,
        reference: Callable[..., Any] | None = None,
    ) -> None:
        __tracebackhide__ = (
            True  # IPython hides this frame: students see their cell and the message
        )
        self.name = check_name
        self.fn = student_fn
        self.forbidden = list(forbidden)
        self.hidden = hidden
        self.error_hint = error_hint
        self.reference = reference
        self.n_cases = 0
        self.outputs: tuple[Any, Any] = (None, None)  # (student, reference) of the current case
        verify(check_name)
        if not callable(student_fn):
            self.fail(
                f"expected your function (e.g. `{check_name.removeprefix('check_')}`), but "
                f"received {kind_of(student_fn)}; pass the function itself, without calling it."
            )

    # -- messages -----------------------------------------------------------------------
    def fail(self, message: str, case: Case | None = None, named: bool = True) -> NoReturn:
        __tracebackhide__ = (
            True  # IPython hides this frame: students see their cell and the message
        )
        where = ""
        if case is not None:
            where = f" [case '{case.name}'" + (f": {case.describe}" if case.describe else "") + "]"
        student, reference = self.outputs
        raise CheckFailed(
            self.name,
            message,
            case.name if case is not None else None,
            where,
            named,
            student,
            reference,
        ).with_traceback(None)

    def passed(self, extra: str = "") -> None:
        kind = "hidden cases" if self.hidden else "cases"
        print(f"✓ {self.name} passed: {self.n_cases} {kind}{extra}.")

    # -- calling the student --------------------------------------------------------------
    def attempt(self, args: tuple, kwargs: dict) -> tuple[Any, BaseException | None, list]:
        """Call the student's function on copies of the inputs with the references disabled;
        returns (output, exception or None, forbidden calls). Never raises for the student."""
        __tracebackhide__ = True
        error: BaseException | None = None
        out = None
        with forbid(self.forbidden) as calls:
            try:
                out = self.fn(*args, **kwargs)
            except ReferenceUsed as exc:
                error = exc
            except Exception as exc:  # anything the student's code raises; KeyboardInterrupt passes
                error = exc
        verify(self.name)
        return out, error, list(calls)

    def call(self, case: Case) -> Any:
        """Call the student's function on ``case`` with the references disabled."""
        __tracebackhide__ = (
            True  # IPython hides this frame: students see their cell and the message
        )
        self.n_cases += 1
        self.outputs = (None, case.data.get("expected"))
        args, kwargs = _clone(case.args), _clone(case.kwargs)
        before_args, before_kwargs = snapshot(args), snapshot(kwargs)
        out, error, calls = self.attempt(args, kwargs)
        if calls:
            self.fail(
                f"your function called {calls[0]}, which is what this exercise asks you to write; "
                f"the checks disable it while grading. Compute the result yourself.",
                case,
            )
        if isinstance(error, NotImplementedError):
            self.fail(stub_left(getattr(self.fn, "__name__", "")), case)
        if error is not None:
            hint = self.error_hint(error, case) if self.error_hint else ""
            hint = hint or common_error_hint(error)
            text = str(error).strip().splitlines()[0] if str(error).strip() else ""
            self.fail(
                f"your function raised {type(error).__name__}: {text}"
                + (f" — {hint}" if hint else ""),
                case,
                named=bool(hint),
            )
        names = _param_names(self.fn, len(args))
        keys = list(kwargs)
        change = input_change(names, args, before_args) or input_change(
            keys, [kwargs[k] for k in keys], [before_kwargs[k] for k in keys]
        )
        if change:
            self.fail(change, case)
        self.outputs = (out, case.data.get("expected"))
        return out

    def diagnose(
        self,
        actual: Tensor,
        mistakes: Iterable[Mistake],
        atol: float,
        rtol: float,
        pick: Callable[[Any], Any] = lambda out: out,
        expected: Any = None,
    ) -> str | None:
        """Return the message of the first mistake whose output ``actual`` matches (a mistake
        that gives the ``expected`` output on this input is no evidence and is skipped)."""
        for mistake in mistakes:
            variants = (
                (_diagnose.softmax_zeros, _diagnose.softmax_nan) if mistake.softmax else (None,)
            )
            for sm in variants:
                try:
                    with torch.no_grad():
                        raw = mistake.compute(sm) if mistake.softmax else mistake.compute()
                        candidate = pick(raw)
                except Exception:  # this bug would crash on this input, so it is not the student's
                    continue
                if expected is not None and self.matches(expected, candidate, atol, rtol):
                    continue
                if self.matches(actual, candidate, atol, rtol):
                    return mistake.message
        return None

    def explain(
        self,
        actual: Tensor,
        expected: Tensor,
        case: Case,
        mistakes: Iterable[Mistake] = (),
        atol: float = 1e-5,
        rtol: float = 1e-4,
        pick: Callable[[Any], Any] = lambda out: out,
        what: str = "output",
        select: Callable[[Any], Any] | None = None,
    ) -> NoReturn:
        """Fail with the best explanation of why ``actual`` differs from ``expected``: a known
        mistake of the catalogue, else generic evidence, else a precise observation.

        ``select`` picks the compared tensor out of a full return value (for reruns)."""
        __tracebackhide__ = True
        message = self.diagnose(actual, mistakes, atol, rtol, pick, expected)
        if message is not None:
            self.fail(message, case)
        rerun = None
        if self.reference is not None:
            rerun = self._rerun_fn(case, select or (lambda v: v))
        finding = _diagnose.explain(
            actual,
            expected,
            what=what,
            atol=atol,
            rtol=rtol,
            dims=case.data.get("dims"),
            axes=case.data.get("axes"),
            masked_rows=case.data.get("masked_rows"),
            sums_to_one=case.data.get("sums_to_one"),
            variations=case.data.get("variations", ()),
            rerun=rerun,
        )
        self.fail(finding.message, case, named=finding.named)

    def _rerun_fn(self, case: Case, select: Callable[[Any], Any]):
        def rerun(override: dict) -> tuple[Any, Any]:
            kwargs = {**case.kwargs, **override}
            kwargs = {k: v for k, v in kwargs.items() if v is not _diagnose.DEFAULT}
            try:
                with torch.no_grad():
                    want = select(self.reference(*_clone(case.args), **_clone(kwargs)))
            except Exception:
                return None, None
            out, error, calls = self.attempt(_clone(case.args), _clone(kwargs))
            if error is not None or calls:
                return None, want
            try:
                return select(out), want
            except Exception:
                return None, want

        return rerun
