"""What a check expects of a returned value: a tuple of the right arity and order, a tensor of
the right shape, dtype and device; comparisons and plain descriptions of differences. And what it
expects of the inputs afterwards: unchanged (:func:`snapshot`, :func:`input_change`: values, a
dict's items, a tensor's requires_grad flag) and not handed back as the result
(:func:`returned_input`).

A mixin of :class:`~transformer_lab.checks.engine.core.Runner` (it uses ``self.fail``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from transformer_lab.checks.engine import diagnose as _diagnose
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.engine.messages import kind_of, stub_left


def _clone(value: Any) -> Any:
    """A copy of a returned value that later changes to it cannot reach."""
    if TRUSTED.is_tensor(value):
        return value.detach().clone()
    if isinstance(value, tuple):
        return tuple(_clone(v) for v in value)
    if isinstance(value, list):
        return [_clone(v) for v in value]
    if type(value) is dict:
        return {k: _clone(v) for k, v in value.items()}
    return value


class _Frozen:
    """A tensor input as it was before the call: its values and its requires_grad flag."""

    def __init__(self, tensor: Tensor) -> None:
        self.data = tensor.detach().clone()
        self.requires_grad = tensor.requires_grad


def snapshot(value: Any) -> Any:
    """A deep copy of an input, to tell after the call whether the function changed it."""
    if TRUSTED.is_tensor(value):
        return _Frozen(value)
    if isinstance(value, (list, tuple)):
        return type(value)(snapshot(v) for v in value) if type(value) in (list, tuple) else value
    if type(value) is dict:
        return {k: snapshot(v) for k, v in value.items()}
    return value


def _change(now: Any, then: Any) -> str | None:
    """'requires_grad' or 'values' when ``now`` differs from its snapshot ``then``, else None."""
    if isinstance(then, _Frozen):
        if not TRUSTED.is_tensor(now):
            return "values"
        if now.requires_grad != then.requires_grad:
            return "requires_grad"
        same = now.shape == then.data.shape and now.dtype == then.data.dtype
        return None if same and TRUSTED.equal(now.detach(), then.data) else "values"
    if type(then) in (list, tuple):
        if type(now) is not type(then) or len(now) != len(then):
            return "values"
        return next((c for c in map(_change, now, then) if c), None)
    if type(then) is dict:
        if type(now) is not dict or list(now) != list(then):
            return "values"
        return next((c for k in then if (c := _change(now[k], then[k]))), None)
    if now is then or type(then) not in (int, float, str, bytes, bool):
        return None  # other objects are not copied by snapshot(): nothing to compare
    return None if type(now) is type(then) and now == then else "values"


def input_change(names: Sequence[str], args: Sequence[Any], before: Sequence[Any]) -> str | None:
    """The message for the first input the call changed in place, or None; ``before`` is
    :func:`snapshot` of ``args`` taken before the call."""
    for name, now, then in zip(names, args, before):
        change = _change(now, then)
        if change == "requires_grad":
            return (
                f"your function switched on requires_grad of its input `{name}` "
                f"(`{name}.requires_grad_()`), which changes the caller's tensor: leave the flag "
                f"as it is; the gradient reaches `{name}` through your operations whenever the "
                f"caller asks for it."
            )
        if change and type(then) is dict:
            return (
                f"your function changed its input `{name}` in place (a dict: `{name}[key] = ...`, "
                f"`{name}.pop(...)`, `del {name}[key]` or a change to one of its values); read "
                f"it and put your results in a new dict, so the caller's `{name}` stays intact."
            )
        if change:
            return (
                f"your function changed its input `{name}` in place (e.g. `{name}[i] = ...`, "
                f"`{name}.append(...)`, `del {name}[i]` or `x -= ...`); work on a new list or "
                f"tensor, so the caller's `{name}` stays intact."
            )
    return None


def returned_input(out: Any, names: Sequence[str], args: Sequence[Any]) -> str | None:
    """The message when ``out`` is one of the (mutable) inputs itself, else None."""
    for name, arg in zip(names, args):
        if out is arg and isinstance(arg, (list, dict)):
            return (
                f"your function returned its input `{name}` itself (the very same "
                f"{type(arg).__name__}, e.g. `return {name}` when nothing changes): return a new "
                f"{type(arg).__name__} ({type(arg).__name__}({name}) at least), so that changing "
                f"the result cannot change the caller's `{name}`."
            )
    return None


if TYPE_CHECKING:
    from transformer_lab.checks.engine.core import Case

__all__ = ["ExpectMixin", "snapshot", "input_change", "returned_input"]


class ExpectMixin:
    """Checks of a returned value; ``self.fail(message, case, named=True)`` raises."""

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
            self.fail(stub_left(getattr(self.fn, "__name__", "")), case)
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
            got = tuple(value.shape)
            if hint is None and got[1:] == shape and got[:1] == (1,):
                hint = (
                    "yours has an extra leading dimension of size 1 (a batch dimension added with "
                    "unsqueeze(0) or [None]): keep the input's leading dimensions as they are"
                )
            elif hint is None and shape[1:] == got and shape[:1] == (1,):
                hint = (
                    "the leading dimension of size 1 is missing (a squeeze() or [0] too many): "
                    "keep the input's leading dimensions as they are"
                )
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
            elif dtype == torch.float64 and value.dtype in (torch.float32, torch.float16):
                tip = (
                    f"the inputs are float64 but something in your function is {value.dtype} "
                    f"(a tensor made with torch.zeros / torch.tensor / torch.ones without dtype=, "
                    f"or a .float()): create new tensors with the inputs' dtype, e.g. "
                    f"torch.zeros(..., dtype=x.dtype) or torch.zeros_like(x)"
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

    def mismatch(self, actual: Tensor, expected: Tensor, what: str = "output") -> str:
        """Precise description of how ``actual`` differs (no diagnosis)."""
        return _diagnose.observe(actual, expected, what)


def _same_shape_close(a: Tensor, b: Any) -> bool:
    return _diagnose.same(a, b, 1e-5, 1e-4)
