"""Grading hooks: what the checks do under ``tlab grade``, in the graded kernel and in the grader.

In the kernel, :func:`arm` makes the public checks print that the grader decides
(:func:`hidden_entry`), and an audit hook notes suspicious events of student code
(:func:`context` says which cells are the student's); :func:`findings` reports them, with
anything replaced since the snapshot (:mod:`.guards`), as review flags. In the grader's process,
:func:`judging` seeds a hidden check's cases from the run's secret (:func:`hidden_seed`), and
:func:`active_forbidden` tells the grader's remote calls what :mod:`.forbid` disables right now.
Split from the guards (issue 25); ``_STATE`` is the one mutable state of both.

About 300 lines, kept whole: the kernel's audit hook and the findings it feeds share one state,
``_STATE``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from transformer_lab.checks.engine.guards import tampered

__all__ = [
    "arm",
    "context",
    "judging",
    "hidden_seed",
    "findings",
    "hidden_entry",
    "active_forbidden",
]


# Under ``tlab grade`` the checks run in the grader's own process
# (transformer_lab.grading.decide.judge) and call the student's function in the graded kernel through
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
    "transformer_lab.checks.engine.forbid",
    "transformer_lab.checks.engine.grading_hooks",
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
    if event in ("os.fork", "os.forkpty"):
        _refuse_fork(event)
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


_MULTIPROCESSING_DIR = os.path.dirname(os.path.realpath(os.__file__)) + os.sep + "multiprocessing"


def _refuse_fork(event: str) -> None:
    """No copy of a graded kernel: it would read and answer the grader's messages too (a fork
    bomb made grading take up to a minute, or lost the submission). Whoever calls it (a
    student's cell, or a course cell calling the student's function), except multiprocessing,
    whose workers run their target and exit without returning to the kernel's loop."""
    caller = sys._getframe(2)  # _refuse_fork, _audit, then the caller of os.fork
    name = caller.f_code.co_filename if caller is not None else ""
    if os.path.dirname(os.path.realpath(name)) == _MULTIPROCESSING_DIR:
        return
    if len(_STATE["events"]) <= 50:
        _STATE["events"].append(_AUDIT_EVENTS[event])
    raise PermissionError(
        f"{event} is not allowed while the notebook is graded: a copy of the kernel would "
        "answer the grader too (multiprocessing's workers still start)"
    )


def _showing_source() -> bool:
    """Is a traceback being formatted (linecache reading the lines it shows)? An error raised in
    the package, e.g. by a function the graded build left out, shows package source lines: that
    is no read of the source by the student's code (and the graded build holds no answer)."""
    frame = sys._getframe(3)  # _showing_source, _note, _audit, then the opener
    for _ in range(12):
        if frame is None:
            return False
        name = frame.f_code.co_filename
        if os.path.basename(name) in _TRACEBACK_FILES or any(p in name for p in _TRACEBACK_DIRS):
            return True
        frame = frame.f_back
    return False


# Python's and IPython's traceback machinery (the kernel shows a cell's error with its lines)
_TRACEBACK_FILES = ("linecache.py", "traceback.py", "ultratb.py")
_TRACEBACK_DIRS = (os.sep + "stack_data" + os.sep, os.sep + "executing" + os.sep)


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
        if real.startswith(_PACKAGE_DIR + os.sep) and not _importing() and not _showing_source():
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
