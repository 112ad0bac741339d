"""A throw-away PostgreSQL server for the tests (Debian's ``postgresql`` package).

``initdb`` makes a cluster in a fresh temporary folder; the server listens only on a Unix socket
in that folder (no TCP port, nothing shared with other test runs) with ``trust`` authentication,
and is stopped and deleted afterwards. PostgreSQL refuses to run as root, so when the tests run
as root the cluster belongs to the ``postgres`` system user (or ``nobody``) via ``runuser``.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["find_pg_bin", "PostgresServer", "missing_reason"]


PROGRAMS = ("initdb", "pg_ctl", "postgres")


def find_pg_bin() -> Path | None:
    """``$TLAB_PG_BIN`` if set (None if it lacks a program), else the newest
    ``/usr/lib/postgresql/*/bin`` holding initdb, pg_ctl and postgres."""
    if os.environ.get("TLAB_PG_BIN"):
        chosen = Path(os.environ["TLAB_PG_BIN"])
        return chosen if all((chosen / exe).is_file() for exe in PROGRAMS) else None
    candidates = []
    for folder in glob.glob("/usr/lib/postgresql/*/bin"):
        p = Path(folder)
        if all((p / exe).is_file() for exe in PROGRAMS):
            try:
                candidates.append((int(p.parent.name.split(".")[0]), p))
            except ValueError:
                continue
    return max(candidates)[1] if candidates else None


def _run_as() -> str | None:
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    return None


def missing_reason() -> str | None:
    """Why no server can be started here (None if it can)."""
    if find_pg_bin() is None:
        where = os.environ.get("TLAB_PG_BIN") or "/usr/lib/postgresql/*/bin"
        return f"PostgreSQL's initdb, pg_ctl and postgres are not in {where}"
    if os.geteuid() == 0 and (_run_as() is None or shutil.which("runuser") is None):
        return "running as root without a postgres or nobody user and runuser to own the cluster"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return 'psycopg 3 is not installed (pip install -e ".[dev]")'
    return None


class PostgresServer:
    """``with PostgresServer() as pg: pg.create_database("x") -> SQLAlchemy URL``."""

    user = "tlab"

    def __init__(self):
        self.bin = find_pg_bin()
        self.owner = _run_as()
        self.dir = Path(tempfile.mkdtemp(prefix="tlab-pg-"))
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"

    def _cmd(self, *args: str) -> list[str]:
        return ["runuser", "-u", self.owner, "--", *args] if self.owner else list(args)

    def start(self) -> PostgresServer:
        if self.owner:
            os.chmod(self.dir, 0o755)
            shutil.chown(self.dir, user=self.owner)
        subprocess.run(
            self._cmd(
                str(self.bin / "initdb"),
                "-D",
                str(self.data),
                "-U",
                self.user,
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
            ),
            check=True,
            capture_output=True,
            cwd=self.dir,
        )
        options = f"-k {self.dir} -c listen_addresses= -c fsync=off -c max_connections=60"
        done = subprocess.run(
            self._cmd(
                str(self.bin / "pg_ctl"),
                "-D",
                str(self.data),
                "-o",
                options,
                "-l",
                str(self.log),
                "-w",
                "start",
            ),
            capture_output=True,
            text=True,
            cwd=self.dir,
        )
        if done.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(f"PostgreSQL did not start:\n{done.stderr}\n{log[-2000:]}")
        return self

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(
            host=str(self.dir), user=self.user, dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def url(self, name: str) -> str:
        return f"postgresql+psycopg://{self.user}@/{name}?host={self.dir}"

    def stop(self) -> None:
        if self.data.exists():
            subprocess.run(
                self._cmd(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "stop"),
                capture_output=True,
                cwd=self.dir,
            )
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
