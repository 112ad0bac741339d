"""Which files of a submission folder the code scan reads (see :mod:`.review`).

Everything the kernel could run: notebooks, ``.py``/``.pyw``/``.pth`` files, and ``.txt``/
``.json`` files (code could read and run them), found recursively without following any
symlink, bounded in count and size; compiled files are reported (importable, not readable);
files or folders named like a module the course imports are reported (they would be imported
in place of the installed one).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

__all__ = ["read_notebook", "files", "shadowing", "imported_modules"]


def imported_modules(sources) -> set[str]:
    """Top-level modules that ``import``/``from`` lines of ``sources`` name."""
    found: set[str] = set()
    for text in sources:
        found.update(re.findall(r"^\s*(?:import|from)\s+(\w+)", text, re.MULTILINE))
    return found


READ_SUFFIXES = {".py", ".ipynb", ".pth", ".txt", ".json", ".pyw"}
COMPILED_SUFFIXES = {".pyc", ".pyo", ".so", ".pyd"}
# Jupyter's autosaves and Python's caches: never run as such (a sourceless .pyc in __pycache__
# is not importable), and loading them by hand needs code the scan flags anyway.
SKIPPED_DIRS = {".ipynb_checkpoints", "__pycache__"}
MAX_FILE_BYTES = 2_000_000  # a .py or .pth file larger than this is reported, not read
MAX_NOTEBOOK_BYTES = 100_000_000  # notebooks carry outputs (plots); only their code is read
MAX_TOTAL_BYTES = 200_000_000
MAX_FILES = 400
DATA_SUFFIXES = {".txt", ".json"}  # run only through code that reads them (which is flagged)


def read_notebook(path: Path) -> dict | None:
    try:
        nb = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except ValueError:
        return None
    return nb if isinstance(nb, dict) and isinstance(nb.get("cells"), list) else None


# Modules whose name a file or folder beside the notebook must not take: the working folder
# comes first on the kernel's sys.path, so ./torch.py or ./transformer_lab/ would be imported
# in place of the installed one (by the instructor's cells and by the checks).
ALWAYS_SHADOWED = {
    *("transformer_lab", "torch", "numpy", "sitecustomize", "usercustomize", "IPython"),
    *("ipykernel", "nbgrader", "traitlets", "jupyter_client", "matplotlib", "ipywidgets"),
}


def shadowing(root: Path, imported: set[str]) -> list[str]:
    """Files or folders beside the notebook named like a module in ``imported`` (or always
    shadowed: the package, torch, IPython, ``sitecustomize``, ...)."""
    imported = set(imported) | ALWAYS_SHADOWED
    out = []
    for item in sorted(root.iterdir()) if root.is_dir() else ():
        name = (
            item.name[: -len(item.suffix)] if item.suffix in (".py", ".pyc", ".so") else item.name
        )
        is_module = item.suffix in (".py", ".pyc", ".so") or (item.is_dir() and not item.suffix)
        if is_module and name in imported and not item.is_symlink():
            out.append(
                f"{item.name}: named like the module `{name}` the course imports; the kernel "
                f"would import it instead of the installed one"
            )
    return out


def files(root: Path, notes: list[str]) -> list[Path]:
    """Files to read, walking ``root`` without following symlinks, bounded in count and size."""
    out: list[Path] = []
    total = 0
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(
            d for d in dirs if d not in SKIPPED_DIRS and not os.path.islink(os.path.join(folder, d))
        )
        for name in sorted(files):
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink() or not path.is_file():
                continue  # never read through a link (the sealed copy reports them)
            if path.suffix not in READ_SUFFIXES | COMPILED_SUFFIXES:
                continue
            size = path.stat().st_size
            limit = MAX_NOTEBOOK_BYTES if path.suffix == ".ipynb" else MAX_FILE_BYTES
            if size > limit and path.suffix in DATA_SUFFIXES:
                continue  # a large data file: only code that reads it can run it
            if size > limit or total + size > MAX_TOTAL_BYTES or len(out) >= MAX_FILES:
                notes.append(
                    f"{rel}: not scanned ({size} bytes; limits {limit} per file, "
                    f"{MAX_TOTAL_BYTES} and {MAX_FILES} files in all): review by hand"
                )
                continue
            total += size
            out.append(path)
    return out
