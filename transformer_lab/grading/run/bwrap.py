"""The bubblewrap command line of one graded kernel: its mounts, limits and environment.

:func:`sandbox_command` turns a kernel's command into ``[sh (join cgroup)] bwrap ... [setpriv
...] sh (seed) prlimit ... kernel``, and :func:`sandbox_env` gives it a clean environment; the
reasons for each mount and limit are in :mod:`.sandbox`, which starts kernels with them. This
module only builds lists and dicts (it starts nothing), so tests can read a command line whole.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "SandboxLimits",
    "SandboxError",
    "new_uid",
    "sandbox_command",
    "sandbox_env",
]

# Inside the sandbox: the kernel's working folder (and HOME), and the read-only seed folder
# whose files the launcher copies into it.
WORKDIR = "/home/student"
SEED = "/run/tlab-seed"
# Runs as the kernel's user inside the sandbox, before the kernel: fill the working folder.
LAUNCHER = f'cp -R --preserve=mode,timestamps {SEED}/. {WORKDIR}/ 2>/dev/null; exec "$@"'
# Environment variables passed into the sandbox (everything else is dropped).
KEEP_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "PYTHONPATH", "NBGRADER_EXECUTION")
KEEP_ENV_PREFIXES = ("JPY_", "TLAB_GRADING")
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
# /etc entries the kernel can read (fontconfig for matplotlib, the dynamic linker, users, time).
ETC_FILES = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "passwd",
    "group",
    "nsswitch.conf",
    "fonts",
    "mime.types",
)
FONT_CACHE = "/var/cache/fontconfig"
NOBODY = 65534
UID_BASE, UID_SPAN = 1_500_000_000, 100_000_000  # per-kernel user ids (as root): unnamed, unused


def new_uid() -> int:
    """A user id for one sandbox (as root); random in a range no real account uses."""
    import secrets

    return UID_BASE + secrets.randbelow(UID_SPAN)


class SandboxError(RuntimeError):
    """The sandbox could not be started (the message says what to install or fix)."""


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one graded kernel (all processes it starts share the process cap).

    Args:
        memory_mb: address-space limit per process (RLIMIT_AS); PyTorch needs about 1.5 GB.
        cpu_seconds: CPU time of the kernel process (RLIMIT_CPU), the whole notebook included.
        processes: processes and threads of the sandbox user (RLIMIT_NPROC); a kernel uses about
            15, and a fork bomb's copies of the kernel stop sooner the lower this is.
        file_mb: largest file the kernel may write (RLIMIT_FSIZE).
        tmp_mb: size of the private /tmp (a tmpfs in memory).
        work_mb: size of the working folder /home/student (a tmpfs in memory).
        open_files: open file descriptors (RLIMIT_NOFILE).
        cpus: CPU share (None: ``$TLAB_SANDBOX_CPUS``, else every CPU of the machine).
    """

    memory_mb: int = 4096
    cpu_seconds: int = 1200
    processes: int = 64
    file_mb: int = 64
    tmp_mb: int = 256
    work_mb: int = 256
    open_files: int = 1024
    cpus: float | None = None

    def cpu_share(self) -> float:
        """The CPUs one kernel may use (at least 0.1, at most the machine's)."""
        machine = float(os.cpu_count() or 1)
        cpus = self.cpus
        if cpus is None:
            try:
                cpus = float(os.environ.get("TLAB_SANDBOX_CPUS") or machine)
            except ValueError:
                cpus = machine
        return min(max(cpus, 0.1), machine)


def _bwrap() -> str:
    path = shutil.which("bwrap")
    if path is None:
        raise SandboxError(
            "expected Debian's bubblewrap (`bwrap`) to sandbox each submission, but it is not "
            "installed; install it (`apt-get install bubblewrap`) or grade with --no-sandbox "
            "if you accept running student code with your rights."
        )
    return path


def _is_site_dir(path: Path) -> bool:
    return path.name in ("site-packages", "dist-packages")


def _python_roots(course_root: Path) -> list[Path]:
    """Folders the kernel's Python needs (read-only): the installation, the venv, site dirs."""
    roots = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix)}
    for entry in sys.path:
        if entry and os.path.isdir(entry):
            roots.add(Path(entry))
    roots.add(Path(os.path.realpath(sys.executable)).parent.parent)
    package = Path(__file__).resolve().parents[2]  # transformer_lab/
    course = course_root.resolve()
    keep = {package}
    for root in roots:
        root = root.resolve()
        if root == course or root in course.parents:
            continue  # never the course folder or anything above it
        if root in package.parents and not _is_site_dir(root):
            continue  # e.g. the repository on PYTHONPATH: only the package itself is bound
        if course in root.parents and not (
            root.name in (".venv", "venv") or "site-packages" in root.parts
        ):
            continue  # only a virtual environment may come from inside the course folder
        keep.add(root)
    # Drop folders already inside another kept folder.
    return sorted(r for r in keep if not any(o != r and o in r.parents for o in keep))


def sandbox_command(
    kernel_cmd: list[str],
    *,
    course_root: Path,
    ipc_dir: Path,
    seed: Path | None = None,
    limits: SandboxLimits = SandboxLimits(),
    uid: int = NOBODY,
    cgroup_procs: Path | None = None,
    package: Path | None = None,
) -> list[str]:
    """The full command line: ``[sh (join cgroup)] bwrap ... [setpriv ...] sh (seed) prlimit ...``.

    ``seed`` holds the files copied into the working folder; ``uid`` is the user the kernel runs
    as when the grader is root (see :func:`new_uid`); ``cgroup_procs`` is the ``cgroup.procs``
    file of the kernel's CPU share (:mod:`.cpushare`), joined before ``bwrap`` starts;
    ``package`` is the graded build of the package (:mod:`.stripped`), bound read-only in place
    of the real one.
    """
    cmd = []
    if cgroup_procs is not None:
        cmd += ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(cgroup_procs)]
    cmd += [_bwrap(), "--die-with-parent", "--unshare-net", "--unshare-pid", "--unshare-ipc"]
    cmd += ["--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox"]
    as_root = os.geteuid() == 0
    if not as_root:
        cmd += ["--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY)]
    cmd += _system_view(limits)
    cmd += _course_view(course_root, ipc_dir, seed, package)
    # A session of its own: no terminal to inject keystrokes into, and the kernel's SIGINT
    # (sent by ipykernel itself on an interrupt request) reaches only the sandbox.
    cmd += ["--chdir", WORKDIR, "--new-session"]
    if as_root:
        setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
        cmd += ["--", setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
        cmd += ["--no-new-privs", "--inh-caps=-all", "--bounding-set=-all"]
    else:
        cmd += ["--cap-drop", "ALL", "--"]
    if seed is not None:  # as the kernel's user: copy the seed into the tmpfs working folder
        cmd += ["/bin/sh", "-c", LAUNCHER, "tlab-seed"]
    prlimit = shutil.which("prlimit") or "/usr/bin/prlimit"
    cmd += [
        prlimit,
        f"--as={limits.memory_mb << 20}",
        f"--cpu={limits.cpu_seconds}",
        f"--nproc={limits.processes}",
        f"--fsize={limits.file_mb << 20}",
        f"--nofile={limits.open_files}",
        "--core=0",
        "--",
    ]
    return cmd + list(kernel_cmd)


def _system_view(limits: SandboxLimits) -> list[str]:
    """bwrap arguments: the system read-only, /proc and /dev, and the size-capped tmpfs folders."""
    cmd = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64"):
        path = Path("/") / name
        if path.is_symlink():
            cmd += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            cmd += ["--ro-bind", str(path), str(path)]
    cmd += ["--perms", "0755", "--dir", "/etc"]
    for name in ETC_FILES:
        path = Path("/etc") / name
        if path.exists():
            cmd += ["--ro-bind", str(path), str(path)]
    if Path(FONT_CACHE).is_dir():  # fontconfig's system cache: no font scan per kernel
        cmd += ["--ro-bind", FONT_CACHE, FONT_CACHE]
    cmd += ["--proc", "/proc", "--dev", "/dev"]
    cmd += ["--perms", "1777", "--size", str(limits.tmp_mb << 20), "--tmpfs", "/tmp"]
    cmd += ["--perms", "0755", "--dir", "/home"]
    # Owned by the sandbox's root: writable by all, and the kernel's user is the only one inside.
    cmd += ["--perms", "1777", "--size", str(limits.work_mb << 20), "--tmpfs", WORKDIR]
    return cmd


def _course_view(
    course_root: Path, ipc_dir: Path, seed: Path | None, package: Path | None = None
) -> list[str]:
    """bwrap arguments: Python and the package read-only (``package`` over the real one), the
    IPC folder, the seed; each with the folders above it made first (after the system view's)."""
    cmd: list[str] = []
    made: set[Path] = {Path("/"), Path("/usr"), Path("/tmp"), Path("/etc"), Path("/proc")}
    made |= {Path("/home"), Path(WORKDIR)}

    def parents(target: Path) -> None:
        for parent in reversed(target.parents):
            if parent not in made:
                made.add(parent)
                cmd.extend(["--perms", "0755", "--dir", str(parent)])

    for root in _python_roots(course_root):
        parents(root)
        cmd += ["--ro-bind", str(root), str(root)]
        made.add(root)
    if package is not None:  # mounted after (over) the real package: the kernel sees only this
        cmd += ["--ro-bind", str(package), str(Path(__file__).resolve().parents[2])]
    parents(ipc_dir)
    cmd += ["--bind", str(ipc_dir), str(ipc_dir)]
    made.add(ipc_dir)
    if seed is not None:
        parents(Path(SEED))
        cmd += ["--ro-bind", str(seed), SEED]
    return cmd


def sandbox_env(env: dict[str, str], cpus: float | None = None) -> dict[str, str]:
    """The kernel's environment: what Python and Jupyter need, nothing of the instructor's.

    The threads of torch, OpenMP, MKL and OpenBLAS: ``$TLAB_SANDBOX_THREADS`` (the grader's
    decision, ``transformer_lab.threads``), never more than ``cpus`` (the kernel's CPU share).
    """
    out = {k: v for k, v in env.items() if k in KEEP_ENV or k.startswith(KEEP_ENV_PREFIXES)}
    share = max(1, math.floor(cpus if cpus is not None else SandboxLimits().cpu_share()))
    wanted = env.get("TLAB_SANDBOX_THREADS", "")
    threads = str(min(share, int(wanted)) if wanted.isdigit() and int(wanted) > 0 else share)
    out.update({name: threads for name in THREAD_ENV})
    out.update(
        HOME=WORKDIR,
        TMPDIR="/tmp",
        MPLCONFIGDIR="/tmp/matplotlib",
        IPYTHONDIR="/tmp/ipython",
        JUPYTER_RUNTIME_DIR="/tmp/jupyter",
        PYTHONDONTWRITEBYTECODE="1",
        TLAB_SANDBOX="1",
    )
    out.setdefault("PATH", "/usr/bin:/bin")
    return out
