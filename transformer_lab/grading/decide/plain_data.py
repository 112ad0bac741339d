"""The plain data a graded kernel's answers are made of, decoded without unpickling anything.

Tensors come from their dtype, shape and bytes; numbers, strings, sequences, sets and dicts
from their JSON form; the student's exceptions from their type's name (builtins only, anything
else a new class of that name). Objects that are not data arrive as handles, turned into
proxies by :mod:`.remote`. Also the errors of the round trip (:class:`RemoteError`,
:class:`RemoteTimeout`, :class:`NotSendable`, :class:`AnswerRefused`).

Every answer is a claim of the student's code: it is read within the stated limits
(:data:`MAX_ANSWER` characters, :data:`MAX_DEPTH` levels of nesting) or refused, and no error
type it names changes how the grader treats it (a timeout is what the grader's clock saw).
"""

from __future__ import annotations

import base64
import builtins
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

__all__ = [
    "RemoteError",
    "RemoteTimeout",
    "NotSendable",
    "AnswerRefused",
    "MAX_ANSWER",
    "MAX_DEPTH",
    "decode",
    "exception",
]

MAX_ANSWER = 64 << 20  # characters of one answer the grader reads; a longer one is refused
MAX_DEPTH = 32  # levels of nesting of one answer (the kernel's server sends at most 10)
# Builtin exceptions that would change how the grader's own code runs if raised here (the end
# of an iteration): the student's error keeps its name, as a class of its own.
_NEUTRAL = {"StopIteration", "StopAsyncIteration", "KeyboardInterrupt"}
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


class RemoteError(BaseException):
    """The kernel could not answer (it died, or its answer is not plain data).

    A BaseException, so that no check mistakes it for an error of the student's function."""


class NotSendable(Exception):
    """An argument of the check cannot travel to the kernel (an ordinary Exception: a check's
    optional evidence that needs it is skipped; the grader also notes it as a problem)."""


class AnswerRefused(Exception):
    """An answer over the stated limits: the student's call failed (an ordinary Exception, so
    the check reports it as the function's error); the grader also flags it."""


class RemoteTimeout(BaseException):
    """The student's code did not finish within the time limit (a BaseException, like
    RemoteError: the grader, not the check, reports it)."""


def decode(
    item: Any, notes: list[str], proxy: Callable[[int, list[str]], Any], depth: int = 0
) -> Any:
    """The value of one item of an answer; ``proxy(handle, mro)`` stands for a kernel object.

    A plain type's subclass is decoded as its value, and its description added to ``notes``.
    Raises :class:`AnswerRefused` for an answer nested deeper than :data:`MAX_DEPTH`.
    """
    if depth > MAX_DEPTH:
        _too_deep(notes)
    if item is None or isinstance(item, (bool, int, str)):
        return item
    if isinstance(item, list):
        return [decode(v, notes, proxy, depth + 1) for v in item]
    if not isinstance(item, dict):
        raise RemoteError("unexpected value in the kernel's answer")
    if "subclass" in item:  # a subclass of a plain type: its value, and a note
        note = str(item["subclass"])[:200]
        if note not in notes:
            notes.append(note)
        return decode(item.get("value"), notes, proxy, depth + 1)
    if "float" in item:
        return float.fromhex(str(item["float"]))
    if "tensor" in item:
        return _tensor(item)
    if "seq" in item:
        items = [decode(v, notes, proxy, depth + 1) for v in item.get("items", [])]
        return tuple(items) if item["seq"] == "tuple" else items
    if "dict" in item:
        return {str(k): decode(v, notes, proxy, depth + 1) for k, v in dict(item["dict"]).items()}
    if "items" in item and "seq" not in item and "set" not in item:
        try:
            return dict(
                (decode(k, notes, proxy, depth + 1), decode(v, notes, proxy, depth + 1))
                for k, v in item["items"]
            )
        except (TypeError, ValueError):
            raise RemoteError("a dict key that cannot be a key") from None
    if "set" in item:
        values = [decode(v, notes, proxy, depth + 1) for v in item.get("items", [])]
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
        mro = item.get("type")
        mro = [str(m) for m in mro] if isinstance(mro, list) else [str(mro)]
        return proxy(int(item["handle"]), mro)
    raise RemoteError("unexpected value in the kernel's answer")


def _too_deep(notes: list[str]) -> None:
    note = f"an answer nested deeper than {MAX_DEPTH} levels was refused"
    if note not in notes:
        notes.append(note)
    raise AnswerRefused(f"the answer is nested deeper than {MAX_DEPTH} levels")


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


def exception(error: dict) -> BaseException:
    """The student's exception, described by the kernel, as an exception to raise here."""
    name, message = str(error.get("type", "Exception"))[:100], str(error.get("message", ""))[:2000]
    if not name.isidentifier():
        name = "Exception"
    # A claimed interruption is an error of the student's code like any other: only the
    # grader's own clock decides a timeout (execute.py's request loop).
    kind = getattr(builtins, name, None) if name not in _NEUTRAL else None
    if isinstance(kind, type) and issubclass(kind, Exception):
        try:
            return kind(message)
        except Exception:
            pass
    return type(name, (Exception,), {})(message)
