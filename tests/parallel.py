"""How ``make test`` shares the tests between pytest-xdist's workers (one per core).

- **Files that set something up once for all their tests** (a fixture with ``scope="module"``,
  ``"class"`` or ``"package"``: a released course graded once, a trained model, a PostgreSQL
  server) go to one worker as a whole, so the set-up happens once. Every other test is dealt out
  on its own, so a file of many independent slow tests (the notebooks, the benchmarks' smoke
  runs) spreads over all the workers.
- **Slow first.** Work is handed out in collection order, which ``tests/conftest.py`` sorts:
  files with slow tests before the others, the whole-file ones first among them, so the long
  pieces start early and the short ones fill the gaps at the end.

pytest-xdist's own ``--dist loadgroup`` would do the grouping from marks, but with pytest 9.2 it
silently deals grouped tests out one by one (it renames node ids through an attribute pytest no
longer reads), so the grouping is decided here from the files themselves, which the controller
(which collects nothing) can read too. ``--dist loadfile`` and the other modes are left alone.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

# A fixture shared by a file's tests: @pytest.fixture(..., scope="module", ...)
SHARED_FIXTURE = re.compile(r"@pytest\.fixture\([^)]*scope=[\"'](module|class|package)[\"']")


@functools.cache
def shares_setup(path: Path) -> bool:
    """True if the test file defines a fixture that its tests share (module scope or wider)."""
    try:
        return SHARED_FIXTURE.search(path.read_text(encoding="utf-8")) is not None
    except OSError:
        return False


def order_key(path: Path, slow_files: set[Path]) -> tuple[bool, bool]:
    """Sort key for a test in ``path``: slow files first, whole-file units first among them."""
    return (path not in slow_files, not shares_setup(path))


def make_scheduler(config, log):
    """A scheduler that sends whole files with shared set-up to one worker, other tests singly."""
    from xdist.scheduler import LoadScopeScheduling

    root = Path(config.rootpath)

    class FileWhenSharedScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = nodeid.split("::", 1)[0]
            return file if shares_setup(root / file) else nodeid

    config.option.loadscopereorder = False  # keep the slow-first order of the collection
    return FileWhenSharedScheduling(config, log)
