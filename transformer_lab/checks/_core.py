"""The machinery every check shares: calling the student's function safely, comparing with
the package's reference, and turning a mismatch into one short message that names the mistake.

A check builds seeded :class:`Case` inputs, computes the reference on them (before the
student's code runs), calls the student's function through :meth:`Runner.call` with the
reference disabled, then compares. When the output is wrong, :meth:`Runner.explain` first tries
the exercise's catalogue of *known mistakes* (computed on the same inputs), then the generic
evidence of :mod:`transformer_lab.checks._diagnose` (transposed, a constant factor, an ignored
argument, only the first element right, ...), and otherwise describes what it observes.

Failures are raised as :class:`CheckFailed` (an ``AssertionError``): IPython shows the line of
the student's cell and the message, not the checks' own frames.
"""

from __future__ import annotations

import inspect
import linecache
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import torch
from torch import Tensor

from transformer_lab.checks import _diagnose
from transformer_lab.checks._integrity import TRUSTED, Forbidden, ReferenceUsed, forbid, verify

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

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def generator(seed: int) -> torch.Generator:
    """A private, seeded RNG (the global RNG of the notebook is left alone)."""
    return torch.Generator().manual_seed(seed)


def kind_of(x: Any) -> str:
    """How a message names a value's type: 'a numpy array', 'a list of length 2', 'a float'."""
    if TRUSTED.is_tensor(x):
        return f"a tensor of shape {tuple(x.shape)} and dtype {x.dtype}"
    if type(x).__module__ == "numpy" and hasattr(x, "shape"):
        if type(x).__name__ == "ndarray":
            return f"a numpy array of shape {tuple(x.shape)} (convert with torch.as_tensor)"
        return f"a numpy scalar ({type(x).__name__})"
    if isinstance(x, (tuple, list)):
        return f"a {type(x).__name__} of length {len(x)}"
    if x is None:
        return "None"
    return f"a {type(x).__name__}"


def shape_of(x: Any) -> str:
    if TRUSTED.is_tensor(x):
        return str(tuple(x.shape))
    return kind_of(x)


def describe_args(**named: Any) -> str:
    """'q (2, 5, 4), k (2, 5, 4)' style description of the inputs of a case."""
    parts = []
    for name, value in named.items():
        if TRUSTED.is_tensor(value):
            parts.append(f"{name} {tuple(value.shape)}")
        elif value is not None:
            parts.append(f"{name}={value!r}")
    return ", ".join(parts)


class CheckFailed(AssertionError):
    """A check's verdict: one short message naming the mistake (or what was observed).

    Attributes: ``check`` (e.g. "check_softmax"), ``message`` (without the check's name),
    ``case`` (the failing case's name or None), ``named`` (True when a mistake is named,
    False when the message describes an observation), ``student`` / ``reference`` (the
    failing case's outputs, when there were outputs to compare).

    IPython renders it with :meth:`_render_traceback_`: the student's own line and the message,
    without the frames of the checks.
    """

    def __init__(
        self,
        check: str,
        message: str,
        case: str | None = None,
        where: str = "",
        named: bool = False,
        student: Any = None,
        reference: Any = None,
    ) -> None:
        super().__init__(f"{check}: {message}{where}")
        self.check, self.message, self.case, self.named = check, message, case, named
        self.student, self.reference = student, reference

    def _render_traceback_(self) -> list[str]:
        lines = []
        tb = self.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            path = os.path.abspath(code.co_filename)
            ours = path.startswith(_PACKAGE_DIR) or "site-packages" in path
            if not ours and not code.co_filename.startswith("<frozen"):
                text = linecache.getline(code.co_filename, tb.tb_lineno).strip()
                if text:
                    lines.append(f"line {tb.tb_lineno}: {text}")
            tb = tb.tb_next
        red, reset = "\x1b[0;31m", "\x1b[0m"
        return lines[-1:] + [f"{red}CheckFailed{reset}: {self}"]


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
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    return True


def _param_names(fn: Any, n: int) -> list[str]:
    try:
        names = [p.name for p in inspect.signature(fn).parameters.values()]
    except (TypeError, ValueError):
        names = []
    return (names + [f"#{i + 1}" for i in range(len(names), n)])[:n]


class Runner:
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
        before_args, before_kwargs = _clone(args), _clone(kwargs)
        out, error, calls = self.attempt(args, kwargs)
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
            hint = hint or _common_error_hint(error)
            text = str(error).strip().splitlines()[0] if str(error).strip() else ""
            self.fail(
                f"your function raised {type(error).__name__}: {text}"
                + (f" — {hint}" if hint else ""),
                case,
                named=bool(hint),
            )
        names = _param_names(self.fn, len(args))
        for name, now, then in zip(names, args, before_args):
            if not _same_value(now, then):
                self.fail(
                    f"your function changed its input `{name}` in place (e.g. `x -= ...`, "
                    f"`x.masked_fill_(...)` or `seq.append(...)`); work on new tensors or copies so "
                    f"the caller's data stays intact.",
                    case,
                )
        for key in kwargs:
            if not _same_value(kwargs[key], before_kwargs[key]):
                self.fail(
                    f"your function changed its input `{key}` in place; work on new tensors "
                    f"instead.",
                    case,
                )
        self.outputs = (out, case.data.get("expected"))
        return out

    def expect_raises(
        self,
        case: Case,
        error: type[BaseException],
        why: str,
        must_name: Sequence[str] = (),
    ) -> None:
        """The text asks for ``error`` on this input, with a message naming ``must_name``."""
        __tracebackhide__ = True
        self.n_cases += 1
        out, exc, calls = self.attempt(_clone(case.args), _clone(case.kwargs))
        if calls:
            self.fail(f"your function called {calls[0]}; compute the result yourself.", case)
        if isinstance(exc, NotImplementedError):
            self.fail("not implemented yet: replace `raise NotImplementedError()`.", case)
        if exc is None:
            self.fail(
                f"{why} should raise {error.__name__}, but your function returned {kind_of(out)}.",
                case,
            )
        if not isinstance(exc, error):
            self.fail(
                f"{why} should raise {error.__name__} (with a message naming the problem), but "
                f"your function raised {type(exc).__name__}: {str(exc).strip()[:120]}",
                case,
            )
        missing = [w for w in must_name if w not in str(exc)]
        if missing:
            self.fail(
                f"your {error.__name__} is right, but its message should name "
                + " and ".join(must_name)
                + f" (one sentence: what was expected and what was received); yours says: "
                f"'{str(exc).strip()[:120]}'",
                case,
            )

    # -- checking the output --------------------------------------------------------------
    def expect_tuple(
        self,
        value: Any,
        case: Case,
        names: Sequence[str],
        expected: Sequence[Any] | None = None,
    ) -> tuple:
        """Fail unless ``value`` is a tuple (or list) of len(names); names a swapped order."""
        __tracebackhide__ = True
        shown = "(" + ", ".join(names) + ")"
        if value is None:
            self.fail(f"your function returned None: return the tuple {shown}.", case)
        if not isinstance(value, (tuple, list)):
            got = "only one tensor" if TRUSTED.is_tensor(value) else kind_of(value)
            self.fail(
                f"your function should return the tuple {shown}, but it returned {got}.", case
            )
        if len(value) != len(names):
            self.fail(
                f"your function should return {len(names)} values {shown}, but it returned "
                f"{len(value)}.",
                case,
            )
        if expected is not None and len(names) == 2:
            a, b = value
            ea, eb = expected
            if (
                TRUSTED.is_tensor(a)
                and TRUSTED.is_tensor(b)
                and _same_shape_close(a, eb)
                and _same_shape_close(b, ea)
                and not _same_shape_close(a, ea)
            ):
                self.fail(
                    f"the tuple is in the wrong order: you return ({names[1]}, {names[0]}); "
                    f"return {shown}.",
                    case,
                )
        return tuple(value)

    def expect_tensor(
        self,
        value: Any,
        case: Case,
        shape: Sequence[int],
        dtype: torch.dtype | None = None,
        what: str = "output",
        shape_hint: Callable[[tuple], str | None] | None = None,
        expected: Tensor | None = None,
    ) -> Tensor:
        """Fail with a clear message unless ``value`` is a tensor of the given shape and dtype
        (and on the CPU, like the inputs)."""
        __tracebackhide__ = (
            True  # IPython hides this frame: students see their cell and the message
        )
        if value is None:
            self.fail(f"your function returned None for the {what}: did you forget `return`?", case)
        if not TRUSTED.is_tensor(value):
            extra = ""
            if isinstance(value, (tuple, list)) and len(value) and TRUSTED.is_tensor(value[0]):
                extra = "; return the tensor itself, not wrapped in a tuple"
            self.fail(
                f"the {what} must be a torch.Tensor, but your function returned {kind_of(value)}"
                f"{extra}.",
                case,
            )
        shape = tuple(shape)
        if tuple(value.shape) != shape:
            hint = shape_hint(tuple(value.shape)) if shape_hint else None
            if hint is None and expected is not None:
                hint = _diagnose.permuted(value.detach(), expected)
            self.fail(
                f"the {what} should have shape {shape}, but yours has shape {tuple(value.shape)}"
                + (f": {hint}" if hint else "."),
                case,
                named=hint is not None,
            )
        if value.device.type != "cpu":
            self.fail(
                f"the {what} is on device {value.device}, but the inputs are on the CPU: do not "
                f"move tensors with .to(device) / .cuda() inside the function.",
                case,
            )
        if dtype is not None and value.dtype != dtype:
            if dtype == torch.bool:
                tip = (
                    "return a boolean tensor (compare, e.g. `idx[:, None] >= idx[None, :]`, or "
                    "call `.bool()`)"
                )
            else:
                tip = (
                    f"keep the dtype {dtype} (avoid mixing in float64 tensors, or call "
                    f"`.to({dtype})`)"
                )
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
        return _diagnose.same(actual, candidate, atol, rtol)

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

    def mismatch(self, actual: Tensor, expected: Tensor, what: str = "output") -> str:
        """Precise description of how ``actual`` differs (no diagnosis)."""
        return _diagnose.observe(actual, expected, what)


def _common_error_hint(exc: BaseException) -> str:
    """Hints for PyTorch errors that mean the same thing in every exercise."""
    text = str(exc)
    if "torch.return_types" in text:
        return (
            "x.max(dim) and x.min(dim) return (values, indices): use x.amax(dim, keepdim=True) "
            "or .values"
        )
    if "view size is not compatible" in text:
        return "after a transpose the tensor is not contiguous: use .reshape(...)"
    if "leaf Variable" in text:
        return "copy into parameters under `with torch.no_grad():`"
    if "same device" in text:
        return "keep every tensor on the inputs' device (no .cuda() / .to(device) inside)"
    return ""


def _same_shape_close(a: Tensor, b: Any) -> bool:
    return _diagnose.same(a, b, 1e-5, 1e-4)
