"""The grader's side of a graded kernel: the student's objects as local proxies.

:class:`RemoteKernel` sends one request at a time to the kernel's
:func:`transformer_lab.checks.engine.serve.serve` (in a graded kernel, a message to the comm
target the grader registered before any cell ran: see ``run/execute.py``) and decodes the
answer. The answer is the student's claim: values to compare, within the stated limits
(:data:`MAX_ANSWER`, :data:`~.plain_data.MAX_DEPTH`), or refused and flagged. Only plain data is decoded: tensors from
their dtype, shape and bytes, numbers, strings, sequences and string-keyed dicts; nothing the
kernel sends is unpickled or executed here. Anything else the kernel holds (a model the
student's class built, one of its parameters) is a :class:`RemoteObject`: attribute access,
calls, indexing, iteration, ``isinstance`` and identity work on it as on the real object, so a
check written for local objects runs unchanged on the student's.

The plain-data codec is :mod:`.plain_data` and one call's round trip :mod:`.calls`.
Arguments travel the other way pickled: they come from the grader's checks, never from the
student. A loss whose inputs require gradients comes back connected to them (its backward
pass is computed in the kernel), so checks that differentiate a student's loss work too.
"""

from __future__ import annotations

import ast
import base64
import functools
import importlib
import inspect
import json
import pickle
import time
from collections.abc import Callable
from typing import Any

from transformer_lab.grading.decide import plain_data as _plain
from transformer_lab.grading.decide.calls import call as _call
from transformer_lab.grading.decide.plain_data import (
    MAX_ANSWER,
    NotSendable,
    RemoteError,
    RemoteTimeout,
)

__all__ = [
    "RemoteKernel",
    "RemoteObject",
    "RemoteError",
    "RemoteTimeout",
    "NotSendable",
    "MAX_ANSWER",
]

_LOCAL_CLASSES = ("torch", "transformer_lab")  # classes isinstance may resolve to


class RemoteKernel:
    """Requests to one graded kernel.

    Args:
        send: with ``raw=True`` (the grader), ``send(payload, timeout) -> text`` hands the
            request to the kernel's server and returns its JSON answer; otherwise (in-process
            tests) ``send(expression, timeout) -> text`` evaluates an expression calling the
            server and returns the ``repr`` of its value. Raises RemoteTimeout/RemoteError.
        timeout: seconds one request may take.
        raw: which of the two ``send`` protocols.
    """

    def __init__(
        self, send: Callable[[str, float], str], timeout: float = 30.0, raw: bool = False
    ) -> None:
        self._send = send
        self.timeout = timeout
        self.raw = raw
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
        self.requests += 1
        timeout = self.timeout
        if self.deadline is not None:
            timeout = min(timeout, self.deadline - time.monotonic())
            if timeout <= 0:
                raise RemoteTimeout("grading this cell took longer than its time limit")
        if self.raw:
            text = self._send(payload, timeout)
        else:
            expression = (
                "__import__('transformer_lab.checks.engine.serve', fromlist=['serve'])"
                f".serve({payload!r})"
            )
            text = self._send(expression, timeout)
        if not isinstance(text, str) or len(text) > (MAX_ANSWER if self.raw else 2 * MAX_ANSWER):
            return self._refused(f"an answer over the stated size ({MAX_ANSWER} characters)")
        try:
            value = text if self.raw else ast.literal_eval(text)
            answer = json.loads(value) if isinstance(value, str) else None
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            answer = None
        if not isinstance(answer, dict):
            return self._refused("an answer that is not plain data")
        return answer

    def _refused(self, what: str) -> dict:
        """The answer of a call that failed: ``what`` was refused (and is flagged)."""
        note = f"{what} was refused"
        if note not in self.notes:
            self.notes.append(note)
        return {"error": {"type": "AnswerRefused", "message": f"the grader refused {what}"}}

    def decode(self, item: Any) -> Any:
        """The value of one item of an answer (kernel objects as :class:`RemoteObject`)."""
        return _plain.decode(item, self.notes, self._proxy)

    def _proxy(self, handle: int, mro: list[str]) -> RemoteObject:
        proxy = self._proxies.get(handle)
        if proxy is None:
            proxy = RemoteObject(self, handle, mro)
            self._proxies[handle] = proxy
        return proxy

    def answer(self, answer: dict) -> Any:
        """The decoded ``out`` of an answer, or the student's exception raised here."""
        error = answer.get("error")
        if error:
            raise _plain.exception(error)
        return self.decode(answer.get("out"))

    def reset(self) -> None:
        self._proxies.clear()
        self.request(op="reset")

    def function(self, expression: str) -> RemoteFunction:
        return RemoteFunction(self, {"name": expression}, expression)


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


@functools.cache
def _declared_parameters() -> dict[str, list[str]]:
    """Each exercise's parameter names as the notebook declares them (``exercises.json``'s
    ``signature``, e.g. ``scaled_dot_product_attention(q, k, v, mask=None) -> ...``)."""
    from transformer_lab.checks.registry import load_plain

    found = {}
    for exercise in load_plain().get("exercises", []):
        head = str(exercise.get("signature", ""))
        name, _, rest = head.partition("(")
        inside = rest.split(")", 1)[0]
        params = [p.split("=", 1)[0].strip().lstrip("*") for p in inside.split(",")]
        found[name.strip()] = [p for p in params if p.isidentifier()]
    return found


class RemoteFunction:
    """The student's function (or class) in the kernel, called like a local one. Its signature
    is the exercise's declared one (never the kernel's word), so that a check's message names
    the parameter ("changed its input `q` in place"), as the instant check does."""

    def __init__(self, kernel: RemoteKernel, target: dict, label: str) -> None:
        self._kernel, self._target, self._label = kernel, target, label
        self.__name__ = label.split(".")[-1]
        self.__qualname__ = self.__name__
        names = _declared_parameters().get(self.__name__)
        if names:
            kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
            self.__signature__ = inspect.Signature([inspect.Parameter(n, kind) for n in names])

    def __repr__(self) -> str:
        return f"<the student's {self._label}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _call(self._kernel, self._target, args, kwargs)


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
