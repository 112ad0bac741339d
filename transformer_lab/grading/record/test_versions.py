"""Which version of each graded cell's tests a submission was graded under.

A graded cell's version is a hash of what decides its points: the test cell's source as the
instructor wrote it (hidden block included) and, for every ``checks.check_NAME`` it calls, the
source of the module that defines that check (found in ``transformer_lab/checks/exercises.json``,
read without importing it). ``tlab grade`` stores the versions each submission was graded under
(table ``tlab_test_versions``); the next run names the submissions graded under an older version
and grades them again (or keeps them with ``--keep-old-tests``, saying so in the report).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from transformer_lab.grading.record.tables import connect, now

__all__ = ["cell_versions", "stored_versions", "store_versions", "changed_cells"]

_CHECK_CALL = re.compile(r"\bchecks\.(check_\w+)")
_PACKAGE = Path(__file__).resolve().parents[2]  # transformer_lab/


def _check_modules() -> dict[str, Path]:
    """check_NAME -> the file of the module defining it."""
    path = _PACKAGE / "checks" / "exercises.json"
    try:
        exercises = json.loads(path.read_text(encoding="utf-8")).get("exercises", [])
    except (OSError, ValueError):
        return {}
    found = {}
    for ex in exercises:
        module = str(ex.get("module", ""))
        if not module.startswith("transformer_lab.") or not ex.get("check"):
            continue
        base = _PACKAGE.parent.joinpath(*module.split("."))
        file = (
            base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        )
        found[ex["check"]] = file
    return found


def cell_versions(source_folder: Path) -> dict[str, str]:
    """``notebook/grade_id`` -> the version of that graded cell's tests (see above)."""
    modules = _check_modules()
    versions: dict[str, str] = {}
    for path in sorted(Path(source_folder).glob("*.ipynb")):
        try:
            cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
        except (OSError, ValueError):
            continue
        for cell in cells:
            meta = (cell.get("metadata") or {}).get("nbgrader") or {}
            if not meta.get("grade") or meta.get("solution"):
                continue
            src = cell.get("source", "")
            src = "".join(src) if isinstance(src, list) else str(src)
            digest = hashlib.sha256(src.encode("utf-8"))
            digest.update(f"\npoints={meta.get('points')}".encode())
            for name in sorted(set(_CHECK_CALL.findall(src))):
                file = modules.get(name)
                body = file.read_bytes() if file is not None and file.is_file() else b"?"
                digest.update(f"\n{name}:".encode() + hashlib.sha256(body).digest())
            versions[f"{path.stem}/{meta.get('grade_id')}"] = digest.hexdigest()[:32]
    return versions


def stored_versions(url: str, course: str, assignment: str) -> dict[str, dict[str, str]]:
    """student -> {cell: version} of the latest grading recorded for each student."""
    result: dict[str, dict[str, str]] = {}
    with connect(url) as (conn, t):
        table = t["tlab_test_versions"]
        rows = conn.execute(
            table.select()
            .where(table.c.course_id == course, table.c.assignment == assignment)
            .order_by(table.c.id)
        )
        for r in rows:
            result.setdefault(r.student_id, {})[r.cell] = r.fingerprint
    return result


def store_versions(url: str, course: str, assignment: str, students: list[str],
                   versions: dict[str, str]) -> None:  # fmt: skip
    """Record that ``students`` were graded now under ``versions`` (replacing earlier rows)."""
    if not students:
        return
    with connect(url) as (conn, t):
        table = t["tlab_test_versions"]
        conn.execute(
            table.delete().where(
                table.c.course_id == course,
                table.c.assignment == assignment,
                table.c.student_id.in_(students),
            )
        )
        stamp = now()
        conn.execute(
            table.insert(),
            [
                {
                    "course_id": course,
                    "assignment": assignment,
                    "student_id": sid,
                    "cell": cell,
                    "fingerprint": fp,
                    "recorded_at": stamp,
                }  # fmt: skip
                for sid in students
                for cell, fp in sorted(versions.items())
            ],
        )


def changed_cells(graded_under: dict[str, str], current: dict[str, str]) -> list[str]:
    """The cells whose tests differ from those a submission was graded under (sorted)."""
    if not graded_under:
        return []  # graded before versions were recorded: nothing to compare with
    return sorted(c for c in current if graded_under.get(c) != current[c])
