"""The code scan's view of a notebook: which cells the student wrote, and what each answers.

A cell whose source is exactly a released cell's is the instructor's and is not read; test and
read-only cells are restored by nbgrader and skipped. An answer cell is tied to the exercises
whose ``check_X(name)`` the release's test cells call on the names it defines, so the scan
(:mod:`.review`) knows which exercise's forbidden references apply to it.
"""

from __future__ import annotations

import re

__all__ = [
    "Source",
    "cells",
    "source_of",
    "nbgrader_meta",
    "student_cells",
    "answer_exercises",
    "notebook_sources",
    "instructor_code",
]


def _released_sources(released) -> set[str]:
    return {source_of(c) for c in cells(released) if c.get("cell_type") == "code"}


def cells(nb) -> list:
    """The cells of a notebook (nbformat or plain dict), only those that are dicts."""
    cells = nb.get("cells", []) if isinstance(nb, dict) else getattr(nb, "cells", [])
    return [c for c in cells if isinstance(c, dict)] if isinstance(cells, list) else []


def source_of(cell) -> str:
    """A cell's source as one string."""
    source = cell.get("source", "")
    return "".join(map(str, source)) if isinstance(source, list) else str(source)


def nbgrader_meta(cell) -> dict:
    """A cell's nbgrader metadata ({} when it has none)."""
    metadata = cell.get("metadata")
    meta = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    return meta if isinstance(meta, dict) else {}


def student_cells(nb, released) -> list:
    """Code cells written or changed by the student (not exactly a released cell's source)."""
    course = _released_sources(released) if released is not None else set()
    restored = {  # test and read-only cells: nbgrader puts the instructor's source back
        nbgrader_meta(c).get("grade_id")
        for c in (cells(released) if released is not None else ())
        if nbgrader_meta(c).get("locked")
        or (nbgrader_meta(c).get("grade") and not nbgrader_meta(c).get("solution"))
    } - {None}
    out = []
    for cell in cells(nb):
        meta = nbgrader_meta(cell)
        locked = meta.get("locked") or (meta.get("grade") and not meta.get("solution"))
        if locked and meta.get("grade_id") in restored:
            continue  # (a cell the student marked "locked" himself is read like any other)
        if cell.get("cell_type") == "code" and source_of(cell) not in course:
            out.append(cell)
    return out


def answer_exercises(released) -> dict[str, list[str]]:
    """{answer cell's grade_id: exercises its test cells check}, read from the released cells."""
    defined: dict[str, str] = {}  # name defined by an answer cell -> its grade_id
    for cell in cells(released):
        meta = nbgrader_meta(cell)
        if meta.get("solution") and cell.get("cell_type") == "code":
            for name in re.findall(r"^(?:def|class)\s+(\w+)", source_of(cell), re.MULTILINE):
                defined[name] = meta.get("grade_id", "")
    out: dict[str, list[str]] = {}
    for cell in cells(released):
        if nbgrader_meta(cell).get("grade"):
            for exercise, arg in re.findall(r"check_(\w+)\(\s*(\w+)", source_of(cell)):
                if arg in defined and exercise not in out.setdefault(defined[arg], []):
                    out[defined[arg]].append(exercise)
    return out


class Source:
    """One piece of code the kernel may run: a cell or a file, and where to point at it."""

    def __init__(self, where: str, text: str, answer_to: list[str] | None = None):
        self.where, self.text, self.answer_to = where, text, answer_to or []


def notebook_sources(name: str, nb, released) -> list[Source]:
    """The student-written cells of ``nb`` as sources, each with the exercises it answers."""
    answers = answer_exercises(released) if released is not None else {}
    keep = {id(c) for c in student_cells(nb, released)}
    out = []
    for i, cell in enumerate(cells(nb)):
        if id(cell) in keep:
            gid = nbgrader_meta(cell).get("grade_id")
            label = f"{name} cell {i}" + (f" ({gid})" if gid else " (added by the student)")
            out.append(Source(label, source_of(cell), answers.get(gid, []) if gid else []))
    return out


def instructor_code(name: str, released) -> list[tuple[str, str]]:
    """The released notebook's own code cells (not answers): an answer may call their helpers."""
    return [
        (f"{name}.ipynb, the instructor's cell {i}", source_of(c))
        for i, c in enumerate(cells(released))
        if c.get("cell_type") == "code" and not nbgrader_meta(c).get("solution")
    ]
