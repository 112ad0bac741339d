"""The gradebook's database: SQLite by default, PostgreSQL for a class graded by many processes.

nbgrader keeps every grade in the database named by ``c.CourseDirectory.db_url`` (default:
``sqlite:///COURSE/gradebook.db``). This course's ``nbgrader_config.py`` also reads the
environment variable ``TLAB_GRADEBOOK_URL``, so every grading process of a class (``tlab grade
--jobs``, shards on a cluster, the formgrader on JupyterHub) can point at one PostgreSQL database::

    TLAB_GRADEBOOK_URL=postgresql+psycopg://grader@db-host/transformer_lab

(psycopg 3, ``pip install -e ".[postgres]"`` in this repository; nbgrader creates its tables;
the database must exist and be UTF-8, see :func:`check_database`).

Concurrent writers (see :func:`guard_gradebook`, installed in every nbgrader child process):

- SQLite allows one writer at a time and answers others with "database is locked" after a few
  seconds. Every nbgrader ``Gradebook`` session (open ... close, a fraction of a second; the
  notebook is executed outside any session) is therefore serialised with an exclusive
  ``flock`` on ``gradebook.db.lock``: writes wait their turn and are never lost.
- PostgreSQL handles concurrent sessions itself; only the steps that create or reshape shared
  rows (creating the tables, loading an assignment with ``generate_assignment``) take a
  PostgreSQL advisory lock, so that N shards starting together do not race to create them.

This module is imported by ``_driver`` without importing the package (no torch): keep it to the
standard library and nbgrader. About 300 lines, kept whole for that reason: the driver loads it
by path, alone, so the URL rules and the locks that depend on them stay in one file.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import threading
from pathlib import Path

__all__ = [
    "DEFAULT_DB_NAME",
    "gradebook_url",
    "is_postgres",
    "sqlite_path",
    "check_driver_available",
    "guard_gradebook",
    "schema_revision",
    "ENV_URL",
]

ENV_URL = "TLAB_GRADEBOOK_URL"
DEFAULT_DB_NAME = "gradebook.db"
_ADVISORY_KEY = 0x7F1A_B0D5  # any fixed 32-bit number: "tlab is changing the gradebook's shape"


def gradebook_url(root: str | os.PathLike) -> str:
    """The gradebook URL nbgrader will use for the course at ``root`` (config, env, default)."""
    from traitlets.config.loader import PyFileConfigLoader

    cfg = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    url = cfg.get("CourseDirectory", {}).get("db_url")
    if url:
        return str(url)
    return f"sqlite:///{Path(root).resolve() / DEFAULT_DB_NAME}"


def is_postgres(url: str) -> bool:
    return url.startswith(("postgresql", "postgres:"))


def sqlite_path(url: str) -> Path | None:
    """The file of a ``sqlite:///PATH`` URL (None for other databases or in-memory SQLite)."""
    if not url.startswith("sqlite:///"):
        return None
    path = url[len("sqlite:///") :]
    return Path(path) if path and path != ":memory:" else None


def check_driver_available(url: str) -> None:
    """Raise a one-sentence error if ``url`` needs a database driver that is not installed."""
    if not is_postgres(url):
        return
    if "+psycopg2" in url or "+" not in url.split("://", 1)[0]:
        raise ValueError(
            f"expected a PostgreSQL URL naming the psycopg 3 driver (postgresql+psycopg://...), "
            f"but got {_redact(url)}"
        )
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise ValueError(
            f"expected the psycopg package for the PostgreSQL gradebook {_redact(url)}, but it is "
            f'not installed; run: pip install -e ".[postgres]" in the course repository'
        ) from None


class GradebookError(ValueError):
    """The gradebook's database cannot be used as it is (a one-sentence reason)."""


_checked: set[str] = set()


def check_database(url: str) -> None:
    """Raise :class:`GradebookError` if a PostgreSQL gradebook cannot be reached, does not
    exist, or is not UTF-8 (nbgrader then fails with a ``TypeError`` on the first name it
    reads); checked once per URL and process, by the ``tlab`` commands before they start.
    SQLite needs nothing."""
    if not is_postgres(url) or url in _checked:
        return
    check_driver_available(url)
    import psycopg
    from sqlalchemy import create_engine

    engine = create_engine(url, future=True)  # only to read the URL as SQLAlchemy would
    args, kwargs = engine.dialect.create_connect_args(engine.url)
    engine.dispose()
    try:  # psycopg itself: SQLAlchemy's first connection to a SQL_ASCII database raises
        with psycopg.connect(*args, **kwargs) as conn:
            encoding = conn.execute("SHOW server_encoding").fetchone()[0]
    except psycopg.OperationalError as exc:
        said = (str(exc).strip().splitlines() or ["?"])[0].split(" failed: ")[-1].rstrip(".")
        if "does not exist" in said:  # FATAL:  database "x" does not exist
            reason = said.split("FATAL:")[-1].strip() + "; create it (createdb)"
        else:
            reason = f"it cannot be reached ({said}; is the server running?)"
        raise GradebookError(
            f"expected a PostgreSQL gradebook at {_redact(url)}, but {reason}."
        ) from None
    if isinstance(encoding, bytes):  # psycopg hands out bytes when the database is SQL_ASCII
        encoding = encoding.decode("ascii", "replace")
    if str(encoding).upper() not in ("UTF8", "UTF-8"):
        raise GradebookError(
            f"expected a UTF-8 database for the gradebook {_redact(url)}, but its encoding is "
            f"{encoding}; create the cluster with initdb --encoding=UTF8 --locale=C.UTF-8."
        )
    _checked.add(url)


def _redact(url: str) -> str:
    """The URL with any password replaced by ***."""
    scheme, sep, rest = url.partition("://")
    if "@" in rest.split("/", 1)[0]:
        creds, at, host = rest.partition("@")
        if ":" in creds:
            creds = creds.split(":", 1)[0] + ":***"
        rest = creds + at + host
    return scheme + sep + rest


class _ReentrantFileLock:
    """An exclusive ``flock`` held while at least one holder in this process has it."""

    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None
        self._depth = 0
        self._mutex = threading.RLock()

    def acquire(self) -> None:
        self._mutex.acquire()
        if self._depth == 0:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)  # waits for the other process's session to end
            self._fd = fd
        self._depth += 1

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        self._mutex.release()


_pg_depth = threading.local()


@contextlib.contextmanager
def postgres_advisory_lock(url: str):
    """Hold PostgreSQL's session advisory lock ``_ADVISORY_KEY`` on the gradebook's database.

    Re-entrant within a thread (a nested request would otherwise wait for itself: every
    connection is its own PostgreSQL session).
    """
    from sqlalchemy import create_engine, text

    depth = getattr(_pg_depth, "n", 0)
    if depth:
        _pg_depth.n = depth + 1
        try:
            yield
        finally:
            _pg_depth.n -= 1
        return
    engine = create_engine(url, future=True)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _ADVISORY_KEY})
            conn.commit()
            _pg_depth.n = 1
            try:
                yield
            finally:
                _pg_depth.n = 0
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _ADVISORY_KEY})
                conn.commit()
    finally:
        engine.dispose()


_installed: str | None = None
_schema_revision: str | None = None


def schema_revision() -> str | None:
    """nbgrader's newest database schema revision, read from its migration scripts.

    A new gradebook is stamped with it. nbgrader asks the ``alembic heads`` command, a Python
    start-up of about 1.7 s per new gradebook; the revision is a constant of the installed
    nbgrader: the one revision no other script names as its ``down_revision``. None if the
    scripts do not say exactly one (then nbgrader's own way is used).
    """
    global _schema_revision
    if _schema_revision is None:
        import ast
        import importlib.util

        package = Path(importlib.util.find_spec("nbgrader").origin).parent  # not imported here
        revisions, parents = set(), set()
        for script in (package / "alembic" / "versions").glob("*.py"):
            for node in ast.parse(script.read_text(encoding="utf-8")).body:
                target = node.targets[0] if isinstance(node, ast.Assign) else None
                target = node.target if isinstance(node, ast.AnnAssign) else target
                if not isinstance(target, ast.Name) or node.value is None:
                    continue
                if target.id not in ("revision", "down_revision"):
                    continue  # other assignments may be any expression
                try:
                    value = ast.literal_eval(node.value)
                except ValueError:
                    return None
                values = value if isinstance(value, (tuple, list)) else (value,)
                if target.id == "revision":
                    revisions.update(values)
                elif target.id == "down_revision":
                    parents.update(v for v in values if v)
        heads = revisions - parents
        if len(heads) != 1:
            return None
        _schema_revision = heads.pop()
    return _schema_revision


def _stamp_without_subprocess() -> None:
    """Let nbgrader stamp new gradebooks with :func:`schema_revision` (no ``alembic`` process)."""
    import nbgrader.api

    original = nbgrader.api.get_alembic_version
    if getattr(original, "_tlab", False):
        return

    def get_alembic_version() -> str:
        return schema_revision() or original()

    get_alembic_version._tlab = True
    get_alembic_version.__wrapped__ = original
    nbgrader.api.get_alembic_version = get_alembic_version


def guard_gradebook(url: str) -> None:
    """Make nbgrader's ``Gradebook`` safe for several grading processes at once (see above).

    Called before any nbgrader step runs, in every process that opens gradebooks. The guard is
    installed once per process and takes the lock of the gradebook each ``Gradebook`` opens
    (its own ``db_url``), so one process may open the gradebooks of several courses (a test
    run, a notebook session): ``url`` only checks that its database driver is installed.
    """
    global _installed
    _stamp_without_subprocess()
    check_driver_available(url)
    if _installed is not None:
        return
    _installed = url
    from nbgrader.api import Gradebook
    from nbgrader.converters import GenerateAssignment

    original_init, original_close = Gradebook.__init__, Gradebook.close
    original_start = GenerateAssignment.start

    def init(self, *args, **kwargs):
        db_url = str(kwargs.get("db_url", args[0] if args else ""))
        path = sqlite_path(db_url)
        if path is not None:  # one writer at a time, across processes
            lock = _file_lock(path)
            lock.acquire()
            self._tlab_lock = lock
            try:
                original_init(self, *args, **kwargs)
            except BaseException:
                self._tlab_lock = None
                lock.release()
                raise
        elif is_postgres(db_url):  # creating the tables (an empty database) happens once
            check_driver_available(db_url)
            with postgres_advisory_lock(db_url):
                original_init(self, *args, **kwargs)
        else:
            original_init(self, *args, **kwargs)

    def close(self):
        try:
            original_close(self)
        finally:
            lock = getattr(self, "_tlab_lock", None)
            if lock is not None:
                self._tlab_lock = None
                lock.release()

    def start(self, *args, **kwargs):
        db_url = str(self.coursedir.db_url)
        if is_postgres(db_url):
            with postgres_advisory_lock(db_url):
                return original_start(self, *args, **kwargs)
        return original_start(self, *args, **kwargs)

    Gradebook.__init__, Gradebook.close = init, close
    GenerateAssignment.start = start


_FILE_LOCKS: dict[Path, _ReentrantFileLock] = {}


def _file_lock(path: Path) -> _ReentrantFileLock:
    """The (process-wide, re-entrant) lock beside the SQLite gradebook at ``path``."""
    key = path.resolve()
    if key not in _FILE_LOCKS:
        _FILE_LOCKS[key] = _ReentrantFileLock(key.with_name(key.name + ".lock"))
    return _FILE_LOCKS[key]


def graded_in_gradebook(url: str, course_id: str, assignment: str) -> set[str]:
    """Students whose submission of ``assignment`` has grades in the gradebook at ``url``."""
    from nbgrader.api import Gradebook, MissingEntry

    guard_gradebook(url)
    with Gradebook(url, course_id) as gb:
        try:
            found = gb.find_assignment(assignment)
        except MissingEntry:
            return set()
        return {
            sub.student_id
            for sub in found.submissions
            if sub.notebooks and all(nb.grades for nb in sub.notebooks)
        }


def redacted(url: str) -> str:
    """``url`` without its password, safe to print and to store."""
    return _redact(url)


def alembic_on_path() -> None:
    """nbgrader runs its environment's ``alembic`` command when it meets an empty database: put
    this Python's scripts folder on PATH (a venv's Python called by path has it missing)."""
    scripts = str(Path(sys.executable).parent)
    if scripts not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([scripts, os.environ.get("PATH", "")])
