"""Where the suite's time goes: the seconds each test file took, summed over its tests.

Every run ends with the table (the slowest files first), so a change that makes the suite slower
shows which file grew. Under pytest-xdist the times are the workers' (set-up, call and tear-down
of every test, including a shared fixture's set-up, which lands on the file's first test); they
add up to about the number of workers times the wall-clock time when the workers are kept busy.
"""

from __future__ import annotations

from collections import defaultdict

SHOWN = 30  # files listed; the rest are summed in one line


class FileTimes:
    """A pytest plugin that sums each test file's durations and prints them at the end."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.tests: dict[str, set[str]] = defaultdict(set)

    def pytest_runtest_logreport(self, report) -> None:
        file = report.nodeid.split("::", 1)[0]
        self.seconds[file] += report.duration
        self.tests[file].add(report.nodeid)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.seconds:
            return
        ranked = sorted(self.seconds.items(), key=lambda item: -item[1])
        total = sum(self.seconds.values())
        write = terminalreporter.write_line
        terminalreporter.section("seconds per test file (summed over the workers)")
        for file, seconds in ranked[:SHOWN]:
            write(
                f"{seconds:8.1f} s {100 * seconds / total:5.1f}%  {len(self.tests[file]):4d}  {file}"
            )
        rest = ranked[SHOWN:]
        if rest:
            write(f"{sum(s for _, s in rest):8.1f} s        {len(rest)} other files")
        write(f"{total:8.1f} s in all")
