"""Where the suite's time goes: the seconds each test file took, summed over its tests.

Every run ends with a table of test files, the costliest first: the wall-clock seconds of their
tests (set-up, call and tear-down; a shared fixture's set-up lands on the file's first test) and
the CPU seconds they used, counting the processes they started and waited for (kernels, graders,
``tlab`` commands). The CPU seconds hardly change when other work shares the machine, so they
compare runs on a busy machine; divided by the cores, their total is about the shortest the
suite could take. Under pytest-xdist each worker measures its own tests and the controller adds
them up.
"""

from __future__ import annotations

import resource
from collections import defaultdict

import pytest

SHOWN = 30  # files listed; the rest are summed in one line


def cpu_seconds() -> float:
    """CPU time of this process and of every finished process it waited for."""
    own, children = (
        resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class CpuPerPhase:
    """Plugin for the process running the tests: each report carries its phase's CPU seconds."""

    def _measure(self, item):
        started = cpu_seconds()
        yield
        item.stash.setdefault(CPU, {})[self._phase] = cpu_seconds() - started

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


class FileTimes:
    """Plugin for the controller (or a plain run): sums each file's seconds, prints the table."""

    def __init__(self) -> None:
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
