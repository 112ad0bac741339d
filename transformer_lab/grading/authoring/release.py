"""Release: regenerate the student notebooks from the solutions with nbgrader.

``tlab release`` copies the source directory into a throw-away course, runs
``nbgrader generate_assignment`` there for every assignment (one process), and replaces the
release directory with the result. Nothing else is written into the repository (no gradebook).
``tlab release --check`` does the same into a temporary folder and compares: any stale,
missing, extra or hand-edited student file is reported and the command exits non-zero.
The comparison is exact: notebooks are compared as parsed JSON, other files byte for byte.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from transformer_lab.grading.authoring.author import author_paths
from transformer_lab.grading.course import (
    CONFIG_NAME,
    CourseError,
    failure_detail,
    list_assignments,
    read_course_dirs,
    run_driver,
)

__all__ = ["ReleaseResult", "build_release", "release", "compare_trees"]

IGNORED_NAMES = {".ipynb_checkpoints", "__pycache__", ".DS_Store"}


@dataclass
class ReleaseResult:
    """Outcome of a release or of a release check."""

    assignments: list[str] = field(default_factory=list)
    differences: list[str] = field(
        default_factory=list
    )  # empty = notebooks/ is exactly the release
    removed: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _files(folder: Path) -> dict[str, Path]:
    if not folder.is_dir():
        return {}
    return {
        str(p.relative_to(folder)): p
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not IGNORED_NAMES.intersection(p.relative_to(folder).parts)
    }


def _first_notebook_difference(a: dict, b: dict) -> str:
    cells_a, cells_b = a.get("cells", []), b.get("cells", [])
    if len(cells_a) != len(cells_b):
        return f"{len(cells_b)} cells instead of {len(cells_a)}"
    for i, (ca, cb) in enumerate(zip(cells_a, cells_b)):
        if ca != cb:
            keys = sorted(k for k in set(ca) | set(cb) if ca.get(k) != cb.get(k))
            return f"cell {i} differs in {', '.join(keys)}"
    keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    return f"notebook-level {', '.join(keys)} differs"


def compare_trees(expected: Path, actual: Path, label: str = "") -> list[str]:
    """Exact comparison of two release folders; returns human-readable differences."""
    want, have = _files(expected), _files(actual)
    out = []
    for rel in sorted(set(want) | set(have)):
        name = f"{label}{rel}"
        if rel not in have:
            out.append(f"{name}: missing (run `tlab release`)")
        elif rel not in want:
            out.append(f"{name}: not produced by the release (stale or hand-made file)")
        elif rel.endswith(".ipynb"):
            try:
                a = json.loads(want[rel].read_text(encoding="utf-8"))
                b = json.loads(have[rel].read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                out.append(f"{name}: not valid JSON ({exc})")
                continue
            if a != b:
                out.append(f"{name}: differs from the release ({_first_notebook_difference(a, b)})")
        elif want[rel].read_bytes() != have[rel].read_bytes():
            out.append(f"{name}: differs from the release")
    return out


def build_release(root: Path, out_dir: Path, assignments: list[str] | None = None) -> list[str]:
    """Run nbgrader generate_assignment for ``assignments`` into ``out_dir``; return their names."""
    root = Path(root).resolve()
    dirs = read_course_dirs(root)
    source = root / dirs["source"]
    available = list_assignments(source)
    names = available if assignments is None else list(assignments)
    unknown = sorted(set(names) - set(available))
    if unknown:
        raise CourseError(
            f"expected assignments that exist in {source} ({', '.join(available) or 'none'}), "
            f"but received {', '.join(unknown)}."
        )
    if not names:
        return []
    with tempfile.TemporaryDirectory(prefix="tlab-release-") as tmp:
        course = Path(tmp) / "course"
        (course / dirs["source"]).mkdir(parents=True)
        shutil.copy(root / CONFIG_NAME, course / CONFIG_NAME)
        for name in names:
            shutil.copytree(
                source / name,
                course / dirs["source"] / name,
                ignore=shutil.ignore_patterns(*IGNORED_NAMES),
            )
        out_dir.mkdir(parents=True, exist_ok=True)
        ops = [
            {"op": "generate_assignment", "assignment": name, "release_dir": str(out_dir.resolve())}
            for name in names
        ]
        events, code, stderr = run_driver({"root": str(course), "ops": ops, "guarded": False})
        failed = [e for e in events if not e.get("success")]
        if failed or len(events) != len(ops):
            detail = failure_detail(failed[0] if failed else None, stderr)
            raise CourseError(
                f"nbgrader generate_assignment failed for "
                f"{', '.join(e['assignment'] for e in failed) or 'the release'}:\n{detail[-3000:]}"
            )
    return names


def release(root: Path, check: bool = False, assignments: list[str] | None = None) -> ReleaseResult:
    """Regenerate the release directory from the source directory (or, with ``check``, compare).

    The solutions must pass ``tlab author --check`` first, so a release never ships a
    notebook with outputs or broken metadata.
    """
    root = Path(root).resolve()
    dirs = read_course_dirs(root)
    source, target = root / dirs["source"], root / dirs["release"]
    result = ReleaseResult()

    problems = []
    for r in author_paths([source], check=True) if source.is_dir() else []:
        problems += [f"{r.path}: {e}" for e in r.errors]
        if r.changes:
            problems.append(
                f"{r.path}: not normalised ({r.changes[0]}, ...); run `tlab author {source}`"
            )
    if problems:
        raise CourseError("the solutions are not ready to release:\n  " + "\n  ".join(problems))

    with tempfile.TemporaryDirectory(prefix="tlab-release-out-") as tmp:
        fresh = Path(tmp)
        result.assignments = build_release(root, fresh, assignments)
        names = result.assignments
        existing = sorted(p.name for p in target.iterdir() if p.is_dir()) if target.is_dir() else []
        stale = [] if assignments is not None else [n for n in existing if n not in names]
        if check:
            for name in names:
                result.differences += compare_trees(
                    fresh / name, target / name, f"{dirs['release']}/{name}/"
                )
            result.differences += [
                f"{dirs['release']}/{n}/: no such assignment in {dirs['source']}/ (stale)"
                for n in stale
            ]
            if assignments is None and target.is_dir():
                result.differences += [
                    f"{dirs['release']}/{p.name}: unexpected file (the release holds only assignment folders)"
                    for p in sorted(target.iterdir())
                    if p.is_file() and p.name not in IGNORED_NAMES
                ]
            return result
        target.mkdir(parents=True, exist_ok=True)
        for name in names:
            if (target / name).exists():
                shutil.rmtree(target / name)
            shutil.copytree(fresh / name, target / name)
        for name in stale:
            shutil.rmtree(target / name)
            result.removed.append(name)
    return result
