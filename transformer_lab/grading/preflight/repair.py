"""Repairing a submitted notebook against its release: lost metadata and deleted cells.

:func:`match_by_content` gives nbgrader metadata back to cells copied into a new notebook, by
content; :func:`restore_missing_cells` puts back every answer, test or read-only cell of the
release that the submission lacks, after the nearest surviving cell that preceded it. Both
return a repaired copy; :func:`~.integrity.preflight` decides when to call them.
"""

from __future__ import annotations

import copy

__all__ = ["restore_missing_cells", "match_by_content", "grade_id"]


def grade_id(cell) -> str | None:
    """The grade id of an answer, test or read-only cell (None for any other cell)."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    if meta.get("grade") or meta.get("solution") or meta.get("locked"):
        return meta.get("grade_id")
    return None


def restore_missing_cells(submitted, released) -> tuple[object, list[str]]:
    """Put back every nbgrader cell of ``released`` that ``submitted`` lacks.

    Returns the repaired notebook (a copy) and the grade ids that were restored.
    """
    nb = copy.deepcopy(submitted)
    present = {gid for gid in map(grade_id, nb.cells) if gid}
    restored: list[str] = []
    for r_index, r_cell in enumerate(released.cells):
        gid = grade_id(r_cell)
        if not gid or gid in present:
            continue
        # Anchor: the closest earlier release cell that the submission still has.
        position = 0
        for prev in reversed(released.cells[:r_index]):
            prev_gid, prev_id = grade_id(prev), prev.get("id")
            found = next(
                (
                    i
                    for i, c in enumerate(nb.cells)
                    if (prev_gid and grade_id(c) == prev_gid)
                    or (not prev_gid and prev_id and c.get("id") == prev_id)
                    or (not prev_gid and prev.source.strip() and c.source == prev.source)
                ),
                None,
            )
            if found is not None:
                position = found + 1
                break
        cell = copy.deepcopy(r_cell)
        if any(c.get("id") == cell.get("id") for c in nb.cells):
            cell["id"] = f"restored-{gid}"[:64]
        nb.cells.insert(position, cell)
        present.add(gid)
        restored.append(gid)
    return nb, restored


def _first_line(source: str) -> str:
    return next((ln.strip() for ln in source.splitlines() if ln.strip()), "")


def match_by_content(submitted, released) -> tuple[object, list[str], list[str]]:
    """Give nbgrader metadata back to a notebook that lost it, matching cells by content.

    A cell whose source is exactly a released cell's gets that cell's metadata; each released
    answer cell is then matched with the student's cell of the same type that starts with the
    same line (``def softmax(x, dim=-1):``) or, failing that, resembles it most (difflib ratio
    at least 0.5). Returns the repaired copy, the grade ids matched, and the answer grade ids
    that could not be matched.
    """
    import difflib

    nb = copy.deepcopy(submitted)
    used: set[int] = set()
    matched: list[str] = []
    by_source = {}
    for cell in released.cells:
        if grade_id(cell) and cell.source.strip():
            by_source.setdefault(cell.source, cell)
    for i, cell in enumerate(nb.cells):
        twin = by_source.get(cell.source)
        if twin is not None and cell.cell_type == twin.cell_type:
            cell.metadata["nbgrader"] = copy.deepcopy(twin.metadata["nbgrader"])
            used.add(i)
            matched.append(grade_id(twin))
    unmatched: list[str] = []
    for r_cell in released.cells:
        gid = grade_id(r_cell)
        meta = r_cell.get("metadata", {}).get("nbgrader", {})
        if not gid or not meta.get("solution") or gid in matched:
            continue
        candidates = [
            (i, c)
            for i, c in enumerate(nb.cells)
            if i not in used and c.cell_type == r_cell.cell_type
        ]
        first = _first_line(r_cell.source)
        pick = next((i for i, c in candidates if first and _first_line(c.source) == first), None)
        if pick is None and candidates:
            ratio, pick = max(
                (difflib.SequenceMatcher(None, r_cell.source, c.source).ratio(), i)
                for i, c in candidates
            )
            pick = pick if ratio >= 0.5 else None
        if pick is None:
            unmatched.append(gid)
            continue
        nb.cells[pick].metadata["nbgrader"] = copy.deepcopy(meta)
        used.add(pick)
        matched.append(gid)
    return nb, matched, unmatched
