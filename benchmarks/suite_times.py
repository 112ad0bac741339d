"""Per-file times of a test-suite run, from pytest's JUnit XML (``--junitxml=run.xml``).

Usage:  python benchmarks/suite_times.py run.xml [other.xml]
One row per test file: tests, seconds (each test's set-up + call + tear-down, summed), share of
the total; with a second file, its seconds beside the first's. The run's wall time is the
testsuite's ``time``: with pytest-xdist the files run side by side, so the sum of the rows is
the CPU-side work, not the wait.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import defaultdict


def per_file(path: str) -> tuple[dict[str, tuple[int, float]], float, dict[str, int]]:
    """({file: (tests, seconds)}, wall seconds, outcome counts) of one JUnit XML report."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    files: dict[str, list] = defaultdict(lambda: [0, 0.0])
    outcomes: dict[str, int] = defaultdict(int)
    for case in root.iter("testcase"):
        # classname "tests.test_grading_e2e" or "tests.holdout.test_holdout" (+ ".Class")
        parts = case.get("classname", "").split(".")
        module = next((i for i, p in enumerate(parts) if p.startswith("test_")), len(parts) - 1)
        name = "/".join(parts[: module + 1]) + ".py"
        files[name][0] += 1
        files[name][1] += float(case.get("time", 0))
        kind = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
        outcomes[kind] += 1
    wall = sum(float(s.get("time", 0)) for s in suites)
    return {k: (n, t) for k, (n, t) in files.items()}, wall, dict(outcomes)


def main(paths: list[str]) -> None:
    runs = [per_file(p) for p in paths]
    first = runs[0][0]
    names = sorted(set().union(*(r[0] for r in runs)), key=lambda n: -first.get(n, (0, 0))[1])
    total = sum(t for _, t in first.values()) or 1.0
    head = "| file | tests | s | share |" + "".join(f" s ({p}) |" for p in paths[1:])
    print(head + "\n|---|---:|---:|---:|" + "---:|" * (len(paths) - 1))
    for name in names:
        n, t = first.get(name, (0, 0.0))
        others = "".join(f" {r[0].get(name, (0, 0.0))[1]:.1f} |" for r in runs[1:])
        print(f"| `{name}` | {n} | {t:.1f} | {100 * t / total:.1f}% |{others}")
    for path, (files, wall, outcomes) in zip(paths, runs):
        summed = sum(t for _, t in files.values())
        print(
            f"{path}: {sum(n for n, _ in files.values())} tests {outcomes}, "
            f"summed {summed:.0f} s, wall {wall:.0f} s ({wall / 60:.1f} min)"
        )


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    main(sys.argv[1:])
