"""``python -m transformer_lab.checks``: rewrite exercises.json and the docs' exercise tables
from the registry (see :mod:`transformer_lab.checks.registry`).

Running this module has imported the package first, so every exercise is registered.
"""

from __future__ import annotations

import os
from pathlib import Path

from transformer_lab.checks.registry import DOCS, GENERATED, JSON_PATH, dumps, splice


def write_all() -> list[Path]:
    """Rewrite exercises.json and the docs' tables from the registry; return what changed."""
    changed = []
    if not JSON_PATH.exists() or JSON_PATH.read_text() != dumps():
        # atomically: a grading process may be reading it right now
        tmp = JSON_PATH.with_name(f"{JSON_PATH.name}.{os.getpid()}.tmp")
        tmp.write_text(dumps())
        os.replace(tmp, JSON_PATH)
        changed.append(JSON_PATH)
    for name, table in GENERATED.items():
        path = DOCS / name
        if path.exists():
            new = splice(path.read_text(), table(), name)
            if new != path.read_text():
                path.write_text(new)
                changed.append(path)
    return changed


if __name__ == "__main__":
    for path in write_all():
        print(f"rewrote {path}")
