"""Grading integrity: the checks trust nothing that notebook code can change after import.

Three mechanisms, all used by every check:

1. **Snapshot.** When ``transformer_lab.checks`` is imported (the grader imports it before
   any student cell runs), it records every public function of torch, ``torch.Tensor``,
   ``torch.nn.functional``, ``torch.testing``, numpy, ``numpy.testing``, the package's
   reference modules (with their code objects) and the checks themselves. Each check first
   calls :func:`verify`, which names anything replaced since, e.g. ``torch.allclose``.
2. **References disabled.** :func:`forbid` runs the student's function while the reference
   for the graded thing cannot be used: the reference's ``__code__`` is swapped for one that
   raises (so any alias, ``from transformer_lab.attention import softmax as sm``, is caught),
   and a profile hook records any call into the reference's code or into PyTorch's built-in
   equivalent (so a copied function object is caught too).
3. **Sealed module.** The checks modules refuse attribute assignment, and their public
   functions are served from a registry, so ``checks.check_softmax = lambda f: None`` fails.

This is defence against ordinary monkeypatching, not a sandbox: student code runs with the
grader's rights (see docs/instructor_guide.md).
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import numpy.testing  # noqa: F401  (snapshotted below)
import torch
import torch.nn.functional as F
import torch.testing  # noqa: F401

__all__ = ["ReferenceUsed", "Forbidden", "verify", "forbid", "seal", "TRUSTED"]


_MISSING = object()


class ReferenceUsed(BaseException):
    """Raised inside a student's function that calls a disabled reference.

    A BaseException, so a student's ``except Exception`` cannot swallow it.
    """


class _Trusted(NamedTuple):
    """The functions the checks compare with (a tuple: notebook code cannot reassign them)."""

    allclose: Any
    isfinite: Any
    isnan: Any
    equal: Any
    is_tensor: Any
    getprofile: Any
    setprofile: Any


# Trusted copies of what the checks use to compare, taken at import (immutable).
TRUSTED = _Trusted(
    allclose=torch.allclose,
    isfinite=torch.isfinite,
    isnan=torch.isnan,
    equal=torch.equal,
    is_tensor=torch.is_tensor,
    getprofile=sys.getprofile,
    setprofile=sys.setprofile,
)


def _watched() -> list[tuple[str, object]]:
    import transformer_lab._validate as v
    import transformer_lab.attention as a
    import transformer_lab.blocks as b
    import transformer_lab.bpe as bp
    import transformer_lab.heads as h
    import transformer_lab.masks as m
    import transformer_lab.positional as p

    return [
        ("torch", torch),
        ("torch.nn.functional", F),
        ("torch.testing", torch.testing),
        ("numpy", np),
        ("numpy.testing", np.testing),
        ("transformer_lab.attention", a),
        ("transformer_lab.heads", h),
        ("transformer_lab.masks", m),
        ("transformer_lab.positional", p),
        ("transformer_lab.blocks", b),
        ("transformer_lab._validate", v),
        ("transformer_lab.bpe", bp),
    ]


def _entries(label: str, owner: object) -> Iterator[tuple[str, object, str, object, object]]:
    """(label, owner, attribute, object, code or None) for the callables worth watching."""
    is_class = isinstance(owner, type)
    package_module = label.startswith("transformer_lab")
    for name, obj in list(vars(owner).items()):
        if name.startswith("__") and not is_class:
            continue
        if isinstance(obj, types.ModuleType) or not (
            callable(obj) or isinstance(obj, (staticmethod, classmethod))
        ):
            continue
        yield label, owner, name, obj, getattr(obj, "__code__", None)
        # Methods of the package's own classes (e.g. MultiHeadAttention.forward).
        if (
            package_module
            and isinstance(obj, type)
            and obj.__module__ == getattr(owner, "__name__", None)
        ):
            for mname, meth in vars(obj).items():
                code = getattr(meth, "__code__", None)
                if code is not None:
                    yield f"{label}.{name}", obj, mname, meth, code


# owner id -> (label, owner, {attribute: (object, code)})
_SNAPSHOT: dict[int, tuple[str, object, dict[str, tuple[object, object]]]] = {}
_SEALED: dict[str, dict[str, object]] = {}  # module name -> public registry


# Classes whose every attribute (own or inherited, e.g. Tensor.__eq__ from TensorBase) is watched.
_CLASSES: list[tuple[str, type]] = [("torch.Tensor", torch.Tensor)]
_CLASS_SNAPSHOT: dict[str, dict[str, object]] = {}


def _static_lookup(cls: type, name: str) -> object:
    """What ``cls.name`` resolves to, without triggering descriptors (binding makes new objects)."""
    for klass in cls.__mro__:
        namespace = vars(klass)
        if name in namespace:
            return namespace[name]
    return _MISSING


def take_snapshot() -> None:
    """Record the watched callables (called once, at import of transformer_lab.checks)."""
    for label, owner in _watched():
        for sublabel, obj_owner, attr, obj, code in _entries(label, owner):
            entry = _SNAPSHOT.setdefault(id(obj_owner), (sublabel, obj_owner, {}))
            entry[2][attr] = (obj, code)
    for label, cls in _CLASSES:
        _CLASS_SNAPSHOT[label] = {name: _static_lookup(cls, name) for name in dir(cls)}


_TORCH_DIR = os.path.dirname(torch.__file__)


def _torch_rewrap(current: object, original: object) -> bool:
    """True if PyTorch itself wrapped ``original`` (``torch._dynamo`` re-wraps ``torch.manual_seed``
    when anything imports it: ``torch.compile``, the FLOP counter, ``transformers``)."""
    code = getattr(current, "__code__", None)
    return (
        getattr(current, "__wrapped__", None) is original
        and code is not None
        and os.path.abspath(code.co_filename).startswith(_TORCH_DIR + os.sep)
    )


def tampered() -> list[str]:
    """Names of watched callables that were replaced, deleted or had their code swapped."""
    bad = []
    for label, owner, attrs in _SNAPSHOT.values():
        namespace = vars(owner)
        for attr, (obj, code) in attrs.items():
            current = namespace.get(attr, _MISSING)
            if _torch_rewrap(current, obj):
                current = obj  # PyTorch's own wrapper around the recorded function: check that one
            if current is not obj:
                bad.append(f"{label}.{attr}")
            elif code is not None and getattr(current, "__code__", None) is not code:
                bad.append(f"{label}.{attr}.__code__")
    for label, cls in _CLASSES:
        for name, obj in _CLASS_SNAPSHOT[label].items():
            if _static_lookup(cls, name) is not obj:
                bad.append(f"{label}.{name}")
    for modname, namespace_then in _SEALED_NAMESPACES.items():
        module = sys.modules.get(modname)
        if module is None:
            bad.append(modname)
            continue
        namespace = object.__getattribute__(module, "__dict__")
        for name, obj in namespace_then.items():
            if namespace.get(name, _MISSING) is not obj:
                bad.append(f"{modname}.{name}")
            elif (modname, name) in _SEALED_CODES and obj.__code__ is not _SEALED_CODES[
                (modname, name)
            ]:
                bad.append(f"{modname}.{name}.__code__")
    return bad


_SEALED_CODES: dict[tuple[str, str], object] = {}
_SEALED_NAMESPACES: dict[str, dict[str, object]] = {}


def verify(check_name: str) -> None:
    """Raise AssertionError naming every watched function that notebook code replaced."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    bad = tampered()
    if bad:
        shown = ", ".join(f"`{b}`" for b in bad[:5]) + (
            f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        )
        raise AssertionError(
            f"{check_name}: grading integrity: {shown} changed after transformer_lab.checks was imported. "
            f"The checks refuse to run with replaced comparison or reference functions; remove the code "
            f"that patches them and restart the kernel."
        )


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


class _SealedModule(types.ModuleType):
    """A module whose public checks cannot be replaced from notebook code."""

    def __getattribute__(self, name: str):
        registry = _SEALED.get(object.__getattribute__(self, "__name__"))
        if registry is not None and name in registry:
            return registry[name]
        return super().__getattribute__(name)

    def __setattr__(self, name: str, value) -> None:
        registry = _SEALED.get(object.__getattribute__(self, "__name__"))
        if registry is not None and (
            name in registry or (not name.startswith("__") and name in self.__dict__)
        ):
            raise AttributeError(
                f"{self.__name__} is read-only: notebook code cannot replace {name!r} "
                f"(the graded tests always use the original checks)."
            )
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        registry = _SEALED.get(object.__getattribute__(self, "__name__"))
        if registry is not None and (name in registry or not name.startswith("__")):
            raise AttributeError(
                f"{self.__name__} is read-only: notebook code cannot delete {name!r}."
            )
        super().__delattr__(name)


def seal(module_name: str) -> None:
    """Make ``module_name`` read-only and serve its public callables from a private registry."""
    module = sys.modules[module_name]
    registry = {
        name: obj
        for name, obj in vars(module).items()
        if not name.startswith("_") and (callable(obj) or isinstance(obj, types.ModuleType))
    }
    _SEALED[module_name] = registry
    _SEALED_NAMESPACES[module_name] = {
        k: v for k, v in vars(module).items() if not k.startswith("__")
    }
    for name, obj in _SEALED_NAMESPACES[module_name].items():
        code = getattr(obj, "__code__", None)
        if code is not None and getattr(obj, "__module__", None) == module_name:
            _SEALED_CODES[(module_name, name)] = code
    module.__class__ = _SealedModule


# ---------------------------------------------------------------------------------------------
# Grading. Under ``tlab grade`` the checks run in the grader's own process
# (transformer_lab.grading.judge) and call the student's function in the graded kernel through
# transformer_lab.checks.engine.serve. In the kernel, :func:`arm` makes the public checks print that
# the grader decides (so no reference value is computed where student code runs) and an audit
# hook notes suspicious events, which the grader reads as review flags (:func:`findings`).
# In the grader, :func:`judging` seeds the hidden cases from the run's secret.

_STATE: dict[str, Any] = {
    "grading": False,  # this kernel is graded: the checks run in the grader, not here
    "secret": None,  # in the grader's own process: this run's secret, while a hidden check runs
    "forbidding": None,  # (items, calls) of the forbid() block running now
    "student": False,  # is the grader running a cell of student code right now?
    "events": [],  # suspicious audit events seen while student code ran
    "threads": set(),  # thread idents alive when armed
    "modules": {},  # sys.modules entries when armed
    "sys_modules": None,
    "roots": (),  # folders the kernel may read without a finding
}
_WATCHED_MODULES = (
    "torch",
    "numpy",
    "transformer_lab",
    "transformer_lab.attention",
    "transformer_lab.heads",
    "transformer_lab.masks",
    "transformer_lab.positional",
    "transformer_lab.blocks",
    "transformer_lab.checks",
    "transformer_lab.checks.engine.core",
    "transformer_lab.checks.engine.guards",
)
_AUDIT_EVENTS = {
    "socket.connect": "opened a network connection",
    "socket.bind": "opened a network socket",
    "socket.getaddrinfo": "looked up a network address",
    "subprocess.Popen": "started a program",
    "os.system": "ran a shell command",
    "os.exec": "replaced the kernel with a program",
    "os.posix_spawn": "started a program",
    "os.spawn": "started a program",
    "os.fork": "forked the kernel",
    "os.forkpty": "forked the kernel",
    "ctypes.dlopen": "loaded a C library with ctypes",
    "ctypes.dlsym": "looked up a C function with ctypes",
    "gc.get_objects": "searched the garbage collector's objects",
    "gc.get_referrers": "searched the garbage collector's objects",
    "gc.get_referents": "searched the garbage collector's objects",
    "os.putenv": "changed environment variables",
    "os.remove": "deleted a file",
    "os.rename": "renamed a file",
    "shutil.rmtree": "deleted a folder",
    "object.__setattr__": "replaced an attribute of a class or function",
    "open": "opened a file outside the notebook's folder",
    "compile": "compiled code at run time",
    "sys._getframe": "read the call stack's frames",
    "os.listdir": "listed a folder outside the notebook's folder",
    "os.scandir": "listed a folder outside the notebook's folder",
}
_TRUSTED_PREFIXES = ("torch", "numpy", "transformer_lab", "builtins")


def _allowed_roots() -> tuple[str, ...]:
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.getcwd(), "/usr", "/tmp", "/dev"}
    roots |= {"/proc", "/sys", "/etc", os.path.dirname(os.path.dirname(os.path.dirname(__file__)))}
    return tuple(os.path.realpath(r) for r in roots)


_PACKAGE_DIR = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)  # transformer_lab/


def _compiled_by_student(args: tuple) -> str | None:
    """Why a `compile` event is the student's (exec/eval/compile in a cell, runpy), or None
    for the compiles of imports, IPython's own cells and libraries (dataclasses, ...)."""
    filename = args[1] if len(args) > 1 else ""
    if isinstance(filename, bytes):
        filename = os.fsdecode(filename)
    filename = str(filename)
    caller = sys._getframe(3)  # _compiled_by_student, _note, _audit, then compile's caller
    runpy = False
    depth = 0
    frame = caller
    while frame is not None and depth < 40:
        name = frame.f_code.co_filename
        if name.endswith(("runpy.py", "<frozen runpy>")) and frame.f_code.co_name in (
            "run_path",
            "run_module",
        ):
            runpy = True  # (the kernel itself was started by runpy's _run_module_as_main)
        frame, depth = frame.f_back, depth + 1
    if runpy:
        return f" (runpy: {filename})"
    caller_file = caller.f_code.co_filename if caller is not None else ""
    if "ipykernel_" in caller_file or caller_file.startswith("<ipython-input"):
        if "ipykernel_" in filename or filename.startswith("<ipython-input"):
            return None  # IPython compiling a cell
        return f" (exec/eval/compile of {filename or 'a string'})"
    return None


def _importing() -> bool:
    """Is the import system on the stack (an import reading a module's source)?"""
    frame, depth = sys._getframe(2), 0
    while frame is not None and depth < 60:
        if "importlib._bootstrap" in frame.f_code.co_filename:
            return True
        frame, depth = frame.f_back, depth + 1
    return False


def _audit(event: str, args: tuple) -> None:
    if not _STATE["student"] or event not in _AUDIT_EVENTS or len(_STATE["events"]) > 50:
        return
    if _STATE.get("auditing"):
        return  # our own sys._getframe below
    _STATE["auditing"] = True
    try:
        _note(event, args)
    except Exception:  # an audit hook must never break the student's code
        pass
    finally:
        _STATE["auditing"] = False


def _note(event: str, args: tuple) -> None:
    detail = ""
    if event == "compile":
        found = _compiled_by_student(args)
        if found is None:
            return
        detail = found
    elif event == "sys._getframe":
        caller = sys._getframe(2)  # _note, _audit, then the caller of sys._getframe
        name = caller.f_code.co_filename if caller is not None else ""
        if "ipykernel_" not in name and not name.startswith("<ipython-input"):
            return  # libraries (inspect, warnings, torch) read frames all the time
    elif event == "open" and args and isinstance(args[0], str) and args[0].endswith(".py"):
        real = os.path.realpath(args[0])
        if real.startswith(_PACKAGE_DIR + os.sep) and not _importing():
            detail = f" (the package's source {os.path.relpath(real, _PACKAGE_DIR)})"
            _STATE["events"].append("read the package's source files" + detail)
            return
    if event in ("open", "os.listdir", "os.scandir"):
        path = args[0] if args else None
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            return
        real = os.path.realpath(path)
        if any(real == r or real.startswith(r + os.sep) for r in _STATE["roots"]):
            return
        detail = f" ({path})"
    elif event == "object.__setattr__":
        target, name = args[0], args[1] if len(args) > 1 else ""
        owner = getattr(target, "__module__", "") or ""
        if name != "__code__" and not str(owner).startswith(_TRUSTED_PREFIXES):
            return
        if name in ("__doc__", "__module__", "__name__", "__qualname__", "__annotations__"):
            return
        caller = sys._getframe(1)
        while caller is not None and caller.f_code in (_audit.__code__, _note.__code__):
            caller = caller.f_back
        if caller is not None and str(caller.f_globals.get("__name__", "")).startswith(
            ("torch", "numpy", "importlib", "typing", "functools")
        ):
            return  # the library changing its own classes (e.g. lazily set attributes)
        detail = f" ({getattr(target, '__qualname__', type(target).__name__)}.{name})"
    _STATE["events"].append(_AUDIT_EVENTS[event] + detail)


def arm(secret: str | None = None) -> None:
    """Enter grading mode (called by the grader, silently, before any cell of the notebook).

    From then on this kernel only runs the student's code: the public checks print that the
    grader decides and return, so no reference value is ever computed here. ``secret`` is
    accepted for older graders and ignored: the secret stays in the grader's process."""
    first = not _STATE["grading"]
    _STATE["grading"] = True
    if first:
        import threading

        _STATE["roots"] = _allowed_roots()
        _STATE["threads"] = {t.ident for t in threading.enumerate()}
        _STATE["modules"] = {name: sys.modules.get(name) for name in _WATCHED_MODULES}
        _STATE["sys_modules"] = sys.modules
        sys.addaudithook(_audit)


def context(student: bool) -> None:
    """The grader says whether the next cell is student code (audit events are noted only then)."""
    _STATE["student"] = bool(student)
    if not student:  # threads that course cells started are the course's
        import threading

        _STATE["threads"] |= {t.ident for t in threading.enumerate()}


def active_forbidden() -> tuple[list, list | None]:
    """(items, calls) of the :func:`forbid` block running now (([], None) outside one)."""
    current = _STATE["forbidding"]
    return (list(current[0]), current[1]) if current else ([], None)


@contextmanager
def judging(secret: str, hidden: bool) -> Iterator[None]:
    """In the grader's process: run a check whose hidden cases are seeded from ``secret``."""
    before = _STATE["secret"]
    _STATE["secret"] = str(secret) if hidden else None
    try:
        yield
    finally:
        _STATE["secret"] = before


def hidden_seed(seed: int) -> int:
    """The seed a check's generator really uses: ``seed`` itself, or while the grader runs a
    hidden check (:func:`judging`), a number derived from ``seed`` and the run's secret."""
    if _STATE["secret"] is None:
        return seed
    import hashlib

    digest = hashlib.sha256(f"{_STATE['secret']}:{seed}".encode()).digest()
    return int.from_bytes(digest[:7], "big")


def findings() -> list[str]:
    """What looks like tampering right now: modes, replaced functions and modules, threads."""
    import threading

    found = []
    try:
        if torch._C._len_torch_function_stack() > 0:
            found.append("a TorchFunctionMode was active during the hidden tests")
        if torch._C._len_torch_dispatch_stack() > 0:
            found.append("a TorchDispatchMode was active during the hidden tests")
    except AttributeError:
        pass
    bad = tampered()
    if bad:
        found.append("replaced after import: " + ", ".join(bad[:5]))
    if sys.modules is not _STATE["sys_modules"]:
        found.append("sys.modules was replaced")
    for name, module in _STATE["modules"].items():
        if module is not None and sys.modules.get(name) is not module:
            found.append(f"sys.modules[{name!r}] was replaced")
    new = [
        f"{t.name} ({getattr(getattr(t, '_target', None), '__qualname__', type(t).__qualname__)})"
        for t in threading.enumerate()
        if t.ident not in _STATE["threads"]
        and type(t).__name__ != "TMonitor"
        and not type(t).__module__.startswith(("zmq", "ipykernel", "jupyter_client"))
    ]
    if new:
        found.append("threads started by the notebook: " + ", ".join(new[:3]))
    seen: list[str] = []
    for event in _STATE["events"]:
        if event not in seen:
            seen.append(event)
    found += seen[:10]
    return found


def hidden_entry(check: Any) -> Any:
    """Wrap a public ``check_X``: in a graded kernel it only says who decides (the grader runs
    the same check in its own process, on this kernel's function); elsewhere it runs."""
    import functools

    @functools.wraps(check)
    def run(*args: Any, **kwargs: Any) -> None:
        __tracebackhide__ = True
        if not _STATE["grading"]:
            return check(*args, **kwargs)
        hidden = kwargs.get("hidden", args[1] if len(args) > 1 else False)
        kind = "hidden cases" if hidden else "cases"
        print(f"{check.__name__} ({kind}): run by the grader on your function; see your feedback.")

    return run
