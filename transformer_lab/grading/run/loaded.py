"""What the gradebook last loaded of an assignment: ``tlab grade`` skips loading it again.

Loading an assignment (nbgrader's ``generate_assignment`` into a temporary folder) takes a
grading process and seconds. When ``solutions/``, ``notebooks/``, ``nbgrader_config.py`` and the
gradebook's address are what they were at the last successful load, and the gradebook holds
grades of the assignment, the load is skipped: a run with nothing new starts no grading process
at all, and a run with new submissions grades them against the release generated then, kept in
``.tlab/release/ASSIGNMENT`` (the stamp file beside it names what it was generated from).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from transformer_lab.grading.preflight.integrity import fingerprint

__all__ = ["LoadStamp"]


class LoadStamp:
    """The stamp of one assignment's sources (``stamp``) and what the last load left behind."""

    def __init__(self, root: Path, dirs: dict, assignment: str, url_redacted: str) -> None:
        self.folder = Path(root) / ".tlab" / "release"
        self.assignment = assignment
        self.file = self.folder / f"{assignment}.loaded.json"
        digest = hashlib.sha256()
        for part in (
            fingerprint(Path(root) / dirs["source"] / assignment),
            fingerprint(Path(root) / dirs["release"] / assignment),
            (Path(root) / "nbgrader_config.py").read_bytes().hex(),
            url_redacted,
        ):
            digest.update(part.encode() + b"\0")
        self.stamp = digest.hexdigest()[:16]

    @property
    def release(self) -> Path:
        """The folder holding ``ASSIGNMENT/`` as generated from these sources."""
        return self.folder / self.stamp

    def matches(self) -> bool:
        """Was the last successful load made from these sources?"""
        try:
            saved = json.loads(self.file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return saved.get("stamp") == self.stamp and (self.release / self.assignment).is_dir()

    def save(self, generated: Path) -> None:
        """Keep the release generated now (``generated`` is its ``ASSIGNMENT/`` folder)."""
        # Processes loading the same sources at once write the same files: no harm.
        shutil.copytree(generated, self.release / self.assignment, dirs_exist_ok=True)
        tmp = self.file.with_name(f"{self.file.name}.{os.getpid()}")
        tmp.write_text(json.dumps({"stamp": self.stamp}) + "\n", encoding="utf-8")
        os.replace(tmp, self.file)
