"""The kernel's own clock (grading/run/kernel_clock.py): a limit a busy machine cannot use up.

A process shares one core with a spinning hog: the clock charges it about half the wall time.
Then, through the grader's Execute preprocessor (no sandbox, so the test controls the CPU
affinity its kernel inherits): a cell needing 1.5 s of CPU under a 2 s limit finishes beside
two hogs (the wall clock would have stopped it), and a cell that never ends is stopped on the
kernel's clock and is its own (tests/test_grading_isolation.py: what is graded again).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from transformer_lab.grading.run import kernel_clock
from transformer_lab.grading.run.kernel_clock import WALL_CAP, KernelClock, process_tree

HAS_COUNTERS = Path("/proc/self/schedstat").exists() and hasattr(os, "sched_setaffinity")
needs_counters = pytest.mark.skipif(
    not HAS_COUNTERS, reason="needs Linux's per-thread scheduler counters and CPU affinity"
)
SPIN = "while 1: pass"


def _pinned(code: str, cpu: int) -> subprocess.Popen:
    # A session of its own: with autogroup scheduling (Linux's default for desktops) a core is
    # shared between sessions first, and a kernel runs in a session of its own too.
    return subprocess.Popen(
        [sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{cpu}}})\n{code}"],
        start_new_session=True,
    )


def _stop(*processes: subprocess.Popen) -> None:
    for process in processes:
        process.kill()
        process.wait()


@needs_counters
def test_a_process_sharing_its_core_is_charged_its_share():
    cpu = min(os.sched_getaffinity(0))
    worker, hog = _pinned(SPIN, cpu), _pinned(SPIN, cpu)
    try:
        time.sleep(0.3)  # both running
        clock = KernelClock(worker.pid).start()
        time.sleep(2.0)
        elapsed, waited = clock.elapsed(), clock.waited()
        charged = clock.charged()
    finally:
        _stop(worker, hog)
    assert waited is not None and charged is not None
    # Two spinning processes on one core: each waits about half the time (more if the
    # machine's other work also lands on that core), never charged the whole wall time.
    assert 0.5 <= waited <= elapsed, (waited, elapsed)
    assert charged <= 0.75 * elapsed, (charged, elapsed)


@needs_counters
def test_the_tree_holds_grandchildren_and_odd_command_names():
    code = (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', "
        "'import ctypes, time; ctypes.CDLL(None).prctl(15, b\"a) (b c\", 0, 0, 0); time.sleep(30)'])\n"
        "time.sleep(30)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 20
        while len(process_tree(parent.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        tree = process_tree(parent.pid)
        assert tree[0] == parent.pid and len(tree) == 2, tree
        assert len({k.split("/")[0] for k in kernel_clock.run_delays(tree)}) == 2  # both read
    finally:
        for pid in process_tree(parent.pid)[1:]:
            os.kill(pid, 9)
        _stop(parent)


def test_a_limit_never_stretches_past_the_wall_cap(monkeypatch):
    waits = {"1/1": 0.0}
    monkeypatch.setattr(kernel_clock, "run_delays", lambda pids: dict(waits))
    clock = KernelClock(1, tree=[1]).start()
    clock.started -= 4.0  # 4 s of wall time, 3 of them waiting for a core
    waits["1/1"] = 3.0
    assert clock.owed(2.0) == pytest.approx(1.0, abs=0.05)  # charged 1 s of a 2 s limit
    clock.started -= 2.0 * WALL_CAP  # past the cap, having waited nearly all of it
    waits["1/1"] = clock.elapsed() - 0.5
    assert clock.owed(2.0) == 0.0 and clock.starved(2.0)  # stop: the machine used it up
    waits["1/1"] = 0.0  # no waiting at all: the kernel's own time, not starved
    assert clock.owed(2.0) == 0.0 and not clock.starved(2.0)


def test_without_counters_the_load_average_stands_in(monkeypatch):
    monkeypatch.setattr(kernel_clock, "run_delays", lambda pids: None)
    quiet = KernelClock(1, tree=[1], busy=lambda: False).start()
    busy = KernelClock(1, tree=[1], busy=lambda: True).start()
    quiet.started -= 2.5
    busy.started -= 2.5
    assert quiet.owed(2.0) == 0.0 and not quiet.starved(2.0)
    assert busy.owed(2.0) == pytest.approx(WALL_CAP * 2.0 - 2.5, abs=0.05)


def _run(cells: list[str], timeout: int) -> tuple[nbformat.NotebookNode, dict]:
    from transformer_lab.grading.run import execute

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    execute.RUN.clear()
    preprocessor = execute.GuardedExecute(
        timeout=timeout, sandbox=False, guard_cells=False, hang_budget=0.0, kernel_name="python3"
    )
    preprocessor.preprocess(nb, {"metadata": {"path": "."}})
    return nb, dict(execute.RUN)


@needs_counters
@pytest.mark.slow
def test_a_cell_beside_two_hogs_gets_its_own_time():
    mine = os.sched_getaffinity(0)
    cpu = min(mine)
    os.sched_setaffinity(0, {cpu})  # the kernel started below inherits one core
    hogs = [_pinned(SPIN, cpu) for _ in range(2)]
    try:
        nb, run = _run(
            [
                "import time\nt0, c0 = time.time(), time.process_time()\n"
                "while time.process_time() - c0 < 1.5: pass\n"  # 1.5 s of CPU: ~4.5 s of wall
                "print(round(time.time() - t0, 1))",
            ],
            timeout=2,
        )
    finally:
        os.sched_setaffinity(0, mine)
        _stop(*hogs)
    (finished,) = nb.cells
    assert not any(o.get("output_type") == "error" for o in finished.outputs), finished.outputs
    wall = float(finished.outputs[0]["text"])
    assert wall > 2.0, f"the hogs did not slow the cell ({wall} s): the test shows nothing"
    assert run.get("starved", 0) == 0


@needs_counters
@pytest.mark.slow
def test_a_cell_that_never_ends_is_stopped_on_its_own_time():
    started = time.monotonic()
    nb, run = _run([SPIN], timeout=2)
    assert "CellTimeoutError" in [o.get("ename") for o in nb.cells[0].outputs]
    assert run.get("starved", 0) == 0  # it spun for its whole limit: its own time
    assert time.monotonic() - started < 60  # stopped, not left to run
