"""``make gpu-check`` (benchmarks/gpu_check.py) on a machine without CUDA: every check is skipped,
one line each with the reason, and the exit status is 0. In process, no GPU needed."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import gpu_check  # noqa: E402


def test_without_cuda_every_check_skips_with_its_reason(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_check.main([]) == 0
    lines = capsys.readouterr().out.splitlines()
    checks = [line for line in lines if line.split(" ")[0] in {"PASS", "FAIL", "SKIP"}]
    assert len(checks) == 9
    assert all(line.startswith("SKIP") and "CUDA is not available" in line for line in checks)
    assert lines[-1] == "summary: 0 passed, 0 failed, 9 skipped"


def test_a_failing_check_fails_the_run(capsys):
    report = gpu_check.Report()
    report.run("passes", lambda: (True, "fine"))
    report.run("raises", lambda: 1 / 0)
    out = capsys.readouterr().out
    assert "PASS  passes: fine" in out and "FAIL  raises: ZeroDivisionError" in out
    assert report.summary() == 1


def test_relative_difference_is_scaled_by_the_largest_magnitude():
    cpu = torch.tensor([100.0, 1.0])
    assert abs(gpu_check.rel_diff(cpu + torch.tensor([0.01, 0.0]), cpu) - 1e-4) < 1e-7
    small = torch.tensor([0.001])
    assert abs(gpu_check.rel_diff(small + 1e-5, small) - 1e-5) < 1e-8  # scale at least 1
