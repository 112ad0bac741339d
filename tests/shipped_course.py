"""The real course as the repository ships it, copied into a test's own course folder.

``notebooks/`` is nbgrader's release of ``solutions/`` (``tests/test_release.py`` releases the
solutions again and compares the trees), so copying it is releasing it: a test that grades the
real notebooks starts from the files students are given, without a grading process that runs
nbgrader's ``generate_assignment`` again (about 3 s of CPU per course). ``tlab grade`` still
generates the assignment from ``solutions/`` itself, and warns if ``notebooks/`` differs. The
tests of ``tlab release`` itself release.
"""

from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def copy_course(root: Path, *assignments: str) -> Path:
    """``root`` holding the course's config and the solution and student release of each
    assignment, as committed; returns ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
    ignore = shutil.ignore_patterns(".ipynb_checkpoints")
    for assignment in assignments:
        for folder in ("solutions", "notebooks"):
            dest = root / folder / assignment
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(REPO / folder / assignment, dest, ignore=ignore)
    return root
