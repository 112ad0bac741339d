"""What the grader reads from the package's own source, computed once per version of the package.

Every grading process needs three facts taken from the package's source files: the fingerprints
of every reference (:func:`.similarity.package_units`), what each exercise forbids
(:func:`.forbidden.forbidden_table`) and the package's re-exports (``._review_names``). Reading
and fingerprinting the source takes about 2 s, in every grading process of every run (two per
run with ``--jobs 2``), although the facts change only when the package does.

:func:`cached` keeps each fact on disk as JSON (never pickle: reading the cache must not be able
to run code), in a file named by a SHA-256 digest of every source file of the package, the grader
included: an edited package or grader never reads facts of another version. The folder is
``$TLAB_CACHE_DIR``, else ``$XDG_CACHE_HOME/transformer-lab``, else ``~/.cache/transformer-lab``
(created private to its user). A missing, unreadable, unwritable or malformed cache is the same
as no cache: the fact is computed; a folder or file that another user owns or may write to is
never read, since a planted file could hide a copied reference from the code scan. The
students' kernels cannot reach the folder (the sandbox binds only the course's read-only files
and its own temporary folders).

Standard library only: the grading driver loads this file by path, without torch.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["cache_dir", "package_digest", "cached"]

T = TypeVar("T")
PACKAGE = Path(__file__).resolve().parents[2]  # transformer_lab/
KEEP = 4  # versions of each fact kept on disk


def cache_dir() -> Path:
    """The folder of the cached facts (not created here)."""
    explicit = os.environ.get("TLAB_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "transformer-lab"


@functools.lru_cache(maxsize=4)
def package_digest(root: str = str(PACKAGE)) -> str:
    """SHA-256 over the path and bytes of every ``.py`` file of the package (grader included)."""
    digest = hashlib.sha256()
    base = Path(root)
    for path in sorted(base.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        digest.update(path.relative_to(base).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def cached(
    kind: str,
    compute: Callable[[], T],
    encode: Callable[[T], Any],
    decode: Callable[[Any], T],
    root: str = str(PACKAGE),
) -> T:
    """``compute()``, or its value stored by an earlier process for the same package source.

    Args:
        kind: the fact's name, part of the file name ("units", "forbidden", ...).
        encode: the value as plain JSON data; ``decode`` turns that data back into the value
            and raises on anything malformed (the fact is then computed again).
    """
    try:
        path = cache_dir() / f"{kind}-{package_digest(root)[:32]}.json"
    except OSError:  # the package's files could not be read: nothing to key a cache by
        return compute()
    if path.parent.exists() and not _private(path.parent):
        return compute()  # a folder others may write to is never read (nor written)
    try:
        if not _private(path):
            raise PermissionError(path)
        return decode(json.loads(path.read_text(encoding="utf-8")))
    except Exception:  # noqa: BLE001 - missing, unreadable or malformed: compute it
        pass
    value = compute()
    _store(path, encode(value))
    return value


def _private(path: Path) -> bool:
    """True if ``path`` belongs to this user and nobody else may write to it."""
    try:
        st = path.stat()
    except OSError:
        return False
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022


def _store(path: Path, data: Any) -> None:
    """Write ``data`` to ``path`` atomically (another process reads the old file or the new
    one, never half of one); an unwritable cache only costs the time."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}-", suffix=".tmp", dir=path.parent)
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError):
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return
    # Keep the newest few versions of this fact (two checkouts in use do not evict each other).
    kind = path.stem.rsplit("-", 1)[0]
    with contextlib.suppress(OSError):
        older = sorted(path.parent.glob(f"{kind}-*.json"), key=lambda p: p.stat().st_mtime)
        for stale in older[:-KEEP]:
            stale.unlink()
