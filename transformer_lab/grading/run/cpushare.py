"""A CPU share of its own for each graded kernel, through Linux control groups.

With ``tlab grade --jobs N`` several kernels run at once; without a share, one submission that
starts 120 busy processes takes the CPUs from the others and their cells hit the time limit.
Each sandboxed kernel is put, before it starts, into a control group of its own whose CPU
bandwidth is capped at ``cpus`` CPUs (``cpus = CPUs of the machine / jobs``):

- **cgroup v2** (``cpu.max`` = ``"quota period"``) where the unified hierarchy has the ``cpu``
  controller (Debian 11 and later with systemd's default);
- **cgroup v1** (``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``) where the ``cpu`` controller is
  mounted on its own, as in many containers (``/sys/fs/cgroup/cpu``).

Both need write access to the cgroup file system (the grader runs as root, or a delegated
subtree). Where neither is writable, :func:`cpu_share_backend` returns None and the kernels run
without a cap: each still uses only ``cpus`` threads (``OMP_NUM_THREADS``), and a cell that
times out while other lanes were busy is graded once more (``run/lanes.py``), but a classmate's
processes can slow a kernel down.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["cpu_share_backend", "CpuShare", "PERIOD_US"]

PERIOD_US = 100_000  # scheduling period (0.1 s), the kernel's default
GROUP = "tlab"  # the parent group of every sandbox's group
ROOT = Path("/sys/fs/cgroup")


def _v2_base() -> Path | None:
    """A cgroup v2 mount whose controllers include ``cpu`` and where we may create groups."""
    for base in (ROOT, ROOT / "unified"):
        controllers = base / "cgroup.controllers"
        try:
            if "cpu" in controllers.read_text().split() and os.access(base, os.W_OK):
                return base
        except OSError:
            continue
    return None


def _v1_base() -> Path | None:
    for name in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
        base = ROOT / name
        if (base / "cpu.cfs_quota_us").is_file() and os.access(base, os.W_OK):
            return base
    return None


def cpu_share_backend() -> str | None:
    """``"cgroup2"``, ``"cgroup1"`` or None (no writable CPU controller: no cap, see above)."""
    if _v2_base() is not None:
        return "cgroup2"
    if _v1_base() is not None:
        return "cgroup1"
    return None


class CpuShare:
    """The control group of one kernel: ``CpuShare.create(name, cpus)`` or None if unavailable.

    ``procs`` is the file a process writes its pid to in order to join the group (the sandbox's
    launcher does it before ``exec bwrap``); :meth:`quota` reads the cap back (CPUs);
    :meth:`remove` deletes the group once its processes are gone.
    """

    def __init__(self, path: Path, version: int):
        self.path, self.version = path, version

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    @classmethod
    def create(cls, name: str, cpus: float) -> CpuShare | None:
        quota = max(1000, int(cpus * PERIOD_US))
        try:
            base = _v2_base()
            if base is not None:
                parent = base / GROUP
                parent.mkdir(exist_ok=True)
                _remove_stale(parent)
                for group in (base, parent):  # let the children use the cpu controller
                    (group / "cgroup.subtree_control").write_text("+cpu")
                path = parent / name
                path.mkdir()
                (path / "cpu.max").write_text(f"{quota} {PERIOD_US}")
                return cls(path, 2)
            base = _v1_base()
            if base is not None:
                parent = base / GROUP
                parent.mkdir(exist_ok=True)
                _remove_stale(parent)
                path = parent / name
                path.mkdir()
                (path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (path / "cpu.cfs_quota_us").write_text(str(quota))
                return cls(path, 1)
        except OSError:
            return None
        return None

    def quota(self) -> float | None:
        """The CPUs this group may use, read back from the kernel's files (None: no cap)."""
        if self.version == 2:
            quota, period = (self.path / "cpu.max").read_text().split()
            return None if quota == "max" else int(quota) / int(period)
        quota = int((self.path / "cpu.cfs_quota_us").read_text())
        period = int((self.path / "cpu.cfs_period_us").read_text())
        return None if quota < 0 else quota / period

    def remove(self, wait: float = 2.0) -> None:
        """Delete the group (it must be empty; its processes may take a moment to be reaped)."""
        deadline = time.monotonic() + wait
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return  # left behind; an empty group costs nothing and is removed next run
                time.sleep(0.05)


def _remove_stale(parent: Path, age: float = 3600.0) -> None:
    """Remove groups left behind by earlier runs (empty, older than ``age`` seconds)."""
    for child in parent.iterdir():
        try:
            if child.is_dir() and time.time() - child.stat().st_mtime > age:
                child.rmdir()  # refused while processes are in it
        except OSError:
            continue
