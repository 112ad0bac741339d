"""The kernel's own clock: a time limit that a busy machine cannot use up.

A cell or a request is charged the wall time since it started *minus the time the kernel spent
waiting for a core*: Linux counts, for every thread, how long it was ready to run but not
running (``run_delay``, the second field of ``/proc/<pid>/task/<tid>/schedstat``). The wait
charged off is the longest any thread of the kernel's process tree had during the interval, so
a kernel that spins for 30 s is stopped after 30 s whether the machine is idle or four times
oversubscribed, and one that sleeps or loops is charged every second of it. Nothing here is
reported by the kernel: the grader reads the kernel's processes from outside, and a submission
that makes its own threads wait (by starting busy processes of its own) gains at most the wall
cap, ``WALL_CAP`` times its limit, that the grader enforces regardless.

When a limit runs out at the wall cap with kernel time still owed, the machine, not the
submission, used it up: the submission is *starved*, and the grading run queues it once more.
Where the counters cannot be read (no ``/proc``, a kernel without ``CONFIG_SCHED_INFO``) the
clock says so (:meth:`KernelClock.charged` is None) and the grader falls back to the machine's
load average.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "HANG_BUDGET",
    "KernelClock",
    "OVERTIME_TIMEOUT",
    "WALL_CAP",
    "process_tree",
    "run_delays",
]

WALL_CAP = 3.0  # a limit never stretches past this many times itself in wall time
# The course's defaults (GuardedExecute.hang_budget, .overtime_timeout): a submission may lose one
# cell's limit (30 s) to cells stopped on this clock; after that each later cell gets 1 s.
# Nothing is kept in reserve for a busy machine: the clock does not count the machine's time.
HANG_BUDGET = 30.0
OVERTIME_TIMEOUT = 1
MAX_THREADS = 4096  # threads read per sample (a pids-limited sandbox has far fewer)
_PROC = Path("/proc")


def _parent(pid: str) -> int | None:
    try:
        stat = (_PROC / pid / "stat").read_text()
    except OSError:
        return None
    # "pid (comm) state ppid ...": the command name may hold spaces and parentheses
    fields = stat[stat.rfind(")") + 2 :].split()
    return int(fields[1]) if len(fields) > 1 else None


def process_tree(root: int) -> list[int]:
    """``root`` and every process descended from it (a sandbox's PID namespace keeps orphans
    inside: they are reparented to its init, itself a descendant)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir(_PROC):
        if entry.isdigit() and (ppid := _parent(entry)) is not None:
            children.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, ()))
    return tree


def run_delays(pids: list[int]) -> dict[str, float] | None:
    """Seconds each thread of these processes has waited for a core, by ``pid/tid``; None
    when no counter could be read (the processes are gone, or no scheduler statistics)."""
    delays: dict[str, float] = {}
    for pid in pids:
        try:
            tids = os.listdir(_PROC / str(pid) / "task")
        except OSError:
            continue
        for tid in tids:
            if len(delays) >= MAX_THREADS:
                return delays
            try:
                fields = (_PROC / str(pid) / "task" / tid / "schedstat").read_text().split()
                delays[f"{pid}/{tid}"] = int(fields[1]) / 1e9
            except (OSError, IndexError, ValueError):
                continue
    return delays or None


class KernelClock:
    """Time charged to one kernel since :meth:`start` (see the module docstring).

    ``tree``: the kernel's processes as last seen (:func:`process_tree` of ``root`` reads every
    process of the machine, ~10 ms: the grader keeps one per kernel, and a clock looks again
    only once its limit has passed; a process that appeared meanwhile has all of its waits
    counted, in the student's favour, within the wall cap). ``busy`` is asked once at the
    start, only when the counters cannot be read: is the machine busier than its cores? Then a
    limit stretches to the wall cap, as it did before this clock.
    """

    def __init__(
        self,
        root: int | None,
        tree: list[int] | None = None,
        busy: Callable[[], bool] = lambda: False,
    ) -> None:
        self.root, self._busy = root, busy
        self.tree = tree if tree is not None else (process_tree(root) if root else [])
        self.started = time.monotonic()
        self._before: dict[str, float] | None = None
        self.fallback_busy = False
        self.last: float | None = None  # charged seconds at the last look

    def start(self) -> KernelClock:
        """Start charging now (before a cell or a request)."""
        self.started = time.monotonic()
        self._before = run_delays(self.tree) if self.tree else None
        self.fallback_busy = self._before is None and self._busy()
        return self

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def waited(self) -> float | None:
        """The longest wait for a core of any of the kernel's threads since :meth:`start`."""
        if self._before is None or not self.root:
            return None
        self.tree = process_tree(self.root) or self.tree
        now = run_delays(self.tree)
        if now is None:
            return None
        return max((v - self._before.get(k, 0.0) for k, v in now.items()), default=0.0)

    def charged(self) -> float | None:
        """Wall time since :meth:`start` less :meth:`waited`; None when it cannot be known."""
        waited = self.waited()
        return None if waited is None else max(0.0, self.elapsed() - waited)

    def owed(self, limit: float) -> float:
        """Seconds ``limit`` has still to run (0: stop now), never past ``WALL_CAP x limit``
        of wall time; without counters, wall time (to the cap if the machine was busy)."""
        self.last = charged = self.charged()
        elapsed = self.elapsed()
        if charged is None:
            return max(0.0, (WALL_CAP if self.fallback_busy else 1.0) * limit - elapsed)
        return max(0.0, min(limit - charged, WALL_CAP * limit - elapsed))

    def starved(self, limit: float) -> bool:
        """After :meth:`owed` said stop: did the wall cap, not the kernel's own time, end
        ``limit`` (or, without counters, was the machine busy)?"""
        if self.last is None:
            return self.fallback_busy
        return self.last < limit - 0.5
