"""Where the suite's time goes: the seconds each test file took, summed over its tests.

Every run ends with a table of test files, the costliest first: the wall-clock seconds of their
tests (set-up, call and tear-down; a shared fixture's set-up lands on the file's first test) and
the CPU seconds they used, counting every process they started (kernels in their sandbox,
graders, ``tlab`` commands, servers), read from a cgroup of the test process where one can be
made (see :class:`CpuClock`). The CPU seconds hardly change when other work shares the machine, so they
compare runs on a busy machine; divided by the cores, their total is about the shortest the
suite could take. Under pytest-xdist each worker measures its own tests and the controller adds
them up.

CPU seconds do change when the host itself runs slower (a virtual machine's neighbours, its
clock): the same pure-Python loop took 0.42 to 0.71 s of CPU in consecutive runs on this
project's 2-core machine with nothing else running. :class:`HostSpeed` samples such a loop
during the run and prints its median under the table, so a run's seconds can be compared with
another's.
"""

from __future__ import annotations

import os
import resource
import statistics
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

SHOWN = 30  # files listed; the rest are summed in one line


class CpuClock:
    """CPU seconds used by this process and everything it starts, read from a cgroup of its own.

    A cgroup counts every descendant, including the grader's kernels in their bubblewrap
    sandbox and servers that detach (PostgreSQL), which ``getrusage`` misses (bubblewrap's
    children are never reported to us). The group is created in cgroup v1's ``cpuacct``
    hierarchy or in the cgroup v2 tree where we may write (as root); elsewhere the clock falls
    back to ``getrusage`` of this process and the children it waited for, and says so.
    """

    V1 = Path("/sys/fs/cgroup/cpuacct")
    V2 = Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup")

    def __init__(self) -> None:
        self.group: Path | None = None
        self.read = self._rusage
        self.source = "getrusage: processes waited for, sandboxed kernels not counted"
        for base, counter, reader in [(self.V1, "cpuacct.usage", self._v1)] + [
            (b, "cpu.stat", self._v2) for b in self.V2
        ]:
            if (base / counter).exists() and os.access(base / "cgroup.procs", os.W_OK):
                try:
                    group = base / f"tlab-tests-{os.getpid()}"
                    group.mkdir(exist_ok=True)
                    (group / "cgroup.procs").write_text(str(os.getpid()))
                except OSError:
                    continue
                self.group, self.base, self.read = group, base, reader
                self.source = f"cgroup {group}: every process the tests started"
                break

    def _v1(self) -> float:
        return int((self.group / "cpuacct.usage").read_text()) / 1e9

    def _v2(self) -> float:
        stat = dict(line.split() for line in (self.group / "cpu.stat").read_text().splitlines())
        return int(stat["usage_usec"]) / 1e6

    @staticmethod
    def _rusage() -> float:
        own, kids = (
            resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
        )
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    def close(self) -> None:
        """Move this process back and remove the group (kept if a process still lives in it)."""
        if self.group is not None:
            try:
                (self.base / "cgroup.procs").write_text(str(os.getpid()))
                self.group.rmdir()
            except OSError:
                pass


class CpuPerPhase:
    """Plugin for the process running the tests: each report carries its phase's CPU seconds."""

    def __init__(self) -> None:
        self.clock = CpuClock()

    def pytest_sessionfinish(self) -> None:
        self.clock.close()

    def pytest_report_header(self) -> str:
        return f"CPU seconds per test file from {self.clock.source}"

    def _measure(self, item):
        started = self.clock.read()
        yield
        item.stash.setdefault(CPU, {})[self._phase] = self.clock.read() - started

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item):
        self._phase = "setup"
        yield from self._measure(item)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        self._phase = "call"
        yield from self._measure(item)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item):
        self._phase = "teardown"
        yield from self._measure(item)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        cpu = item.stash.get(CPU, {}).get(call.when)
        if cpu is not None:
            outcome.get_result().user_properties.append(("cpu_seconds", cpu))


CPU = pytest.StashKey[dict]()


class HostSpeed:
    """CPU milliseconds of one fixed loop, sampled every ``every`` seconds in a thread.

    The loop's CPU time (``time.thread_time``) does not grow when other processes share the
    cores, only when the host runs this machine slower: its median over a run says how fast the
    host was. The thread is idle between samples (about 0.5% of one core)."""

    def __init__(self, every: float = 10.0) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._every = every
        self._thread = threading.Thread(target=self._run, name="host-speed", daemon=True)
        self._thread.start()

    @staticmethod
    def probe() -> float:
        started = time.thread_time()
        total = 0
        for i in range(1_000_000):
            total += i
        return 1e3 * (time.thread_time() - started)

    def _run(self) -> None:
        while not self._stop.wait(self._every if self.samples else 0.0):
            self.samples.append(self.probe())

    def summary(self) -> str:
        self._stop.set()
        if not self.samples:
            return "host speed: no sample"
        ms = sorted(self.samples)
        return (
            f"host speed: a fixed loop took {statistics.median(ms):.0f} ms of CPU (median of "
            f"{len(ms)} samples during the run, {ms[0]:.0f}-{ms[-1]:.0f}); the same seconds of "
            "another run compare after scaling by the two medians"
        )


class FileTimes:
    """Plugin for the controller (or a plain run): sums each file's seconds, prints the table."""

    def __init__(self) -> None:
        self.speed = HostSpeed()
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.tests: dict[str, set[str]] = defaultdict(set)

    def pytest_runtest_logreport(self, report) -> None:
        file = report.nodeid.split("::", 1)[0]
        self.wall[file] += report.duration
        self.cpu[file] += dict(report.user_properties).get("cpu_seconds", 0.0)
        self.tests[file].add(report.nodeid)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.wall:
            return
        ranked = sorted(self.wall, key=lambda file: -self.cpu[file] - self.wall[file] / 1e6)
        write = terminalreporter.write_line
        terminalreporter.section("seconds per test file (tests/timing.py)")
        write(f"{'wall s':>8} {'CPU s':>8} {'tests':>5}  file")
        for file in ranked[:SHOWN]:
            write(
                f"{self.wall[file]:8.1f} {self.cpu[file]:8.1f} {len(self.tests[file]):5d}  {file}"
            )
        rest = ranked[SHOWN:]
        if rest:
            write(
                f"{sum(self.wall[f] for f in rest):8.1f} {sum(self.cpu[f] for f in rest):8.1f}"
                f" {sum(len(self.tests[f]) for f in rest):5d}  {len(rest)} other files"
            )
        write(f"{sum(self.wall.values()):8.1f} {sum(self.cpu.values()):8.1f}  in all")
        write(self.speed.summary())
