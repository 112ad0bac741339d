"""One call of the student's function in the graded kernel, seen from the grader.

The arguments go out pickled (tensors keep ``requires_grad``, proxies become handles) with the
exercise's forbidden references (the kernel's guard is the student's feedback: what it reports
is a flag, never a verdict); the value comes back as plain data, the arguments the student's
function changed in place are written back, and a loss whose inputs need gradients is connected
to them through :class:`_Bridge` (its backward pass is computed in the kernel). ``kernel`` is a
:class:`~.remote.RemoteKernel`.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import torch

__all__ = ["call"]


class _Bridge(torch.autograd.Function):
    """Connects a value computed in the kernel to the grader's inputs that require gradients."""

    @staticmethod
    def forward(ctx, kernel, graph, value, *leaves):  # noqa: D401
        ctx.kernel, ctx.graph, ctx.n = kernel, graph, len(leaves)
        return value.detach().clone()

    @staticmethod
    def backward(ctx, grad_output):
        grads = ctx.kernel.answer(
            ctx.kernel.request(op="vjp", graph=ctx.graph, grad_output=grad_output.detach())
        )
        return (None, None, None, *grads)


def call(kernel, target: dict, args: tuple, kwargs: dict) -> Any:
    """Call ``target`` (a name or a handle) in the kernel with ``args`` and ``kwargs``."""
    from transformer_lab.checks.engine import grading_hooks

    items, sink = grading_hooks.active_forbidden()
    grad_enabled = torch.is_grad_enabled()
    leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    # The checks' call monitor (a profile hook) watches this process, where no student code
    # runs; switched off for the round trip, it would otherwise see every call of the client.
    hook = sys.getprofile()
    sys.setprofile(None)
    try:
        answer = _send_call(kernel, target, args, kwargs, items, grad_enabled, leaves)
    finally:
        sys.setprofile(hook)
    # The kernel's call log is the student's claim: a call it reports is a flag for a person,
    # never a failure, and its absence proves nothing (the graded build holds no reference).
    del sink
    reported = answer.get("calls")
    for label in reported[:5] if isinstance(reported, list) else []:
        note = f"the kernel reported a call of {str(label)[:120]}"
        if note not in kernel.notes:
            kernel.notes.append(note)
    return _received(kernel, answer, args, kwargs, leaves)


def _send_call(kernel, target, args, kwargs, items, grad_enabled, leaves) -> dict:
    return kernel.request(
        op="call",
        target=target,
        args=tuple(_detach_for_wire(a) for a in args),
        kwargs={k: _detach_for_wire(v) for k, v in kwargs.items()},
        forbidden=_forbidden_spec(items),
        grad_enabled=grad_enabled,
        grad=bool(leaves) and grad_enabled,
    )


def _received(kernel, answer: dict, args: tuple, kwargs: dict, leaves: list) -> Any:
    """The call's value, with the arguments the student's function changed written back."""
    value = kernel.answer(answer)
    for key, new in (answer.get("mutated") or {}).items():
        old = args[int(key)] if key.isdigit() and int(key) < len(args) else kwargs.get(key)
        _write_back(old, kernel.decode(new) if new is not None else None)
    for key, attributes in (answer.get("synced") or {}).items():
        index, _, part = str(key).partition(".")
        if not (index.isdigit() and int(index) < len(args)) or part not in ("", "recorder"):
            continue
        target = args[int(index)] if not part else getattr(args[int(index)], "_tlab_recorder", None)
        names = getattr(type(target), "_tlab_sync", ())
        for name in names if isinstance(attributes, dict) else ():
            if name in attributes:  # only the attributes the check's own class declares
                setattr(target, name, kernel.decode(attributes[name]))
    graph = answer.get("graph")
    if graph is not None and isinstance(value, torch.Tensor) and leaves:
        value = _Bridge.apply(kernel, int(graph), value, *leaves)
    return value


def _detach_for_wire(value: Any) -> Any:
    """Pickle-safe arguments: proxies become handles; tensors keep requires_grad."""
    if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
        if value.requires_grad and not value.is_leaf:
            return value.detach().requires_grad_(True)
    return value


def _write_back(old: Any, new: Any) -> None:
    """Show the grader's copy of an argument that the student's function changed in place."""
    if isinstance(old, torch.Tensor):
        with torch.no_grad():
            if isinstance(new, torch.Tensor) and new.shape == old.shape:
                old.copy_(new.to(old.dtype))
            else:
                old.add_(float("nan") if old.is_floating_point() else 1)
    elif isinstance(old, list) and isinstance(new, list):
        old[:] = new


def _forbidden_spec(items: list) -> list[dict]:
    spec = []
    for item in items or []:
        function = item.function
        codes = []
        for code in item.codes:
            ref = _code_ref(code)
            if ref:
                codes.append(ref)
        spec.append(
            {
                "label": item.label,
                "function": f"{function.__module__}:{function.__qualname__}" if function else None,
                "builtin_names": list(item.builtin_names),
                "codes": codes,
            }
        )
    return spec


@functools.lru_cache(maxsize=256)
def _code_ref(code) -> str | None:
    """'module:qualname' of the function that owns ``code`` (found through sys.modules)."""
    import os
    import sys

    filename = os.path.abspath(code.co_filename)
    qualname = getattr(code, "co_qualname", code.co_name)
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if path and os.path.abspath(path) == filename:
            return f"{name}:{qualname}"
    return None
