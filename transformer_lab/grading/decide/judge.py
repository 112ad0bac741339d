"""Every point decided by the grader: the instant checks, run in the grader's process.

A graded test cell of the course ends with the exercise's check, visible and hidden::

    checks.check_softmax(softmax)
    ### BEGIN HIDDEN TESTS
    checks.check_softmax(softmax, hidden=True)
    ### END HIDDEN TESTS

Under ``tlab grade`` the kernel runs only the visible part of the cell (for the student's
feedback; its asserts decide nothing), and :func:`judge_cell` then runs each of those checks
*here*, on the student's function in the kernel (:mod:`.remote`): the check builds its inputs,
computes the package's reference (the solution, proved equal to it by the tests) and compares,
in this process. The hidden cases are seeded from this run's secret, which never leaves this
process. The verdict is the one the student's own instant check gives on the same cases, named
mistakes included, so an honest alternative that passes the instant check passes here, and a
random function is judged by the properties the check tests, not by its raw draws.

The cell's source comes from the instructor's notebook (nbgrader restores locked cells from the
gradebook before execution), so a student cannot change which checks run.
"""

from __future__ import annotations

import ast
import contextlib
import io
import textwrap
import time
from dataclasses import dataclass, field

__all__ = [
    "CheckCall",
    "Verdict",
    "graded_calls",
    "visible_source",
    "hidden_block",
    "hidden_statements",
    "judge_cell",
    "UNDECIDED",
]

HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
# A flag's kind when the grader could not decide a cell (the kernel never answered): the
# submission is "not graded" with the reason (record/outcome.py), never 0.
UNDECIDED = "undecided"


@dataclass(frozen=True)
class CheckCall:
    """``checks.<name>(<expression>, hidden=<hidden>)`` in a graded cell."""

    name: str
    expression: str
    hidden: bool


@dataclass
class Verdict:
    """What the grader decided for one graded cell."""

    passed: bool
    lines: list[str] = field(default_factory=list)  # one per check, for the feedback
    failure: str = ""  # the first failing check's message
    flags: list[str] = field(default_factory=list)  # for the instructor's review
    seconds: float = 0.0
    requests: int = 0
    mistake: str | None = None  # the failing check's named mistake (CheckFailed.message)
    checks: list[dict] = field(default_factory=list)  # each check decided: channels/insights.py


def visible_source(source: str) -> str:
    """The cell without its hidden-tests block (what the student's kernel runs)."""
    out, inside = [], False
    for line in source.splitlines():
        if HIDDEN_BEGIN in line:
            inside = True
        elif HIDDEN_END in line:
            inside = False
        elif not inside:
            out.append(line)
    return "\n".join(out)


def graded_calls(source: str) -> list[CheckCall]:
    """The checks a graded cell calls, in order: ``checks.check_X(expr[, hidden=True])``."""
    hidden_lines, inside = set(), False
    for number, line in enumerate(source.splitlines(), start=1):
        if HIDDEN_BEGIN in line:
            inside = True
        elif HIDDEN_END in line:
            inside = False
        elif inside:
            hidden_lines.add(number)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    calls = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "checks"
            and node.func.attr.startswith("check_")
            and node.args
        ):
            continue
        hidden = node.lineno in hidden_lines
        for keyword in node.keywords:
            if keyword.arg == "hidden" and isinstance(keyword.value, ast.Constant):
                hidden = hidden or bool(keyword.value.value)
        if len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
            hidden = hidden or bool(node.args[1].value)
        expression = ast.get_source_segment(source, node.args[0]) or ""
        calls.append((node.lineno, node.col_offset, CheckCall(node.func.attr, expression, hidden)))
    return [call for _, _, call in sorted(calls, key=lambda item: item[:2])]


def hidden_block(source: str) -> str:
    """The code between the hidden-test markers (never sent to the kernel)."""
    out, inside = [], False
    for line in source.splitlines():
        if HIDDEN_BEGIN in line:
            inside = True
        elif HIDDEN_END in line:
            inside = False
        elif inside:
            out.append(line)
    return textwrap.dedent("\n".join(out))


def hidden_statements(source: str) -> ast.Module | None:
    """The hidden block's statements other than its top-level check calls (which
    :func:`graded_calls` runs), or None when there are none: instructors' asserts and calls."""
    try:
        tree = ast.parse(hidden_block(source))
    except SyntaxError:
        return None
    body = [
        node
        for node in tree.body
        if not (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
            and isinstance(node.value.func.value, ast.Name)
            and node.value.func.value.id == "checks"
            and node.value.func.attr.startswith("check_")
        )
    ]
    return ast.Module(body=body, type_ignores=[]) if body else None


class _Names(dict):
    """The hidden block's names: the grader's modules, else the kernel's objects as proxies."""

    def __init__(self, kernel, local: dict) -> None:
        super().__init__(local)
        self._kernel = kernel

    def __missing__(self, name: str):
        import builtins

        if hasattr(builtins, name):
            raise KeyError(name)  # found in the builtins next
        kernel = self._kernel
        return kernel.answer(kernel.request(op="name", target={"name": name}))


def _local_names() -> dict:
    import math

    import numpy as np
    import torch

    from transformer_lab import checks

    return {
        "torch": torch,
        "nn": torch.nn,
        "F": torch.nn.functional,
        "np": np,
        "numpy": np,
        "math": math,
        "checks": checks,
    }


def judge_cell(kernel, source: str, secret: str, budget: float = 300.0) -> Verdict | None:
    """Run the checks of a graded cell on the kernel's functions; None if it calls none.

    Args:
        kernel: a :class:`~transformer_lab.grading.decide.remote.RemoteKernel` of the graded kernel.
        source: the instructor's source of the cell.
        secret: this grading run's secret (seeds the hidden cases).
        budget: seconds all the checks of this cell may take together.
    """
    calls = graded_calls(source)
    extra = hidden_statements(source)
    if not calls and extra is None:
        return None
    import torch

    verdict = Verdict(passed=True)
    started = time.monotonic()
    kernel.deadline = started + budget
    first_requests = kernel.requests
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the kernel does the student's work; the grader's is small
    try:
        for call in calls:
            ok = _run_check(kernel, call, secret, verdict, budget - (time.monotonic() - started))
            verdict.checks.append(_decided(call.name, call.hidden, ok, verdict))
            if not ok:
                break
        if verdict.passed and extra is not None:
            _run_hidden_block(kernel, extra, secret, verdict)
            verdict.checks.append(_decided("hidden tests", True, verdict.passed, verdict))
        _collect_flags(kernel, verdict)
    finally:
        kernel.deadline = None
        torch.set_num_threads(threads)
    verdict.seconds = round(time.monotonic() - started, 2)
    verdict.requests = kernel.requests - first_requests
    return verdict


def _fail(verdict: Verdict, failure: str, flag: str = "") -> bool:
    """Record a failed check (and its flag); returns False (stop running the cell's checks)."""
    verdict.passed = False
    verdict.failure = failure
    verdict.lines.append(f"✗ {failure}")
    if flag:
        verdict.flags.append(f"{flag}: {failure}")
    return False


def _decided(check: str, hidden: bool, passed: bool, verdict: Verdict) -> dict:
    """One decided check as plain data, for the class's insights (channels/insights.py)."""
    said = "" if passed else (verdict.failure.splitlines() or [""])[0]
    mistake = None if passed else verdict.mistake
    return {"check": check, "hidden": hidden, "passed": passed, "mistake": mistake, "message": said}


def _run_check(kernel, call: CheckCall, secret: str, verdict: Verdict, remaining: float) -> bool:
    """Run one check here on the kernel's function; False when the cell's checks stop."""
    from transformer_lab import checks
    from transformer_lab.checks.engine import grading_hooks
    from transformer_lab.grading.decide.remote import RemoteError, RemoteTimeout

    check = getattr(checks, call.name, None)
    if check is None or not call.expression.isidentifier():
        failure = f"the grader does not know {call.name}({call.expression})"
        verdict.passed, verdict.failure = False, failure
        verdict.flags.append(f"grader: {failure}")
        return False
    label = f"{call.name}" + (" (hidden cases)" if call.hidden else "")
    if remaining <= 0:
        verdict.passed = False
        verdict.failure = "grading this cell took longer than its time limit"
        verdict.flags.append(f"{label}: {verdict.failure}")
        return False
    printed = io.StringIO()
    try:
        kernel.reset()
        with grading_hooks.judging(secret, call.hidden), contextlib.redirect_stdout(printed):
            check(kernel.function(call.expression), hidden=call.hidden)
    except AssertionError as exc:  # CheckFailed: the instant check's own message
        said = _first_line(exc)
        verdict.mistake = getattr(exc, "message", None) if getattr(exc, "named", False) else None
        return _fail(verdict, said if said.startswith(call.name) else f"{label}: {said}")
    except RemoteTimeout as exc:  # the grader's own clock
        return _fail(verdict, f"{label}: {exc}", "timeout")
    except RemoteError as exc:  # no answer at all: nothing decided, never a 0
        failure = f"{label}: the graded kernel could not answer ({exc})"
        return _fail(verdict, failure, UNDECIDED)
    except Exception as exc:  # noqa: BLE001 - the grader's own failure: review, never silent
        failure = (
            f"{label}: the grader could not run this check "
            f"({type(exc).__name__}: {_first_line(exc)})"
        )
        return _fail(verdict, failure, "grader error")
    said = printed.getvalue().strip().splitlines()
    verdict.lines.append(said[-1] if said else f"✓ {label} passed")
    return True


def _run_hidden_block(kernel, code: ast.Module, secret: str, verdict: Verdict) -> None:
    """The instructor's hidden asserts and calls, run here on the kernel's objects.

    The student sees that a hidden test failed and the assert's own message, never the code."""
    from transformer_lab.checks.engine import grading_hooks
    from transformer_lab.grading.decide.remote import RemoteError, RemoteTimeout

    names = _Names(kernel, _local_names())
    try:
        kernel.reset()
        compiled = compile(code, "<hidden tests>", "exec")
        with grading_hooks.judging(secret, True), contextlib.redirect_stdout(io.StringIO()):
            exec(compiled, {"__builtins__": __builtins__}, names)  # noqa: S102 - the instructor's
    except AssertionError as exc:
        said = _first_line(exc)
        _fail(verdict, "a hidden test failed" + (f": {said}" if said else ""))
    except RemoteTimeout as exc:
        _fail(verdict, f"a hidden test: {exc}", "timeout")
    except RemoteError as exc:
        _fail(verdict, f"a hidden test: the graded kernel could not answer ({exc})", UNDECIDED)
    except Exception as exc:  # noqa: BLE001 - the student's function failed inside the block
        _fail(verdict, f"a hidden test failed ({type(exc).__name__}: {_first_line(exc)})")
    else:
        verdict.lines.append("✓ hidden tests passed")


def _collect_flags(kernel, verdict: Verdict) -> None:
    """The grader's notes on the kernel's answers, and what the kernel itself reports.

    The kernel's findings may add a flag; their absence proves nothing."""
    from transformer_lab.grading.decide.remote import RemoteError, RemoteTimeout

    if kernel.problems and not verdict.passed:
        # a failure the grader could not fully test: a person should look
        verdict.flags.append(f"grader error: {kernel.problems[0]}")
    for note in kernel.notes:
        if f"kernel: {note}" not in verdict.flags:
            verdict.flags.append(f"kernel: {note}")
    try:
        found = kernel.answer(kernel.request(op="findings"))
    except (Exception, RemoteError, RemoteTimeout):  # noqa: BLE001 - only ever a flag
        return
    for flag in found[:20] if isinstance(found, list) else []:
        text = f"kernel: {str(flag)[:200]}"
        if text not in verdict.flags:
            verdict.flags.append(text)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text if len(text) < 2000 else text[:2000] + " ..."
