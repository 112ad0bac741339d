"""Every benchmark script still runs end to end (``--quick``: a few steps, targets not checked).

These prove the scripts work, not how fast anything is: the timed runs and their results are in
benchmarks/README.md.
"""

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
GRADES = {"bench_grading.py", "bench_grading_cost.py"}  # these grade: they need the sandbox
SCRIPTS = [  # every benchmark, as `make benchmarks` runs them
    pytest.param(p.name, marks=[pytest.mark.needs_bwrap] if p.name in GRADES else [])
    for p in sorted(BENCHMARKS.glob("bench_*.py"))
]


def test_every_grading_benchmark_is_marked():
    """A script that runs `tlab grade` skips where bubblewrap is missing instead of failing."""
    for path in BENCHMARKS.glob("bench_*.py"):
        text = path.read_text(encoding="utf-8")
        if "grading.autograde" in text or '"grade"' in text:
            assert path.name in GRADES, path.name


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_benchmark_runs_quick(script):
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--quick", "--threads", "1"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "machine:" in result.stdout
    assert "SKIP" in result.stdout  # one line per target, not judged under --quick
    assert "FAIL" not in result.stdout


def test_quick_run_refuses_to_overwrite_a_shipped_checkpoint():
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_vit_digits.py"), "--quick", "--save"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "--save writes the shipped checkpoint" in result.stderr


def test_host_drift_prints_one_line_per_window():
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / "host_drift.py"), "--quick", "--threads", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert result.stdout.count("ms/step") == 3  # two windows of 10 steps and the summary
    assert "fastest window" in result.stdout
