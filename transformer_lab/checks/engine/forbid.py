"""References disabled while a student's function runs (the second of the guards' mechanisms).

:func:`forbid` runs the student's function while the reference for the graded thing cannot be
used: the reference's ``__code__`` is swapped for one that raises :class:`ReferenceUsed` (so any
alias, ``from transformer_lab.attention import softmax as sm``, is caught), and a profile hook
records any call into the reference's code or into PyTorch's built-in equivalent (so a copied
function object is caught too). Each check lists what it forbids as :class:`Forbidden` items;
the grader reads the same lists from the source (transformer_lab.grading.scan.forbidden).
"""

from __future__ import annotations

import types
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from transformer_lab.checks.engine.grading_hooks import _STATE
from transformer_lab.checks.engine.guards import TRUSTED

__all__ = ["ReferenceUsed", "Forbidden", "forbid"]


class ReferenceUsed(BaseException):
    """Raised inside a student's function that calls a disabled reference.

    A BaseException, so a student's ``except Exception`` cannot swallow it.
    """


@dataclass
class Forbidden:
    """One thing a student's function may not call while it is being checked.

    Args:
        label: how the message names it, e.g. "transformer_lab.attention.softmax".
        function: a Python function of the package (its code is swapped and its calls detected).
        builtin_names: names of PyTorch built-ins (C functions, Tensor methods) to detect.
        codes: code objects of other Python functions (e.g. ``F.softmax``) whose calls are
            detected but which are left running (swapping PyTorch's own code is too invasive).
    """

    label: str
    function: types.FunctionType | None = None
    builtin_names: tuple[str, ...] = ()
    codes: set = field(default_factory=set)


def _is_torch_builtin(fn: object) -> bool:
    """Is this C function PyTorch's (a Tensor method, a torch function) rather than another library's?"""
    owner = getattr(fn, "__self__", None)
    if owner is None or isinstance(owner, torch.Tensor):
        return True  # static built-ins such as torch.softmax have no owner
    if isinstance(owner, types.ModuleType):
        return owner.__name__.startswith("torch")
    klass = owner if isinstance(owner, type) else type(owner)
    return klass.__module__.startswith("torch")


def _blocker_code(victim: types.FunctionType):
    def _disabled(
        *args, _tlab_refuse=None, **kwargs
    ):  # the victim runs this; the refusal comes in via __kwdefaults__
        _tlab_refuse()

    names = {"co_name": victim.__name__}
    if hasattr(_disabled.__code__, "co_qualname"):  # Python 3.11+
        names["co_qualname"] = victim.__qualname__
    return _disabled.__code__.replace(**names)


@contextmanager
def forbid(items: Iterable[Forbidden]) -> Iterator[list[str]]:
    """Run the body with ``items`` disabled; yields the list of forbidden calls observed.

    After the body, the caller must check the list (and :func:`monitor_intact`).
    """
    items = list(items)
    calls: list[str] = []
    code_labels: dict[object, str] = {}
    builtin_labels: dict[str, str] = {}
    # (function, its code, blocker code, __defaults__, __kwdefaults__, label)
    swaps: list[tuple[types.FunctionType, object, object, object, object, str]] = []

    def refuse(label: str):
        def _raise() -> None:
            calls.append(label)
            raise ReferenceUsed(
                f"{label} is disabled while your function is being checked: implement it yourself."
            )

        return _raise

    for item in items:
        for name in item.builtin_names:
            builtin_labels[name] = item.label
        for extra in item.codes:
            code_labels[extra] = item.label
        fn = item.function
        if fn is None:
            continue
        code_labels[fn.__code__] = item.label
        if (
            not fn.__code__.co_freevars
        ):  # a function with a closure keeps its code; the hook still sees it
            blocker = _blocker_code(fn)
            code_labels[blocker] = item.label
            swaps.append((fn, fn.__code__, blocker, fn.__defaults__, fn.__kwdefaults__, item.label))

    def hook(frame, event, arg):
        if event == "call":
            label = code_labels.get(frame.f_code)
            if label is not None:
                calls.append(label)
        elif event == "c_call":
            name = getattr(arg, "__name__", None)
            if name in builtin_labels and _is_torch_builtin(arg):
                calls.append(builtin_labels[name])

    previous = TRUSTED.getprofile()
    outer = _STATE["forbidding"]
    _STATE["forbidding"] = (items, calls)  # read by the grader's remote calls (grading.remote)
    student = _STATE["student"]
    _STATE["student"] = False  # our own code swaps below are not the student's
    for fn, _code, blocker, _defaults, _kwdefaults, label in swaps:
        fn.__code__ = blocker
        fn.__defaults__ = None
        fn.__kwdefaults__ = {"_tlab_refuse": refuse(label)}
    TRUSTED.setprofile(hook)
    _STATE["student"] = student
    try:
        yield calls
    finally:
        _STATE["forbidding"] = outer
        _STATE["student"] = False
        intact = TRUSTED.getprofile() is hook
        TRUSTED.setprofile(previous)
        for fn, code, _blocker, defaults, kwdefaults, _label in swaps:
            fn.__code__ = code
            fn.__defaults__ = defaults
            fn.__kwdefaults__ = kwdefaults
        _STATE["student"] = student
        if not intact:
            calls.append("sys.setprofile (the grader's call monitor was switched off)")
