"""How many threads PyTorch uses, decided in one place for the whole course.

PyTorch's default is one intra-op thread per core of the machine. That ignores two things:

- **the CPUs this process may use**: its affinity mask (``taskset``, Slurm, Kubernetes pinning)
  and its cgroup CPU quota (Docker's ``--cpus``, JupyterHub's ``cpu_limit``). A student given
  one CPU on a 64-core node gets 64 threads that fight over that one CPU;
- **how small the course's tensors are**. Every model here has a width of at most a few hundred,
  so a second thread buys little on an idle machine and costs a great deal on a busy one: a
  parallel region waits for its slowest thread, and on a shared machine that thread is often
  descheduled. Measured on a 2-core machine with another process keeping both cores busy:
  notebook 08 took 357-415 s with PyTorch's default (2 threads) and under a minute with one.

So the course runs **one thread** unless told otherwise, and never more threads than CPUs the
process may use. To ask for more (a big idle machine, a long training run), set an environment
variable before starting Jupyter or Python:

    TLAB_THREADS=4        the course's own setting (wins over the next one)
    OMP_NUM_THREADS=4     the usual OpenMP setting, honoured too

The notebooks' setup cells, ``transformer_lab.widgets``, ``transformer_lab.train`` and the
grader's kernels call :func:`configure_torch_threads`; call it yourself from any other script.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import torch

__all__ = [
    "DEFAULT_THREADS",
    "ENV_VARS",
    "usable_cpus",
    "cgroup_cpu_limit",
    "decide_threads",
    "configure_torch_threads",
    "ensure_threads_configured",
    "torch_threads",
]

DEFAULT_THREADS = 1  # the course's tensors are small: see the module docstring for the measurement
ENV_VARS = ("TLAB_THREADS", "OMP_NUM_THREADS")  # checked in this order

_configured = False


def _quota_from_v2(text: str) -> float | None:
    """``cpu.max`` holds ``"<quota> <period>"`` in microseconds, or ``"max <period>"``."""
    parts = text.split()
    if not parts or parts[0] == "max":
        return None
    period = float(parts[1]) if len(parts) > 1 else 100_000.0
    return float(parts[0]) / period if period > 0 else None


def _quota_from_v1(quota_text: str, period_text: str) -> float | None:
    """``cpu.cfs_quota_us`` is -1 when unlimited; ``cpu.cfs_period_us`` is the period."""
    quota, period = float(quota_text.strip()), float(period_text.strip())
    if quota <= 0 or period <= 0:
        return None
    return quota / period


def _cgroup_paths(proc_cgroup: str) -> tuple[str | None, str | None]:
    """This process's cgroup v2 path and its v1 ``cpu`` controller path, from /proc/self/cgroup."""
    v2 = v1 = None
    for line in proc_cgroup.splitlines():
        fields = line.strip().split(":", 2)
        if len(fields) != 3:
            continue
        _, controllers, path = fields
        if controllers == "":
            v2 = path
        elif "cpu" in controllers.split(","):
            v1 = path
    return v2, v1


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def cgroup_cpu_limit(
    root: str | os.PathLike = "/sys/fs/cgroup", proc_cgroup: str | None = None
) -> float | None:
    """The CPU quota of this process's cgroup in CPUs (e.g. 1.5), or None when there is none.

    Reads cgroup v2 (``cpu.max``, on the unified hierarchy at ``root`` or ``root/unified``) and
    cgroup v1 (``cpu/cpu.cfs_quota_us`` over ``cpu/cpu.cfs_period_us``), from this process's
    own cgroup up to the root, and returns the tightest limit found.

    Args:
        root: where the cgroup file systems are mounted (a folder of fake files in tests).
        proc_cgroup: the text of ``/proc/self/cgroup`` (default: read it).
    """
    root = Path(root)
    if proc_cgroup is None:
        proc_cgroup = _read(Path("/proc/self/cgroup")) or ""
    v2_path, v1_path = _cgroup_paths(proc_cgroup)
    limits: list[float] = []
    for base in (root, root / "unified"):
        for folder in _ancestors(base, v2_path):
            text = _read(folder / "cpu.max")
            if text is not None and (limit := _quota_from_v2(text)) is not None:
                limits.append(limit)
    for base in (root / "cpu", root / "cpu,cpuacct"):
        for folder in _ancestors(base, v1_path):
            quota, period = _read(folder / "cpu.cfs_quota_us"), _read(folder / "cpu.cfs_period_us")
            if quota is not None and period is not None:
                try:
                    limit = _quota_from_v1(quota, period)
                except ValueError:
                    continue
                if limit is not None:
                    limits.append(limit)
    return min(limits) if limits else None


def _ancestors(base: Path, cgroup_path: str | None) -> Iterator[Path]:
    """``base/a/b``, ``base/a``, ``base`` for cgroup path ``/a/b`` (containers see only ``base``)."""
    parts = [p for p in (cgroup_path or "").split("/") if p]
    for n in range(len(parts), -1, -1):
        yield base.joinpath(*parts[:n])


def usable_cpus(
    affinity: set[int] | None = None,
    quota: float | None | str = "read",
) -> int:
    """The number of CPUs this process may actually use: its affinity mask, capped by its quota.

    Args:
        affinity: the CPUs the process may run on (default: ``os.sched_getaffinity(0)``, or
            ``os.cpu_count()`` where affinity is not available).
        quota: the cgroup CPU quota in CPUs (default: read by :func:`cgroup_cpu_limit`);
            None means no quota. A fractional quota rounds up (1.5 CPUs allow 2 busy threads).
    """
    if affinity is None:
        try:
            count = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):  # macOS and Windows have no affinity call
            count = os.cpu_count() or 1
    else:
        count = len(affinity)
    if quota == "read":
        quota = cgroup_cpu_limit()
    if quota is not None:
        count = min(count, max(1, math.ceil(quota)))
    return max(1, count)


def _parse_env(name: str, value: str) -> int | None:
    """The first integer of an environment value (OpenMP allows lists such as ``"4,2"``)."""
    first = value.split(",")[0].strip()
    if first == "":
        return None
    try:
        n = int(first)
    except ValueError:
        if name == "TLAB_THREADS":
            raise ValueError(
                f"TLAB_THREADS must be a positive whole number of threads, but is {value!r}."
            ) from None
        return None  # OpenMP's own business; PyTorch reports it itself
    if n < 1:
        if name == "TLAB_THREADS":
            raise ValueError(f"TLAB_THREADS must be at least 1, but is {value!r}.")
        return None
    return n


def decide_threads(env: Mapping[str, str] | None = None, cpus: int | None = None) -> int:
    """The number of intra-op threads the course uses.

    ``TLAB_THREADS``, else ``OMP_NUM_THREADS``, else :data:`DEFAULT_THREADS`; never more than
    the CPUs this process may use (:func:`usable_cpus`).

    Args:
        env: the environment to read (default: ``os.environ``).
        cpus: the usable CPUs (default: :func:`usable_cpus`).
    """
    env = os.environ if env is None else env
    cpus = usable_cpus() if cpus is None else cpus
    wanted = DEFAULT_THREADS
    for name in ENV_VARS:
        if name in env and (n := _parse_env(name, env[name])) is not None:
            wanted = n
            break
    return max(1, min(wanted, cpus))


def configure_torch_threads(env: Mapping[str, str] | None = None) -> int:
    """Set PyTorch's intra-op thread count to :func:`decide_threads` and return it.

    For notebooks, scripts and the grader's kernels: call once at start-up, e.g.
    ``python -c "from transformer_lab.threads import configure_torch_threads as c; c()"``.
    """
    global _configured
    threads = decide_threads(env)
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    _configured = True
    return threads


def ensure_threads_configured() -> int:
    """Apply :func:`configure_torch_threads` the first time only (used on import).

    A later import of the widgets or the trainer leaves alone a thread count the user has set.
    """
    if not _configured:
        return configure_torch_threads()
    return torch.get_num_threads()


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run a block with ``n`` intra-op threads, then restore the previous count."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
