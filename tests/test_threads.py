"""The course's thread decision: affinity, cgroup quotas (v1 and v2) and environment overrides."""

from __future__ import annotations

import pytest
import torch

from transformer_lab import threads
from transformer_lab.threads import cgroup_cpu_limit, decide_threads, usable_cpus


def write(root, relative, text):
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_v2_quota_of_the_process_own_cgroup(tmp_path):
    write(tmp_path, "user.slice/jupyter/cpu.max", "150000 100000\n")
    write(tmp_path, "user.slice/cpu.max", "max 100000\n")
    assert cgroup_cpu_limit(tmp_path, "0::/user.slice/jupyter\n") == pytest.approx(1.5)


def test_v2_unlimited_gives_none(tmp_path):
    write(tmp_path, "cpu.max", "max 100000\n")
    assert cgroup_cpu_limit(tmp_path, "0::/\n") is None


def test_v2_parent_limit_applies_to_children(tmp_path):
    """A hub limits the user's slice; the kernel's own cgroup below it has no limit of its own."""
    write(tmp_path, "hub/cpu.max", "50000 100000\n")
    write(tmp_path, "hub/kernel/cpu.max", "max 100000\n")
    assert cgroup_cpu_limit(tmp_path, "0::/hub/kernel\n") == pytest.approx(0.5)


def test_v2_in_a_container_sees_only_the_mount_root(tmp_path):
    """Inside a container /proc/self/cgroup names a host path the container cannot see."""
    write(tmp_path, "cpu.max", "200000 100000\n")
    assert cgroup_cpu_limit(tmp_path, "0::/docker/abc123\n") == pytest.approx(2.0)


def test_v2_on_the_unified_mount_of_a_hybrid_machine(tmp_path):
    write(tmp_path, "unified/job/cpu.max", "100000 100000\n")
    assert cgroup_cpu_limit(tmp_path, "1:cpu:/\n0::/job\n") == pytest.approx(1.0)


def test_v1_quota_over_period(tmp_path):
    write(tmp_path, "cpu/slurm/job7/cpu.cfs_quota_us", "300000\n")
    write(tmp_path, "cpu/slurm/job7/cpu.cfs_period_us", "100000\n")
    text = "4:memory:/x\n2:cpuacct,cpu:/slurm/job7\n0::/\n"
    assert cgroup_cpu_limit(tmp_path, text) == pytest.approx(3.0)


def test_v1_unlimited_is_minus_one(tmp_path):
    write(tmp_path, "cpu/cpu.cfs_quota_us", "-1\n")
    write(tmp_path, "cpu/cpu.cfs_period_us", "100000\n")
    assert cgroup_cpu_limit(tmp_path, "1:cpu:/\n0::/\n") is None


def test_v1_combined_controller_folder(tmp_path):
    write(tmp_path, "cpu,cpuacct/cpu.cfs_quota_us", "50000\n")
    write(tmp_path, "cpu,cpuacct/cpu.cfs_period_us", "100000\n")
    assert cgroup_cpu_limit(tmp_path, "3:cpu,cpuacct:/\n") == pytest.approx(0.5)


def test_tightest_of_v1_and_v2_wins(tmp_path):
    write(tmp_path, "cpu/cpu.cfs_quota_us", "400000\n")
    write(tmp_path, "cpu/cpu.cfs_period_us", "100000\n")
    write(tmp_path, "unified/cpu.max", "250000 100000\n")
    assert cgroup_cpu_limit(tmp_path, "1:cpu:/\n0::/\n") == pytest.approx(2.5)


def test_no_cgroup_files_at_all(tmp_path):
    assert cgroup_cpu_limit(tmp_path, "") is None
    write(tmp_path, "cpu/cpu.cfs_quota_us", "garbage\n")
    write(tmp_path, "cpu/cpu.cfs_period_us", "100000\n")
    assert cgroup_cpu_limit(tmp_path, "1:cpu:/\n") is None


def test_usable_cpus_is_affinity_capped_by_quota():
    assert usable_cpus(affinity=set(range(64)), quota=None) == 64
    assert usable_cpus(affinity=set(range(64)), quota=1.0) == 1
    assert usable_cpus(affinity=set(range(64)), quota=1.5) == 2  # a fraction rounds up
    assert usable_cpus(affinity={3}, quota=8.0) == 1
    assert usable_cpus(affinity=set(range(4)), quota=0.1) == 1  # never zero


def test_usable_cpus_on_this_machine_is_at_most_its_cores():
    import os

    assert 1 <= usable_cpus() <= (os.cpu_count() or 1)


def test_decision_defaults_to_one_thread():
    assert decide_threads({}, cpus=64) == threads.DEFAULT_THREADS == 1


def test_tlab_threads_wins_over_omp_and_is_capped_by_usable_cpus():
    assert decide_threads({"TLAB_THREADS": "4", "OMP_NUM_THREADS": "2"}, cpus=8) == 4
    assert decide_threads({"OMP_NUM_THREADS": "3"}, cpus=8) == 3
    assert decide_threads({"OMP_NUM_THREADS": "4,2"}, cpus=8) == 4  # OpenMP's nested list
    assert decide_threads({"TLAB_THREADS": "64"}, cpus=1) == 1  # a 1-CPU quota on a big node


def test_bad_overrides():
    with pytest.raises(ValueError, match="TLAB_THREADS must be a positive whole number"):
        decide_threads({"TLAB_THREADS": "four"}, cpus=4)
    with pytest.raises(ValueError, match="at least 1"):
        decide_threads({"TLAB_THREADS": "0"}, cpus=4)
    assert decide_threads({"OMP_NUM_THREADS": "lots"}, cpus=4) == 1  # left to OpenMP
    assert decide_threads({"TLAB_THREADS": "", "OMP_NUM_THREADS": "2"}, cpus=4) == 2


def test_configure_sets_torch_and_ensure_applies_only_once(monkeypatch):
    before = torch.get_num_threads()
    try:
        monkeypatch.setattr(threads, "_configured", False)
        monkeypatch.setattr(threads, "usable_cpus", lambda *a, **k: 2)
        assert threads.configure_torch_threads({"TLAB_THREADS": "2"}) == 2
        assert torch.get_num_threads() == 2
        torch.set_num_threads(1)  # the user's own choice afterwards
        threads.ensure_threads_configured()
        assert torch.get_num_threads() == 1  # left alone
        with threads.torch_threads(2):
            assert torch.get_num_threads() == 2
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
