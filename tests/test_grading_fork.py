"""A graded kernel makes no copy of itself (``grading_hooks._refuse_fork``).

A forked kernel's copies read and answer the grader's messages too: a fork bomb made one
submission take up to a minute or left it "not graded". Once armed, ``os.fork`` raises
``PermissionError`` whoever calls it (the student's cell, or a course cell calling the student's
function) and is noted as a review flag; multiprocessing's workers, which run their target and
exit without returning to the kernel's loop, still start. Audit hooks cannot be removed, so each
case runs in its own interpreter.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

ARMED = """\
import multiprocessing, os
from transformer_lab.checks.engine import grading_hooks as hooks
hooks.arm()
"""


def _run(body: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", ARMED + textwrap.dedent(body)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_a_fork_bomb_in_a_student_cell_makes_no_copy():
    out = _run(
        """
        hooks.context(True)  # a student's cell
        children = 0
        while children < 100:
            try:
                if os.fork() == 0:
                    os._exit(0)
                children += 1
            except OSError as err:
                print(type(err).__name__, err)
                break
        print("children", children)
        print("flags", hooks.findings())
        """
    )
    assert "children 0" in out
    assert "PermissionError os.fork is not allowed while the notebook is graded" in out
    assert "forked the kernel" in out


def test_a_course_cell_calling_the_students_function_is_refused_too():
    out = _run(
        """
        hooks.context(True)
        def softmax(x):  # the student's answer
            os.fork()
            return x
        hooks.context(False)  # the course's cell that calls it
        try:
            softmax(1)
            print("forked")
        except PermissionError:
            print("refused")
        """
    )
    assert "refused" in out and "forked" not in out


def test_multiprocessing_workers_still_start():
    out = _run(
        """
        hooks.context(True)
        worker = multiprocessing.get_context("fork").Process(target=print, args=("in the worker",))
        worker.start()
        worker.join()
        print("exit code", worker.exitcode)
        """
    )
    assert "in the worker" in out and "exit code 0" in out


def test_an_unarmed_kernel_forks_as_usual():
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os\nimport transformer_lab.checks\npid = os.fork()\n"
            "if pid == 0:\n    os._exit(0)\nprint('parent', os.waitpid(pid, 0)[1])",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "parent 0" in result.stdout, result.stderr[-2000:]
