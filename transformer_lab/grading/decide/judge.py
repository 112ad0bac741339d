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
import time
from dataclasses import dataclass, field

__all__ = ["CheckCall", "Verdict", "graded_calls", "visible_source", "judge_cell"]

HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


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


def judge_cell(kernel, source: str, secret: str, budget: float = 300.0) -> Verdict | None:
    """Run the checks of a graded cell on the kernel's functions; None if it calls none.

    Args:
        kernel: a :class:`~transformer_lab.grading.decide.remote.RemoteKernel` of the graded kernel.
        source: the instructor's source of the cell.
        secret: this grading run's secret (seeds the hidden cases).
        budget: seconds all the checks of this cell may take together.
    """
    calls = graded_calls(source)
    if not calls:
        return None
    import torch

    from transformer_lab import checks
    from transformer_lab.checks.engine import grading_hooks
    from transformer_lab.grading.decide.remote import RemoteError, RemoteTimeout

    verdict = Verdict(passed=True)
    started = time.monotonic()
    kernel.deadline = started + budget
    first_requests = kernel.requests
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the kernel does the student's work; the grader's is small
    try:
        for call in calls:
            check = getattr(checks, call.name, None)
            if check is None or not call.expression.isidentifier():
                verdict.passed = False
                verdict.failure = f"the grader does not know {call.name}({call.expression})"
                verdict.flags.append(f"grader: {verdict.failure}")
                break
            label = f"{call.name}" + (" (hidden cases)" if call.hidden else "")
            remaining = budget - (time.monotonic() - started)
            if remaining <= 0:
                verdict.passed = False
                verdict.failure = "grading this cell took longer than its time limit"
                verdict.flags.append(f"{label}: {verdict.failure}")
                break
            printed = io.StringIO()
            try:
                kernel.reset()
                with (
                    grading_hooks.judging(secret, call.hidden),
                    contextlib.redirect_stdout(printed),
                ):
                    check(kernel.function(call.expression), hidden=call.hidden)
            except AssertionError as exc:  # CheckFailed: the instant check's own message
                verdict.passed = False
                said = _first_line(exc)
                verdict.failure = said if said.startswith(call.name) else f"{label}: {said}"
                verdict.lines.append(f"✗ {verdict.failure}")
                break
            except RemoteTimeout as exc:
                verdict.passed = False
                verdict.failure = f"{label}: {exc}"
                verdict.lines.append(f"✗ {verdict.failure}")
                verdict.flags.append(f"timeout: {verdict.failure}")
                break
            except RemoteError as exc:
                verdict.passed = False
                verdict.failure = f"{label}: the graded kernel could not answer ({exc})"
                verdict.lines.append(f"✗ {verdict.failure}")
                verdict.flags.append(f"kernel: {verdict.failure}")
                break
            except Exception as exc:  # noqa: BLE001 - the grader's own failure: review, never silent
                verdict.passed = False
                verdict.failure = (
                    f"{label}: the grader could not run this check "
                    f"({type(exc).__name__}: {_first_line(exc)})"
                )
                verdict.lines.append(f"✗ {verdict.failure}")
                verdict.flags.append(f"grader error: {verdict.failure}")
                break
            said = printed.getvalue().strip().splitlines()
            verdict.lines.append(said[-1] if said else f"✓ {label} passed")
        if kernel.problems and not verdict.passed:
            # a failure the grader could not fully test: a person should look
            verdict.flags.append(f"grader error: {kernel.problems[0]}")
        for note in kernel.notes:
            if f"kernel: {note}" not in verdict.flags:
                verdict.flags.append(f"kernel: {note}")
        try:
            found = kernel.answer(kernel.request(op="findings"))
            for flag in found if isinstance(found, list) else []:
                text = f"kernel: {str(flag)[:200]}"
                if text not in verdict.flags:
                    verdict.flags.append(text)
        except (Exception, RemoteError, RemoteTimeout):  # noqa: BLE001 - noted by the cell's status
            pass
    finally:
        kernel.deadline = None
        torch.set_num_threads(threads)
    verdict.seconds = round(time.monotonic() - started, 2)
    verdict.requests = kernel.requests - first_requests
    return verdict


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text if len(text) < 2000 else text[:2000] + " ..."
