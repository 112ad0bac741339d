"""The grader's side of a graded kernel: the student's objects as local proxies.

:class:`RemoteKernel` sends one request at a time to the kernel's
:func:`transformer_lab.checks.engine.serve.serve` (a silent execution whose answer comes back in the
reply's ``user_expressions``) and decodes the answer. Only plain data is decoded: tensors from
their dtype, shape and bytes, numbers, strings, sequences and string-keyed dicts; nothing the
kernel sends is unpickled or executed here. Anything else the kernel holds (a model the
student's class built, one of its parameters) is a :class:`RemoteObject`: attribute access,
calls, indexing, iteration, ``isinstance`` and identity work on it as on the real object, so a
check written for local objects runs unchanged on the student's.

Arguments travel the other way pickled: they come from the grader's checks, never from the
student. A loss whose inputs require gradients comes back connected to them (its backward
pass is computed in the kernel), so checks that differentiate a student's loss work too.
"""

from __future__ import annotations

import ast
import base64
import builtins
import functools
import importlib
import json
import pickle
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

__all__ = [
    "RemoteKernel",
    "RemoteObject",
    "RemoteError",
    "RemoteTimeout",
    "NotSendable",
    "MAX_ANSWER",
]

MAX_ANSWER = 64 << 20  # bytes of one answer the grader reads
_DTYPES = {
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "bool",
}
_LOCAL_CLASSES = ("torch", "transformer_lab")  # classes isinstance may resolve to


class RemoteError(BaseException):
    """The kernel could not answer (it died, or its answer is not plain data).

    A BaseException, so that no check mistakes it for an error of the student's function."""


class NotSendable(Exception):
    """An argument of the check cannot travel to the kernel (an ordinary Exception: a check's
    optional evidence that needs it is skipped; the grader also notes it as a problem)."""


class RemoteTimeout(BaseException):
    """The student's code did not finish within the time limit (a BaseException, like
    RemoteError: the grader, not the check, reports it)."""


class RemoteKernel:
    """Requests to one graded kernel.

    Args:
        send: ``send(expression, timeout) -> text`` evaluates ``expression`` in the kernel
            silently and returns the ``text/plain`` of its value (raises RemoteTimeout/RemoteError).
        timeout: seconds one request may take.
    """

    def __init__(self, send: Callable[[str, float], str], timeout: float = 30.0) -> None:
        self._send = send
        self.timeout = timeout
        self._proxies: dict[int, RemoteObject] = {}
        self.requests = 0
        self.deadline: float | None = None  # time.monotonic() after which nothing more is sent
        self.problems: list[str] = []  # the grader's own failures (for the instructor)
        self.notes: list[str] = []  # what the kernel's values showed (for the review flags)

    def request(self, **request: Any) -> dict:
        try:
            payload = base64.b64encode(pickle.dumps(request, protocol=4)).decode()
        except Exception as exc:  # the grader's own arguments: its failure, never the student's
            self.problems.append(f"could not send a check's arguments ({exc})")
            raise NotSendable(f"the grader could not send these arguments ({exc})") from None
        expression = f"__import__('transformer_lab.checks.engine.serve', fromlist=['serve']).serve({payload!r})"
        self.requests += 1
        timeout = self.timeout
        if self.deadline is not None:
            timeout = min(timeout, self.deadline - time.monotonic())
            if timeout <= 0:
                raise RemoteTimeout("grading this cell took longer than its time limit")
        text = self._send(expression, timeout)
        if len(text) > 2 * MAX_ANSWER:
            raise RemoteError("the kernel's answer is too large")
        try:
            value = ast.literal_eval(text)
            answer = json.loads(value) if isinstance(value, str) else None
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            answer = None
        if not isinstance(answer, dict):
            raise RemoteError("the kernel's answer is not plain data")
        return answer

    # -- decoding ---------------------------------------------------------------------
    def decode(self, item: Any) -> Any:
        if item is None or isinstance(item, (bool, int, str)):
            return item
        if isinstance(item, list):
            return [self.decode(v) for v in item]
        if not isinstance(item, dict):
            raise RemoteError("unexpected value in the kernel's answer")
        if "subclass" in item:  # a subclass of a plain type: its value, and a note
            note = str(item["subclass"])[:200]
            if note not in self.notes:
                self.notes.append(note)
            return self.decode(item.get("value"))
        if "float" in item:
            return float.fromhex(str(item["float"]))
        if "tensor" in item:
            return _tensor(item)
        if "seq" in item:
            items = [self.decode(v) for v in item.get("items", [])]
            return tuple(items) if item["seq"] == "tuple" else items
        if "dict" in item:
            return {str(k): self.decode(v) for k, v in dict(item["dict"]).items()}
        if "items" in item and "seq" not in item and "set" not in item:
            try:
                return dict((self.decode(k), self.decode(v)) for k, v in item["items"])
            except (TypeError, ValueError):
                raise RemoteError("a dict key that cannot be a key") from None
        if "set" in item:
            values = [self.decode(v) for v in item.get("items", [])]
            try:
                return frozenset(values) if item["set"] == "frozenset" else set(values)
            except TypeError:
                raise RemoteError("a set item that cannot be hashed") from None
        if "bytes" in item:
            return base64.b64decode(str(item["bytes"]))
        if "dtype" in item:
            name = str(item["dtype"])
            if name not in _DTYPES:
                raise RemoteError(f"unknown dtype {name!r}")
            return getattr(torch, name)
        if "device" in item:
            return torch.device(str(item["device"]))
        if "handle" in item:
            handle = int(item["handle"])
            proxy = self._proxies.get(handle)
            if proxy is None:
                mro = item.get("type")
                mro = [str(m) for m in mro] if isinstance(mro, list) else [str(mro)]
                proxy = RemoteObject(self, handle, mro)
                self._proxies[handle] = proxy
            return proxy
        raise RemoteError("unexpected value in the kernel's answer")

    def answer(self, answer: dict) -> Any:
        """The decoded ``out`` of an answer, or the student's exception raised here."""
        error = answer.get("error")
        if error:
            raise _exception(error)
        return self.decode(answer.get("out"))

    def reset(self) -> None:
        self._proxies.clear()
        self.request(op="reset")

    def function(self, expression: str) -> RemoteFunction:
        return RemoteFunction(self, {"name": expression}, expression)


def _tensor(item: dict) -> torch.Tensor:
    dtype = str(item.get("tensor"))
    if dtype not in _DTYPES:
        raise RemoteError(f"unknown tensor dtype {dtype!r}")
    shape = [int(s) for s in item.get("shape", [])]
    if any(s < 0 for s in shape):
        raise RemoteError("negative tensor size")
    raw = base64.b64decode(str(item.get("data", "")))
    array = np.frombuffer(raw, dtype=np.dtype(dtype)).copy()
    if array.size != int(np.prod(shape, dtype=np.int64)):
        raise RemoteError("tensor bytes do not match its shape")
    tensor = torch.from_numpy(array.reshape(shape))
    if item.get("requires_grad") and tensor.is_floating_point():
        tensor.requires_grad_(True)
    return tensor


def _exception(error: dict) -> BaseException:
    from transformer_lab.checks.engine.forbid import ReferenceUsed

    name, message = str(error.get("type", "Exception")), str(error.get("message", ""))
    if name == "ReferenceUsed":
        return ReferenceUsed(message)
    if name == "KeyboardInterrupt":
        return RemoteTimeout("your function did not finish within the time limit")
    kind = getattr(builtins, name, None)
    if isinstance(kind, type) and issubclass(kind, Exception):
        try:
            return kind(message)
        except Exception:
            pass
    return type(name, (Exception,), {})(message)


def _local_class(type_name: str) -> type | None:
    module, _, qualname = type_name.partition(":")
    if not module.startswith(_LOCAL_CLASSES):
        return None
    try:
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except Exception:
        return None
    return obj if isinstance(obj, type) else None


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


class RemoteFunction:
    """The student's function (or class) in the kernel, called like a local one."""

    def __init__(self, kernel: RemoteKernel, target: dict, label: str) -> None:
        self._kernel, self._target, self._label = kernel, target, label
        self.__name__ = label.split(".")[-1]
        self.__qualname__ = self.__name__

    def __repr__(self) -> str:
        return f"<the student's {self._label}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _call(self._kernel, self._target, args, kwargs)


def _call(kernel: RemoteKernel, target: dict, args: tuple, kwargs: dict) -> Any:
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
    if sink is not None:
        sink.extend(str(c) for c in answer.get("calls") or [])
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


class RemoteObject:
    """An object that lives in the graded kernel (the same object is always the same proxy)."""

    __slots__ = ("_kernel", "_handle", "_type")

    def __init__(self, kernel: RemoteKernel, handle: int, mro: list[str]) -> None:
        object.__setattr__(self, "_kernel", kernel)
        object.__setattr__(self, "_handle", handle)
        object.__setattr__(self, "_type", mro or ["builtins:object"])

    @property
    def __class__(self):  # isinstance(proxy, nn.Module) answers for the real object
        for name in object.__getattribute__(self, "_type"):  # the nearest class known here
            local = _local_class(name)
            if local is not None:
                return local
        return RemoteObject

    def __reduce__(self):
        from transformer_lab.checks.engine.serve import _Ref

        return (_Ref, (object.__getattribute__(self, "_handle"),))

    def _ask(self, **request: Any) -> Any:
        kernel = object.__getattribute__(self, "_kernel")
        handle = object.__getattribute__(self, "_handle")
        return kernel.answer(kernel.request(target={"handle": handle}, **request))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self._ask(op="getattr", name=name)

    def __setattr__(self, name: str, value: Any) -> None:
        self._ask(op="setattr", name=name, value=value)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        kernel = object.__getattribute__(self, "_kernel")
        return _call(kernel, {"handle": object.__getattribute__(self, "_handle")}, args, kwargs)

    def __getitem__(self, key: Any) -> Any:
        return self._ask(op="getitem", key=key)

    def __len__(self) -> int:
        return int(self._ask(op="len"))

    def __iter__(self):
        return iter(self._ask(op="list"))

    def __repr__(self) -> str:
        return f"<{object.__getattribute__(self, '_type')[0].split(':')[-1]} in the graded kernel>"
