"""The graded kernel's side of grading: run the student's code on what the grader sends.

Under ``tlab grade`` the checks do not run in the student's kernel. The grader runs them in
its own process (:mod:`transformer_lab.grading.decide.judge`), and every time a check calls the
student's function, the call is sent here as one silent request (not stored in the kernel's
history): :func:`serve` unpickles the arguments (they come from the grader, never from the
student), calls the student's object, and answers with plain data only (dtype, shape and
bytes of tensors, numbers, strings, sequences). Objects that are not plain data (a model the
student's class built, one of its parameters) stay here under a handle, and the grader works
on them through further requests.

Nothing here computes a reference value: there is nothing in this process for student code to
read. Nothing here is trusted either: a student who changes this module only changes the
values the grader receives.

About 300 lines, kept whole: one request protocol (decode, call, encode, handles), which the
grader's remote.py mirrors.
"""

from __future__ import annotations

import base64
import json
import pickle
import sys
from typing import Any

import torch

from transformer_lab.checks.engine.forbid import Forbidden, ReferenceUsed, forbid
from transformer_lab.checks.engine.grading_hooks import findings

__all__ = ["serve", "open_channel", "CHANNEL"]

CHANNEL = "tlab.grader"  # the Jupyter comm target the grader's requests are sent to

_HANDLES: dict[int, Any] = {}
_BY_ID: dict[int, int] = {}  # id(object) -> its handle: the same object, the same handle
_GRAPHS: dict[int, tuple[Any, list]] = {}  # handle of a call -> (output, its grad inputs)
_NEXT = [1]
# Where names are looked up: the last namespace pushed here (the tests' stand-in for a kernel),
# else the IPython user namespace. (A list: the module is sealed, its names cannot be rebound.)
NAMESPACES: list[dict] = []
_MAX_BYTES = 64 << 20  # per answer


def _keep(obj: Any) -> int:
    handle = _BY_ID.get(id(obj))
    if handle is not None and _HANDLES.get(handle) is obj:
        return handle
    handle = _NEXT[0]
    _NEXT[0] += 1
    _HANDLES[handle] = obj  # kept alive, so its id is not reused
    _BY_ID[id(obj)] = handle
    return handle


def _encode(value: Any, depth: int = 0, attribute: bool = False) -> Any:
    """Plain JSON data for ``value``; anything else is kept here and sent as a handle.

    Tensors reached by attribute access (a model's parameters) stay here as handles, so the
    grader's in-place operations (``weight.copy_``) change the student's object."""
    kind = type(value)
    if depth > 8:
        return {"handle": _keep(value), "type": _type_name(value)}
    if value is None or kind in (bool, int, str):
        return value
    if kind is float:
        return {"float": float.hex(value)}
    if isinstance(value, torch.Size):
        return {"seq": "tuple", "items": [int(v) for v in value]}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"device": str(value)}
    if isinstance(value, torch.Tensor) and not attribute:
        if kind in (torch.Tensor, torch.nn.Parameter):
            return _tensor(value)
        note = f"returned a {kind.__qualname__}, a subclass of torch.Tensor"
        return {"subclass": note, "value": _tensor(value)}  # its data, never its behaviour
    for base in (bool, int, float, str):
        if isinstance(value, base) and kind is not base:
            note = f"returned a {kind.__qualname__}, a subclass of {base.__name__}"
            plain = base.__new__(base, value) if base is not bool else bool(int(value))
            return {"subclass": note, "value": _encode(plain, depth + 1)}
    if kind in (tuple, list):
        return {
            "seq": kind.__name__,
            "items": [_encode(v, depth + 1) for v in value],
        }
    if isinstance(value, dict) and type(value).__module__ in ("builtins", "collections"):
        if all(type(k) is str for k in value):  # dict, OrderedDict, Counter, defaultdict
            return {"dict": {k: _encode(v, depth + 1) for k, v in value.items()}}
        return {"items": [[_encode(k, depth + 1), _encode(v, depth + 1)] for k, v in value.items()]}
    if kind in (set, frozenset):
        return {"set": kind.__name__, "items": [_encode(v, depth + 1) for v in value]}
    if kind is bytes:
        return {"bytes": base64.b64encode(value).decode()}
    return {"handle": _keep(value), "type": _type_name(value)}


def _type_name(value: Any) -> list[str]:
    """The class and its bases, most derived first ('module:qualname' each)."""
    return [f"{k.__module__}:{k.__qualname__}" for k in type(value).__mro__]


def _tensor(value: torch.Tensor) -> dict:
    with torch._C.DisableTorchFunction():
        base = torch.Tensor.as_subclass(value, torch.Tensor).detach().cpu()
        if base.is_complex() or base.dtype in (torch.bfloat16, torch.float8_e4m3fn):
            base = base.to(torch.complex128 if base.is_complex() else torch.float64)
        data = base.contiguous().numpy().tobytes()
    return {
        "tensor": str(base.dtype).removeprefix("torch."),
        "shape": list(base.shape),
        "data": base64.b64encode(data).decode(),
        "requires_grad": bool(value.requires_grad),
    }


def _resolve(target: Any) -> Any:
    if isinstance(target, dict) and "handle" in target:
        return _HANDLES[target["handle"]]
    if isinstance(target, dict) and "name" in target:
        shell = _shell()
        if NAMESPACES:
            namespace = NAMESPACES[-1]
        elif shell is not None:
            namespace = shell.user_ns
        else:
            namespace = sys.modules["__main__"].__dict__
        return eval(target["name"], namespace)  # an expression of the instructor's test cell
    raise ValueError("unknown target")


def _shell():
    try:
        from IPython import get_ipython

        return get_ipython()
    except Exception:
        return None


def _unhandle(value: Any) -> Any:
    """Arguments that refer to objects kept here (e.g. a parameter passed back) become them."""
    if isinstance(value, _Ref):
        return _HANDLES[value.handle]
    if isinstance(value, tuple):
        return tuple(_unhandle(v) for v in value)
    if isinstance(value, list):
        return [_unhandle(v) for v in value]
    if isinstance(value, dict):
        return {k: _unhandle(v) for k, v in value.items()}
    return value


class _Ref:
    """A handle inside pickled arguments (the grader pickles its proxies as these)."""

    def __init__(self, handle: int) -> None:
        self.handle = handle


def _forbidden(spec: list[dict]) -> list[Forbidden]:
    """Rebuild the check's list of references the student's function may not call."""
    import importlib

    items = []
    for entry in spec:
        function = None
        if entry.get("function"):
            module, _, qualname = entry["function"].partition(":")
            try:
                function = importlib.import_module(module)
                for part in qualname.split("."):
                    function = getattr(function, part)
            except Exception:
                function = None
        codes = set()
        for ref in entry.get("codes", []):
            module, _, qualname = ref.partition(":")
            try:
                obj = importlib.import_module(module)
                for part in qualname.split("."):
                    obj = getattr(obj, part)
                codes.add(obj.__code__)
            except Exception:
                continue
        items.append(
            Forbidden(
                entry["label"],
                function=function if getattr(function, "__code__", None) else None,
                builtin_names=tuple(entry.get("builtin_names", ())),
                codes=codes,
            )
        )
    return items


def _snapshot(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, list):
        return [_snapshot(v) for v in value]
    return None


def _changed(before: Any, after: Any) -> bool:
    if isinstance(before, torch.Tensor):
        return not (
            isinstance(after, torch.Tensor)
            and after.shape == before.shape
            and after.dtype == before.dtype
            and bool(torch.equal(after.detach(), before))
        )
    if isinstance(before, list):
        return not isinstance(after, list) or len(after) != len(before)
    return False


def _call(request: dict) -> dict:
    target = _resolve(request["target"])
    args = _unhandle(request.get("args", ()))
    kwargs = _unhandle(request.get("kwargs", {}))
    before = [_snapshot(a) for a in args]
    before_kw = {k: _snapshot(v) for k, v in kwargs.items()}
    grad = bool(request.get("grad"))
    grad_enabled = bool(request.get("grad_enabled", True))
    leaves = []
    if grad:
        for a in args:
            if isinstance(a, torch.Tensor) and a.requires_grad:
                leaves.append(a)
    out, error, calls = None, None, []
    with forbid(_forbidden(request.get("forbidden", []))) as seen:
        try:
            with torch.set_grad_enabled(grad_enabled):
                out = target(*args, **kwargs)
        except ReferenceUsed as exc:
            error = exc
        except Exception as exc:  # the student's error is data for the check
            error = exc
    calls = list(seen)
    answer: dict = {"calls": calls}
    if error is not None:
        answer["error"] = {"type": type(error).__name__, "message": str(error)[:2000]}
        if isinstance(error, NotImplementedError):
            answer["error"]["type"] = "NotImplementedError"
        return answer
    mutated = {}
    for i, (a, b) in enumerate(zip(args, before)):
        if b is not None and _changed(b, a):
            mutated[str(i)] = _encode(a) if isinstance(a, (torch.Tensor, list)) else None
    for k, b in before_kw.items():
        if b is not None and _changed(b, kwargs[k]):
            value = kwargs[k]
            mutated[k] = _encode(value) if isinstance(value, (torch.Tensor, list)) else None
    answer["mutated"] = mutated
    synced = {}
    for i, a in enumerate(args):
        for key, obj in ((str(i), a), (f"{i}.recorder", getattr(a, "_tlab_recorder", None))):
            names = getattr(type(obj), "_tlab_sync", None)
            if obj is not None and isinstance(names, tuple):
                synced[key] = {
                    n: _encode(getattr(obj, n, None)) for n in names if isinstance(n, str)
                }
    answer["synced"] = synced
    answer["out"] = _encode(out)
    if grad and isinstance(out, torch.Tensor) and out.requires_grad and leaves:
        handle = _keep(out)
        _GRAPHS[handle] = (out, leaves)
        answer["graph"] = handle
    return answer


def _vjp(request: dict) -> dict:
    out, leaves = _GRAPHS.pop(request["graph"])
    grad_out = request["grad_output"]
    grads = torch.autograd.grad(out, leaves, grad_out, allow_unused=True)
    grads = [g if g is not None else torch.zeros_like(x) for g, x in zip(grads, leaves)]
    return {"out": _encode(grads)}


def open_channel(kernel: Any) -> None:
    """Answer the grader's requests on a comm target of ``kernel`` (called before any cell).

    The request arrives as a ``comm_open`` message, never as an expression evaluated in the
    notebook's namespace, so no name a notebook binds (``__import__``, ``sys.modules``, a
    global) stands between the grader and :func:`serve`; ``answer`` is captured here, before
    any of the student's code ran. The grader still trusts nothing it receives: the answer is
    data to compare with what the grader computed.
    """
    answer = serve

    def target(comm: Any, message: dict) -> None:
        try:
            data = (message.get("content") or {}).get("data") or {}
            text = answer(str(data.get("r", "")))
        except BaseException as exc:  # an interrupt that arrived late: still an answer
            text = json.dumps({"error": {"type": type(exc).__name__, "message": ""}})
        try:
            comm.send({"r": text})
        except BaseException:  # noqa: BLE001 - the same, during the send: send it again
            comm.send({"r": text})
        finally:
            comm.close()

    kernel.comm_manager.register_target(CHANNEL, target)


def serve(payload: str) -> str:
    """Answer one request of the grader (a base64 pickle); returns a JSON string."""
    try:
        request = pickle.loads(base64.b64decode(payload))
        op = request["op"]
        if op == "call":
            answer = _call(request)
        elif op == "name":  # a name of the notebook, for the instructor's hidden asserts
            answer = {"out": _encode(_resolve(request["target"]))}
        elif op == "getattr":
            value = getattr(_resolve(request["target"]), request["name"])
            answer = {"out": _encode(value, attribute=True)}
        elif op == "setattr":
            setattr(_resolve(request["target"]), request["name"], _unhandle(request["value"]))
            answer = {"out": None}
        elif op == "getitem":
            answer = {"out": _encode(_resolve(request["target"])[request["key"]], attribute=True)}
        elif op == "len":
            answer = {"out": len(_resolve(request["target"]))}
        elif op == "list":
            answer = {"out": _encode(list(_resolve(request["target"])))}
        elif op == "vjp":
            answer = _vjp(request)
        elif op == "findings":
            from transformer_lab.checks.engine.grading_hooks import _STATE

            answer = {"out": findings() if _STATE["grading"] else []}
        elif op == "reset":
            _HANDLES.clear()
            _BY_ID.clear()
            _GRAPHS.clear()
            answer = {"out": None}
        else:
            answer = {"error": {"type": "ValueError", "message": f"unknown request {op!r}"}}
    except BaseException as exc:  # a request that cannot be answered is a wrong answer
        answer = {"error": {"type": type(exc).__name__, "message": str(exc)[:2000]}}
    text = json.dumps(answer)
    if len(text) > _MAX_BYTES:
        text = json.dumps({"error": {"type": "ValueError", "message": "answer too large"}})
    return text
