"""The real programs some tests need, how to tell whether this machine has them, and how to get them.

Three tests families drive real components rather than Python packages:

| component  | marker           | fixture      | used by                                           |
|------------|------------------|--------------|---------------------------------------------------|
| bubblewrap | ``needs_bwrap``    | ``bwrap``      | everything that grades (each kernel is sandboxed) |
| PostgreSQL | ``needs_postgres`` | ``postgresql`` | the PostgreSQL gradebook tests                    |
| Chromium   | ``needs_chromium`` | ``chromium``   | the real-browser test                             |

A test says it needs one with the marker, or by requesting the fixture (directly or through
another fixture); ``tests/conftest.py`` then skips it, naming what is missing and how to
install it, where the component is absent. The tests never install anything themselves:
``make deps`` (as root) or ``.ci/run`` do.

Where each is looked for (so that a run can pretend one is missing):
- ``bwrap`` and ``chromium`` on ``PATH``;
- PostgreSQL's ``initdb``, ``pg_ctl`` and ``postgres`` in ``$TLAB_PG_BIN`` if set, else the
  newest ``/usr/lib/postgresql/*/bin`` (see ``tests/pg_server.py``).

``python tests/components.py`` prints the same report as the start of ``make test``.
"""

from __future__ import annotations

import functools
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
INSTALL_ALL = "sudo make deps"


@dataclass(frozen=True)
class Component:
    """One real program (or set of programs) that some tests need."""

    name: str  # short name, as in the marker needs_<name>
    what: str  # what it is, for messages
    fixture: str  # the fixture that returns it (requesting it implies the marker)
    install: str  # the Debian/Ubuntu command that installs it
    find: Callable[[], str | None]  # why it cannot be used here, or None when it can

    @property
    def marker(self) -> str:
        return f"needs_{self.name}"

    def missing(self) -> str | None:
        """Why the tests that need it are skipped here (None when it is available)."""
        why = _cached(self.name)
        if why is None:
            return None
        return f"needs {self.what}: {why}; install it with `{self.install}` (or `{INSTALL_ALL}`)"


def _find_bwrap() -> str | None:
    if shutil.which("bwrap") is None:
        return "`bwrap` is not on PATH"
    # Installed is not enough: containers often forbid the namespaces bubblewrap needs. Start
    # Python in the sandbox exactly as the grader does.
    from transformer_lab.grading.run.bwrap import SandboxError
    from transformer_lab.grading.run.sandbox import probe

    try:
        probe(REPO)
    except SandboxError as exc:
        return f"`bwrap` is installed but cannot start a sandbox here ({exc})"
    return None


def _find_postgres() -> str | None:
    from pg_server import missing_reason

    return missing_reason()


def _find_chromium() -> str | None:
    if shutil.which("chromium") is None:
        return "`chromium` is not on PATH"
    try:
        import playwright  # noqa: F401
    except ImportError:
        return 'the Python package playwright is not installed (pip install -e ".[dev]")'
    return None


COMPONENTS = {
    c.name: c
    for c in (
        Component(
            "bwrap",
            "bubblewrap, the grading sandbox",
            "bwrap",
            "sudo apt-get install bubblewrap",
            _find_bwrap,
        ),
        Component(
            "postgres",
            "a PostgreSQL server for the gradebook tests",
            "postgresql",
            "sudo apt-get install postgresql",
            _find_postgres,
        ),
        Component(
            "chromium",
            "Chromium for the real-browser test",
            "chromium",
            "sudo apt-get install chromium",
            _find_chromium,
        ),
    )
}


@functools.cache
def _cached(name: str) -> str | None:
    return COMPONENTS[name].find()


def report_lines() -> list[str]:
    """One line per component: found, or missing with why and how to install it."""
    lines = []
    for c in COMPONENTS.values():
        why = c.missing()
        lines.append(f"  {c.name:<9}{'found' if why is None else 'MISSING: ' + why}")
    return lines


def main() -> int:
    print("real components used by some tests (tests/components.py):")
    print("\n".join(report_lines()))
    if any(c.missing() for c in COMPONENTS.values()):
        print("the tests that need a missing component are skipped, saying so.")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    sys.exit(main())
