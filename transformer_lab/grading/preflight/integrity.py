"""Pre-flight of submissions, before nbgrader sees them.

For every student, :func:`preflight` reads the submitted notebooks and decides:

- **not a notebook** (invalid JSON, not nbformat 4): the student is reported as
  "could not be graded" with the reason, and nbgrader never runs on the file;
- **renamed notebook** (one unknown ``.ipynb`` instead of the expected name): graded under the
  expected name, with a note;
- **lost metadata** (the student copied the cells into a new notebook): cells are matched to
  the released notebook by content (identical source, or for answer cells the same first line
  or a close match) and get their nbgrader metadata back; an answer that cannot be matched is
  reported as needing manual grading instead of an ordinary 0;
- **deleted cells**: every answer, test or read-only cell of the released notebook that is
  missing from the submission is put back, after the nearest surviving cell that preceded it
  in the release. nbgrader then restores the source of test and read-only cells from the
  gradebook and grades them as usual. (nbgrader 0.9.6's own ``add_missing_cells`` raises
  KeyError when the deleted test cell follows a non-graded cell, so we never rely on it.)

The repairs themselves are :mod:`.notebook_repair` (``restore_missing_cells`` and
``match_by_content`` are re-exported here). The fixed copies are written to a staging folder;
the students' original files are untouched. Nothing is copied by following a symbolic link
(:func:`copy_without_links`): symlinks, FIFOs, devices and sockets in a submission are named in
the notes and left out, a symlinked folder is not descended, and a notebook that is itself a
symlink is not graded.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

__all__ = [
    "Preflight",
    "preflight",
    "restore_missing_cells",
    "match_by_content",
    "fingerprint",
]

from transformer_lab.grading.preflight.nofollow import (
    copy_without_links,
    kind_of,
    open_regular,
    read_regular_file,
)
from transformer_lab.grading.preflight.repair import (
    grade_id,
    match_by_content,
    restore_missing_cells,
)


@dataclass
class Preflight:
    """What pre-flight found in one student's submission."""

    student: str
    ok: bool = True
    reason: str = ""  # why the submission cannot be graded (when not ok)
    notes: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)  # grade ids put back
    needs_review: str = ""  # why a person should check the grade (empty: nothing to check)


def _read_notebook(path: Path):
    """Parse and validate; raises ValueError with a short reason."""
    try:
        text = read_regular_file(path).decode("utf-8")
    except OSError as exc:
        raise ValueError(f"not a notebook: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError("not a notebook: the file is not UTF-8 text") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not a notebook: invalid JSON ({exc.msg} at line {exc.lineno})") from None
    if (
        not isinstance(raw, dict)
        or raw.get("nbformat") != 4
        or not isinstance(raw.get("cells"), list)
    ):
        raise ValueError("not a notebook: the JSON is not an nbformat-4 notebook")
    try:
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
    except Exception as exc:  # nbformat raises several kinds of validation errors
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"not a valid notebook: {first[:200]}") from None
    return nb


def preflight(
    student: str, submission: Path, released: dict[str, object], staging: Path
) -> Preflight:
    """Check one submission folder and write a gradable copy into ``staging``.

    Args:
        student: the student id.
        submission: ``submitted/STUDENT/ASSIGNMENT``.
        released: notebook name (without .ipynb) -> the released student notebook.
        staging: the folder to receive the gradable copy (created).
    """
    result = Preflight(student)
    located = _locate(result, submission, set(released))
    if located is None:
        return result
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    # timestamp.txt, data files, helper modules, ...: never through a symlink
    result.notes += copy_without_links(submission, staging, skip_suffixes=(".ipynb",))
    stamp = staging / "timestamp.txt"
    if stamp.is_file() and not _timestamp_ok(stamp):
        # nbgrader aborts the whole submission on an unreadable timestamp; grade it without one.
        stamp.unlink()
        result.notes.append("timestamp.txt unreadable: graded without a submission time")
    for name in sorted(released):
        path = located.get(name)
        if path is None:
            continue
        try:
            nb = _read_notebook(path)
        except ValueError as exc:
            result.ok, result.reason = False, f"{path.name}: {exc}"
            shutil.rmtree(staging)
            return result
        nbformat.write(_repaired(result, name, nb, released[name]), staging / f"{name}.ipynb")
    return result


def _locate(result: Preflight, submission: Path, expected: set[str]) -> dict[str, Path] | None:
    """Released notebook name -> the submitted file to grade as it (one rename is followed);
    None (with ``result``'s reason) when the submission cannot be graded at all."""
    if submission.is_symlink() or submission.parent.is_symlink():
        result.ok, result.reason = False, "the submission folder is a symbolic link (not followed)"
        return None
    if not submission.is_dir():
        result.ok, result.reason = False, "no submission folder"
        return None
    found = {p.stem: p for p in submission.glob("*.ipynb")}
    for path in sorted(found.values()):
        mode = path.lstat().st_mode
        if not stat.S_ISREG(mode):
            result.ok = False
            result.reason = (
                f"{path.name} is {kind_of(mode)}, not a notebook file: symbolic links and special "
                "files are never followed or graded"
            )
            return None
    if not found:
        result.ok, result.reason = False, "no notebook in the submission"
        return None
    missing = sorted(expected - set(found))
    unknown = sorted(set(found) - expected)
    located = {name: found[name] for name in expected if name in found}
    if len(missing) == 1 and len(unknown) == 1:
        located[missing[0]] = found[unknown[0]]
        result.notes.append(
            f"graded {unknown[0]}.ipynb as {missing[0]}.ipynb (renamed by the student)"
        )
        missing = []
    for name in missing:
        result.notes.append(f"{name}.ipynb missing: scored 0")
    return located


def _repaired(result: Preflight, name: str, nb, released):
    """The notebook with lost metadata matched by content and deleted graded cells restored."""
    if not any(grade_id(c) for c in nb.cells) and any(grade_id(c) for c in released.cells):
        nb, matched, unmatched = match_by_content(nb, released)
        result.notes.append(
            f"{name}.ipynb had lost its nbgrader metadata: {len(matched)} cell(s) "
            "matched by content"
        )
        if unmatched:
            result.needs_review = (
                f"{name}.ipynb lost its nbgrader metadata and the answer(s) "
                f"{', '.join(unmatched)} could not be matched: grade them by hand"
            )
    nb, restored = restore_missing_cells(nb, released)
    if restored:
        result.restored += restored
        result.notes.append(f"{name}.ipynb: restored deleted cell(s) {', '.join(restored)}")
    return nb


def _timestamp_ok(path: Path) -> bool:
    try:
        from nbgrader.utils import parse_utc

        parse_utc(path.read_text(encoding="utf-8").strip())
        return True
    except Exception:
        return False


def fingerprint(submission: Path) -> str:
    """A hash of the submission's files, to regrade only what changed."""
    digest = hashlib.sha256()
    if submission.is_dir() and not submission.is_symlink():
        for folder, dirs, files in os.walk(submission):  # os.walk never enters a symlinked folder
            dirs.sort()
            for name in sorted(
                files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]
            ):
                path = Path(folder) / name
                digest.update(str(path.relative_to(submission)).encode())
                mode = path.lstat().st_mode
                if stat.S_ISREG(mode):
                    try:
                        with os.fdopen(open_regular(path), "rb") as fh:
                            for block in iter(lambda: fh.read(1 << 20), b""):
                                digest.update(block)
                    except OSError:
                        digest.update(b"unreadable")
                elif stat.S_ISLNK(mode):
                    digest.update(b"symlink:" + os.fsencode(os.readlink(path)))
                else:
                    digest.update(kind_of(mode).encode())
    return digest.hexdigest()[:16]
