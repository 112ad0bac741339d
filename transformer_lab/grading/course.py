"""Where the course lives on disk, and how to run nbgrader against it.

The course directory is the folder holding ``nbgrader_config.py`` (the repository root for
this course). nbgrader itself runs in a child process (:mod:`transformer_lab.grading.run.driver`)
so that one slow, crashing or hanging student notebook can never take the ``tlab`` command
down with it, and so that several nbgrader steps share one ~3 s start-up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = [
    "CourseError",
    "find_course_root",
    "read_course_dirs",
    "list_assignments",
    "assignment_notebooks",
    "run_driver",
]

CONFIG_NAME = "nbgrader_config.py"


class CourseError(RuntimeError):
    """A problem with the course directory that the instructor must fix (clear message)."""


def find_course_root(start: str | os.PathLike | None = None) -> Path:
    """Return the nearest folder at or above ``start`` (default: cwd) holding nbgrader_config.py."""
    here = Path(start or os.getcwd()).resolve()
    for folder in [here, *here.parents]:
        if (folder / CONFIG_NAME).is_file():
            return folder
    raise CourseError(
        f"expected a course directory containing {CONFIG_NAME} at or above {here}, but found none; "
        f"run tlab from the course folder or pass --root."
    )


def read_course_dirs(root: Path) -> dict[str, str]:
    """Read the directory names nbgrader will use from the course's nbgrader_config.py.

    Returns a dict with ``source``, ``release``, ``submitted``, ``autograded``, ``feedback``.
    """
    from traitlets.config.loader import PyFileConfigLoader

    cfg = PyFileConfigLoader(CONFIG_NAME, path=str(root)).load_config()
    cd = cfg.get("CourseDirectory", {})
    return {
        "source": cd.get("source_directory", "source"),
        "release": cd.get("release_directory", "release"),
        "submitted": cd.get("submitted_directory", "submitted"),
        "autograded": cd.get("autograded_directory", "autograded"),
        "feedback": cd.get("feedback_directory", "feedback"),
    }


def list_assignments(source_dir: Path) -> list[str]:
    """Assignment folders under the source directory that contain at least one notebook."""
    if not source_dir.is_dir():
        return []
    return sorted(
        p.name
        for p in source_dir.iterdir()
        if p.is_dir() and not p.name.startswith(".") and any(p.glob("*.ipynb"))
    )


def assignment_notebooks(folder: Path) -> list[Path]:
    """The notebooks of one assignment folder (top level only, as nbgrader grades them)."""
    return sorted(p for p in folder.glob("*.ipynb") if not p.name.startswith("."))


def count_code_cells(folder: Path) -> int:
    """Code cells in the assignment's notebooks (0 for a notebook that cannot be read)."""
    import json

    count = 0
    for path in assignment_notebooks(folder):
        try:
            cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
        except (OSError, ValueError, AttributeError):
            continue
        count += sum(1 for c in cells if isinstance(c, dict) and c.get("cell_type") == "code")
    return count


def failure_detail(event: dict | None, stderr: str = "") -> str:
    """The most useful text about a failed nbgrader operation: nbgrader logs the real error and
    then raises a generic "see the above traceback", so its ERROR log lines come first."""
    event = event or {}
    log, error = event.get("log") or "", event.get("error") or ""
    if "[ERROR]" in log:
        return log[log.index("[ERROR]") :]
    return error or log or stderr


def run_driver(
    job: dict,
    *,
    on_event: Callable[[dict], None] | None = None,
    env: dict[str, str] | None = None,
    idle_timeout: float | None = None,
    feed: Callable[[dict | None], tuple[list[dict], bool]] | None = None,
) -> tuple[list[dict], int, str]:
    """Run a list of nbgrader operations in one child process.

    Args:
        job: ``{"root": ..., "config": {...overrides}, "ops": [...]}`` (see ``run/driver.py``).
        on_event: called with every result as soon as the child reports it.
        env: extra environment variables for the child.
        idle_timeout: kill the child if it reports nothing for this many seconds.
        feed: more operations while the child runs: called with ``None`` at the start and with
            every event, it returns ``(ops, last)``; the ops are sent at once, and ``last``
            closes the child's stdin (it finishes what it has and exits).
    Returns:
        ``(events, returncode, stderr_tail)``; ``returncode`` is ``-9`` if the watchdog killed it.
    """
    child_env = _driver_env(env)
    proc = subprocess.Popen(
        # Run by path, not with -m: the driver then imports transformer_lab (and torch) only
        # when it needs the grading guards, which saves seconds on every release.
        [sys.executable, str(Path(__file__).parent / "run" / "driver.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env,
        cwd=job["root"],
    )
    stderr_chunks: list[str] = []
    drainer = threading.Thread(target=_drain, args=(proc.stderr, stderr_chunks), daemon=True)
    drainer.start()
    proc.stdin.write(json.dumps({**job, "more": feed is not None}) + "\n")
    send = _Sender(proc, feed)
    send(None)

    events: list[dict] = []
    watchdog = _Watchdog(proc, idle_timeout)
    for line in _lines(proc.stdout):
        watchdog.arm()
        if not line.startswith("@@tlab "):
            continue  # anything else a library printed on stdout
        event = json.loads(line[len("@@tlab ") :])
        events.append(event)
        if on_event is not None:
            on_event(event)
        send(event)
    watchdog.cancel()
    proc.wait()
    drainer.join(timeout=5)
    return events, (-9 if watchdog.killed else proc.returncode), "".join(stderr_chunks)


def _drain(stream, tail: list[str]) -> None:  # noqa: ANN001
    """Read ``stream`` to its end, keeping its last 200 lines in ``tail`` (nbgrader logs a lot)."""
    for line in stream:
        tail.append(line)
        del tail[:-200]


def _driver_env(env: dict[str, str] | None) -> dict[str, str]:
    """The grading process's environment: ours, ``env``, this package first, our scripts on PATH."""
    child_env = dict(os.environ)
    child_env.update(env or {})
    # The driver imports this package; make sure it resolves to the same copy as ours.
    package_parent = str(Path(__file__).resolve().parents[2])
    child_env["PYTHONPATH"] = os.pathsep.join(
        [package_parent] + ([child_env["PYTHONPATH"]] if child_env.get("PYTHONPATH") else [])
    )
    # nbgrader runs the `alembic` command of its own environment to open the gradebook; when a
    # venv's Python is called by path (`.venv/bin/tlab`, `make test`) that bin/ is not on PATH.
    scripts_dir = str(Path(sys.executable).parent)
    child_env["PATH"] = os.pathsep.join(
        [scripts_dir] + ([child_env["PATH"]] if child_env.get("PATH") else [])
    )
    return child_env


class _Sender:
    """Writes the operations ``feed`` hands out to the child's stdin; closes it after the last."""

    def __init__(self, proc: subprocess.Popen, feed) -> None:  # noqa: ANN001
        self.proc, self.feed = proc, feed
        if feed is None:
            proc.stdin.close()

    def __call__(self, event: dict | None) -> None:
        if self.feed is None or self.proc.stdin.closed:
            return
        ops, last = self.feed(event)
        try:
            for op in ops:
                self.proc.stdin.write(json.dumps(op) + "\n")
            self.proc.stdin.flush()
            if last:
                self.proc.stdin.close()
        except (BrokenPipeError, OSError, ValueError):  # the child has gone: its events tell
            pass


class _Watchdog:
    """Kills a process that reports nothing for ``idle_timeout`` seconds (re-armed per line)."""

    def __init__(self, proc: subprocess.Popen, idle_timeout: float | None) -> None:
        self.proc, self.idle_timeout, self.killed = proc, idle_timeout, False
        self._timer: threading.Timer | None = None
        self.arm()

    def _kill(self) -> None:
        self.killed = True
        self.proc.kill()

    def arm(self) -> None:
        self.cancel()
        if self.idle_timeout:
            self._timer = threading.Timer(self.idle_timeout, self._kill)
            self._timer.daemon = True
            self._timer.start()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def _lines(stream) -> Iterator[str]:
    for line in stream:
        yield line.rstrip("\n")
