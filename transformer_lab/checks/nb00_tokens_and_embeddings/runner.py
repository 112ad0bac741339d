"""The runner of notebook 00's checks: the engine's :class:`Runner`, plus what these exercises
need on every call of the student's function.

- inputs watched deeply: a dict argument (``words``), a list inside it, a tensor's values and its
  requires_grad flag; the first change made in place fails the check, naming the input;
- ``fresh``: positions of inputs the function must not hand back as its result (merge_pair returns a new
  list, even when nothing merges);
- a function that still raises NotImplementedError is told what to replace in the student's own
  notebook (:func:`~transformer_lab.checks.engine.messages.stub_left`).

Direct probes (``run.attempt``) are watched too.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from transformer_lab.checks.engine.core import Case, Runner
from transformer_lab.checks.engine.expect import input_change, returned_input, snapshot
from transformer_lab.checks.engine.messages import stub_left

__all__ = ["WatchedRunner"]


def _names(fn: Any, n: int) -> list[str]:
    try:
        names = [p.name for p in inspect.signature(fn).parameters.values()]
    except (TypeError, ValueError):
        names = []
    return (names + [f"#{i + 1}" for i in range(len(names), n)])[:n]


class WatchedRunner(Runner):
    """:class:`Runner` with deep input watching; ``function`` names the student's function in
    the not-implemented message, ``fresh`` the positions of the inputs that must not be returned
    as they are."""

    def __init__(self, *args: Any, function: str = "", fresh: Sequence[int] = (), **kw: Any):
        __tracebackhide__ = True
        self.function = function
        self.fresh = tuple(fresh)
        self._case: Case | None = None
        super().__init__(*args, **kw)

    def call(self, case: Case) -> Any:
        __tracebackhide__ = True
        self._case = case
        try:
            return super().call(case)
        finally:
            self._case = None

    def attempt(self, args: tuple, kwargs: dict) -> tuple[Any, BaseException | None, list]:
        __tracebackhide__ = True
        before = snapshot(tuple(args))
        out, error, calls = super().attempt(args, kwargs)
        if calls:
            return out, error, calls
        if isinstance(error, NotImplementedError):
            self.fail(stub_left(self.function), self._case)
        if error is None:
            names = _names(self.fn, len(args))
            change = input_change(names, args, before)
            if change is not None:
                self.fail(change, self._case)
            kept = [(names[i], args[i]) for i in self.fresh if i < len(args)]
            returned = returned_input(out, [n for n, _ in kept], [a for _, a in kept])
            if returned is not None:
                self.fail(returned, self._case)
        return out, error, calls
