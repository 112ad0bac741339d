"""One bubblewrap sandbox per graded kernel.

nbgrader (through nbclient) starts one IPython kernel per submission. :class:`SandboxKernelManager`
starts that kernel inside Debian's ``bwrap`` instead of as a plain child of the grader:

- **no network** (``--unshare-net``); the kernel talks to the grader over Unix sockets in a
  private folder (ZeroMQ's ``ipc`` transport), not over TCP;
- **a new root file system** holding only ``/usr`` and the ``/etc`` files in ``ETC_FILES``,
  the Python installation (read-only), the ``transformer_lab`` package (read-only), its own
  ``/tmp`` and its own working folder ``/home/student``: two size-limited tmpfs mounts that
  exist only inside the sandbox, so the kernel never writes the host's disk. The submission's
  non-notebook files are copied (never through a symlink, see :mod:`.nofollow`) into a private
  seed folder, mounted read-only, and copied into the working folder by the launcher before the
  kernel starts. ``solutions/``, ``source/``, the gradebook, other students' folders and the
  instructor's home are not mounted at all;
- **no privileges**: as root, ``bwrap`` sets the mounts up and ``setpriv`` then drops to a
  user id of its own, unused by anyone else (no capabilities, ``no_new_privs``), so that the
  process limit counts this kernel's processes only and no two kernels can touch each other;
  as another user, ``bwrap`` uses an unprivileged user namespace;
- **limits** (``prlimit``): address space, CPU seconds, processes, size of any file written,
  open files; and new PID, IPC and UTS namespaces, killed with the grader (``--die-with-parent``);
- **a CPU share of its own** (:mod:`.cpushare`: a cgroup capped at ``cpus`` CPUs, joined
  before ``bwrap`` starts) and as many torch threads as CPUs in that share;
- **a clean environment**: only the variables Python, PyTorch and Jupyter need.

Output size is limited by the grader, not here (see ``execute.GuardedExecute``).
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager

__all__ = [
    "SandboxLimits",
    "SandboxError",
    "sandbox_command",
    "sandbox_env",
    "probe",
    "SandboxKernelManager",
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


def _sibling(name: str):
    """A module of this folder, loaded by path (importing the package would import torch)."""
    import importlib.util

    key = f"_tlab_grading_{name}"
    if key not in sys.modules:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
        spec = importlib.util.spec_from_file_location(key, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


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
        processes: processes and threads of the sandbox user (RLIMIT_NPROC).
        file_mb: largest file the kernel may write (RLIMIT_FSIZE).
        tmp_mb: size of the private /tmp (a tmpfs in memory).
        work_mb: size of the working folder /home/student (a tmpfs in memory).
        open_files: open file descriptors (RLIMIT_NOFILE).
        cpus: CPU share (None: ``$TLAB_SANDBOX_CPUS``, else every CPU of the machine).
    """

    memory_mb: int = 4096
    cpu_seconds: int = 1200
    processes: int = 256
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
    package = Path(__file__).resolve().parents[1]  # transformer_lab/
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
) -> list[str]:
    """The full command line: ``[sh (join cgroup)] bwrap ... [setpriv ...] sh (seed) prlimit ...``.

    ``seed`` holds the files copied into the working folder; ``uid`` is the user the kernel runs
    as when the grader is root (see :func:`new_uid`); ``cgroup_procs`` is the ``cgroup.procs``
    file of the kernel's CPU share (:mod:`.cpushare`), joined before ``bwrap`` starts.
    """
    cmd = []
    if cgroup_procs is not None:
        cmd += ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(cgroup_procs)]
    cmd += [_bwrap(), "--die-with-parent", "--unshare-net", "--unshare-pid", "--unshare-ipc"]
    cmd += ["--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox"]
    as_root = os.geteuid() == 0
    if not as_root:
        cmd += ["--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY)]
    cmd += ["--ro-bind", "/usr", "/usr"]
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
    parents(ipc_dir)
    cmd += ["--bind", str(ipc_dir), str(ipc_dir)]
    made.add(ipc_dir)
    if seed is not None:
        parents(Path(SEED))
        cmd += ["--ro-bind", str(seed), SEED]
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


def sandbox_env(env: dict[str, str], cpus: float | None = None) -> dict[str, str]:
    """The kernel's environment: what Python and Jupyter need, nothing of the instructor's.

    ``cpus`` (the kernel's CPU share) sets the threads of torch, OpenMP, MKL and OpenBLAS.
    """
    out = {k: v for k, v in env.items() if k in KEEP_ENV or k.startswith(KEEP_ENV_PREFIXES)}
    threads = str(max(1, math.floor(cpus if cpus is not None else SandboxLimits().cpu_share())))
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


def _memory_dir() -> str | None:
    """``/dev/shm`` if it is a writable tmpfs (sockets then live in memory, not on disk)."""
    try:
        with open("/proc/mounts", encoding="utf-8") as fh:
            mounts = [line.split() for line in fh]
    except OSError:
        return None
    shm = any(len(m) > 2 and m[1] == "/dev/shm" and m[2] == "tmpfs" for m in mounts)
    return "/dev/shm" if shm and os.access("/dev/shm", os.W_OK) else None


def _private_dir(prefix: str, uid: int = NOBODY, base: str | None = None) -> Path:
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    if os.geteuid() == 0:
        os.chown(path, uid, uid)  # the kernel's own user
    path.chmod(0o700)
    return path


def probe(course_root: Path, limits: SandboxLimits = SandboxLimits()) -> None:
    """Start Python in a sandbox once; raise :class:`SandboxError` saying why if it fails."""
    uid = new_uid()
    seed, ipc_dir = _private_dir("tlab-probe-seed-", uid), _private_dir("tlab-probe-ipc-", uid)
    try:
        code = "import socket, os; print(os.getuid())"
        cmd = sandbox_command(
            [sys.executable, "-c", code],
            course_root=course_root,
            seed=seed,
            ipc_dir=ipc_dir,
            limits=limits,
            uid=uid,
        )
        try:
            done = subprocess.run(
                cmd, capture_output=True, text=True, timeout=60, env=sandbox_env(dict(os.environ))
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxError(f"expected the sandbox to start, but it failed: {exc}") from None
        if done.returncode != 0:
            detail = (done.stderr or done.stdout).strip().splitlines()
            raise SandboxError(
                "expected the bubblewrap sandbox to start, but it failed with: "
                f"{detail[-1] if detail else f'exit code {done.returncode}'} (user namespaces "
                "disabled? run as root or enable them, or grade with --no-sandbox if you accept "
                "running student code with your rights)."
            )
    finally:
        shutil.rmtree(seed, ignore_errors=True)
        shutil.rmtree(ipc_dir, ignore_errors=True)


class SandboxKernelManager(AsyncKernelManager):
    """A kernel manager whose kernels run in a bubblewrap sandbox (see the module docstring).

    Class attributes set by the grader before a notebook runs: ``course_root`` and ``limits``.
    """

    course_root: Path = Path.cwd()
    limits: SandboxLimits = SandboxLimits()

    async def _async_pre_start_kernel(self, **kw):
        self._tlab_release()  # a restart: the previous kernel's folders and group
        # Private folders: Unix sockets + connection file, and the seed of the working folder.
        self._tlab_uid = new_uid() if os.geteuid() == 0 else NOBODY
        self._tlab_ipc = _private_dir("tlab-ipc-", self._tlab_uid, _memory_dir())
        self._tlab_seed = _private_dir("tlab-seed-", self._tlab_uid)
        self.transport = "ipc"
        self.ip = str(self._tlab_ipc / "kernel")
        self.connection_file = str(self._tlab_ipc / "kernel.json")
        cwd = kw.get("cwd")
        if cwd and os.path.isdir(cwd):
            # Files next to the notebook, never notebooks, never through a symlink.
            _sibling("nofollow").copy_without_links(
                Path(cwd), self._tlab_seed, skip_suffixes=(".ipynb",)
            )
        cpus = self.limits.cpu_share()
        self._tlab_cpus = cpus
        self._tlab_share = _sibling("cpushare").CpuShare.create(f"kernel-{self._tlab_uid}", cpus)
        return await super()._async_pre_start_kernel(**kw)

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        if os.geteuid() == 0:
            os.chmod(self.connection_file, 0o644)  # written by us, read by the kernel's user
        # In its own PID namespace the kernel's parent is PID 1, which ipykernel's parent
        # poller takes for "the grader exited"; --die-with-parent does that job instead.
        kernel_cmd = sandbox_command(
            [*kernel_cmd, "--IPKernelApp.parent_handle=1"],
            course_root=Path(self.course_root),
            seed=self._tlab_seed,
            ipc_dir=self._tlab_ipc,
            limits=self.limits,
            uid=self._tlab_uid,
            cgroup_procs=self._tlab_share.procs if self._tlab_share is not None else None,
        )
        kw["env"] = sandbox_env(dict(kw.get("env") or os.environ), self._tlab_cpus)
        kw.pop("cwd", None)  # bwrap --chdir
        return await super()._async_launch_kernel(kernel_cmd, **kw)

    async def _async_post_start_kernel(self, **kw) -> None:
        await super()._async_post_start_kernel(**kw)
        if os.geteuid() == 0:
            await self._tlab_seal_sockets()

    async def _tlab_seal_sockets(self, wait: float = 120.0) -> None:
        """Once the kernel has bound its five sockets, take their folder from its user.

        This happens before the grader sends the first cell, so no student cell can ever create
        a file in the one host folder the sandbox can write.
        """
        import asyncio
        import time

        ports = (self.shell_port, self.iopub_port, self.stdin_port, self.control_port)
        paths = [f"{self.ip}-{port}" for port in (*ports, self.hb_port)]
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and await self.is_alive():
            if all(os.path.exists(path) for path in paths):
                os.chown(self._tlab_ipc, 0, 0)
                os.chmod(self._tlab_ipc, 0o755)
                return
            await asyncio.sleep(0.02)

    async def _async_interrupt_kernel(self) -> None:
        # A signal to bwrap would end the sandbox; ask the kernel over its control channel
        # (Jupyter's "message" interrupt mode), and the kernel interrupts itself.
        if not self.has_kernel:
            raise RuntimeError("Cannot interrupt kernel. No kernel is running!")
        msg = self.session.msg("interrupt_request", content={})
        self._connect_control_socket()
        self.session.send(self._control_socket, msg)

    interrupt_kernel = _async_interrupt_kernel  # AsyncKernelManager binds the parent's version

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if not restart:
            self._tlab_release()

    def _tlab_release(self) -> None:
        for attr in ("_tlab_ipc", "_tlab_seed"):
            folder = getattr(self, attr, None)
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
                setattr(self, attr, None)
        share = getattr(self, "_tlab_share", None)
        if share is not None:
            share.remove()
            self._tlab_share = None
