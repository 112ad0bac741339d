"""One bubblewrap sandbox per graded kernel.

nbgrader (through nbclient) starts one IPython kernel per submission. :class:`SandboxKernelManager`
starts that kernel inside Debian's ``bwrap`` instead of as a plain child of the grader:

- **no network** (``--unshare-net``); the kernel talks to the grader over Unix sockets in a
  private folder (ZeroMQ's ``ipc`` transport), not over TCP;
- **a new root file system** holding only ``/usr`` and the ``/etc`` files in ``bwrap.ETC_FILES``,
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

The command line itself (mounts, limits, environment) is built in :mod:`.bwrap`; this module
makes the private folders and starts, interrupts and cleans up the kernel. Output size is
limited by the grader, not here (see ``execute.GuardedExecute``).
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager

from transformer_lab.grading.preflight.nofollow import copy_without_links
from transformer_lab.grading.run.bwrap import (
    NOBODY,
    SandboxError,
    SandboxLimits,
    new_uid,
    sandbox_command,
    sandbox_env,
)
from transformer_lab.grading.run.cpushare import CpuShare

DEFAULT_LIMITS = SandboxLimits()  # frozen: one shared default is safe

__all__ = ["probe", "SandboxKernelManager", "release_leftovers"]

# Private folders of this process's kernels not yet removed (IPC sockets in /dev/shm, the seed
# folder): a kernel that dies is not always shut down by nbclient, so the grader removes what
# is left after each notebook (:func:`release_leftovers`) and at exit.
_LIVE: set[Path] = set()


def release_leftovers() -> None:
    """Remove every private folder of this process's kernels (the kernels are gone)."""
    for folder in list(_LIVE):
        shutil.rmtree(folder, ignore_errors=True)
        _LIVE.discard(folder)


atexit.register(release_leftovers)


def _memory_dir() -> str | None:
    """``/dev/shm`` if it is a writable tmpfs (sockets then live in memory, not on disk)."""
    try:
        with open("/proc/mounts", encoding="utf-8") as fh:
            mounts = [line.split() for line in fh]
    except OSError:
        return None
    shm = any(len(m) > 2 and m[1] == "/dev/shm" and m[2] == "tmpfs" for m in mounts)
    return "/dev/shm" if shm and os.access("/dev/shm", os.W_OK) else None


STALE_AFTER = 6 * 3600.0  # seconds; no graded kernel lives this long (per-cell time limits)


def _maker_gone(path: Path, prefix: str) -> bool:
    """Is the grading process that made this folder gone? Its id follows the prefix
    (:func:`_private_dir`); its kernels died with it (``--die-with-parent``)."""
    pid = path.name[len(prefix) :].split("-", 1)[0]
    if not pid.isdigit():
        return False  # a folder named before process ids were: the age rule decides
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # alive (another user's), or unknowable: keep it
    return False


def _remove_stale_dirs() -> None:
    """Remove private folders left by grading processes that were killed (e.g. by the watchdog,
    or a worker stopped with SIGKILL): at once when the process that made them is gone, and
    any older than ``STALE_AFTER`` (its id may have been reused)."""
    import time

    for base in {tempfile.gettempdir(), _memory_dir() or tempfile.gettempdir()}:
        for prefix in ("tlab-ipc-", "tlab-seed-", "tlab-work-"):
            for path in Path(base).glob(prefix + "*"):
                try:
                    old = time.time() - path.lstat().st_mtime > STALE_AFTER
                    if path.is_dir() and (old or _maker_gone(path, prefix)):
                        shutil.rmtree(path, ignore_errors=True)
                except OSError:
                    continue


def _private_dir(prefix: str, uid: int = NOBODY, base: str | None = None) -> Path:
    """A folder only ``uid`` may use, named after this process (``PREFIX<pid>-XXXX``)."""
    path = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=base))
    if os.geteuid() == 0:
        os.chown(path, uid, uid)  # the kernel's own user
    path.chmod(0o700)
    return path


def probe(course_root: Path, limits: SandboxLimits = DEFAULT_LIMITS) -> None:
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

    Class attributes set by the grader before a notebook runs: ``course_root``, ``limits`` and
    ``package``.
    """

    course_root: Path = Path.cwd()
    limits: SandboxLimits = SandboxLimits()
    package: Path | None = None  # the graded build of the package (run/stripped.py), if any

    async def _async_pre_start_kernel(self, **kw):
        self._tlab_release()  # a restart: the previous kernel's folders and group
        _remove_stale_dirs()
        # Private folders: Unix sockets + connection file, and the seed of the working folder.
        self._tlab_uid = new_uid() if os.geteuid() == 0 else NOBODY
        self._tlab_ipc = _private_dir("tlab-ipc-", self._tlab_uid, _memory_dir())
        self._tlab_seed = _private_dir("tlab-seed-", self._tlab_uid)
        _LIVE.update((self._tlab_ipc, self._tlab_seed))
        self.transport = "ipc"
        self.ip = str(self._tlab_ipc / "kernel")
        self.connection_file = str(self._tlab_ipc / "kernel.json")
        cwd = kw.get("cwd")
        if cwd and os.path.isdir(cwd):
            # Files next to the notebook, never notebooks, never through a symlink.
            copy_without_links(Path(cwd), self._tlab_seed, skip_suffixes=(".ipynb",))
        cpus = self.limits.cpu_share()
        self._tlab_cpus = cpus
        self._tlab_share = CpuShare.create(f"kernel-{self._tlab_uid}", cpus)
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
            package=self.package,
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
                _LIVE.discard(folder)
                setattr(self, attr, None)
        share = getattr(self, "_tlab_share", None)
        if share is not None:
            share.remove()
            self._tlab_share = None
